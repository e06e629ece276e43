import { printedInSchemaSession } from '#lib/admin/deparse';
import { schemaNotFound } from '#lib/db/catalog';
import type { SchemaAccess } from '#lib/db/executor';
import { schemaBusy } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';

/**
 * A schema's views and materialized views with their definitions. The catalog rows (pg_class,
 * pg_attribute, pg_description) are read on the service's pool and take no lock. pg_get_viewdef
 * does: it takes ACCESS SHARE on every table the view reads (the rewriter's locks, before it
 * deparses), so a tenant holding one of them in ACCESS EXCLUSIVE would stall it. Definitions are
 * therefore printed in the schema's session, waiting at most 50 ms, and null while locked.
 */
const VIEWS = `
  SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists,
         (SELECT coalesce(json_agg(json_build_object(
                    'name', c.relname,
                    'materialized', c.relkind = 'm',
                    'populated', c.relispopulated,
                    'columns', (SELECT coalesce(json_agg(json_build_object(
                                          'name', a.attname, 'type', format_type(a.atttypid, NULL))
                                        ORDER BY a.attnum), '[]')
                                  FROM pg_attribute a
                                 WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
                    'comment', d.description
                  ) ORDER BY c.relname), '[]')
            FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
            LEFT JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
           WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')) AS views`;

interface ViewRow {
  name: string;
  materialized: boolean;
  populated: boolean;
  columns: { name: string; type: string }[];
  comment: string | null;
}

const DEFINITIONS = `
  SELECT c.relname::text AS name, pg_catalog.pg_get_viewdef(c.oid) AS definition
    FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1 AND c.relkind IN ('v', 'm')`;

export async function listViews(access: SchemaAccess) {
  const { schema } = access;
  const { rows } = await withTransaction(
    access.catalog,
    (client) =>
      client.query<{ schema_exists: boolean; views: ViewRow[] }>({
        name: 'dbadmin.views',
        text: VIEWS,
        values: [schema],
      }),
    { lockTimeout: '50ms' },
  ).catch((error: unknown) => {
    throw schemaBusy(schema, error);
  });
  if (!rows[0]?.schema_exists) throw schemaNotFound(schema);
  const found = rows[0].views;
  const definitions = found.length
    ? await printedInSchemaSession(access, DEFINITIONS, [access.schema])
    : new Map<string, string>();
  return {
    schema,
    definitionsRead: definitions !== undefined,
    views: found.map((view) => ({ ...view, definition: definitions?.get(view.name) ?? null })),
  };
}
