import { printedInSchemaSession } from '#lib/admin/deparse';
import { schemaNotFound } from '#lib/db/catalog';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified } from '#lib/db/identifiers';
import { schemaBusy } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { inTransaction } from '#lib/db/transaction';
import { BadRequest, NotFound } from '#lib/errors';

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

/**
 * Whether the relation is a materialized view, whether it holds rows yet, and whether it has what
 * REFRESH ... CONCURRENTLY needs: a valid unique index over plain columns covering every row (no
 * expression, no WHERE). Read on the service's pool, from the catalog alone.
 */
const REFRESHABLE = `
  SELECT c.relkind::text AS kind, c.relispopulated AS populated,
         EXISTS (SELECT 1 FROM pg_catalog.pg_index i
                  WHERE i.indrelid = c.oid AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
                    AND 0 <> ALL (i.indkey::int2[])) AS keyed
    FROM pg_catalog.pg_namespace n
    LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = $2
   WHERE n.nspname = $1`;

const REFRESH_LOCK_WAIT = '3s';

export interface RefreshViewInput {
  schema: string;
  view: string;
  /** true: refresh without blocking readers, or 400 saying why not; false: lock and refill; unset: concurrently where it can. */
  concurrently?: boolean | undefined;
}

/**
 * Refills a materialized view from its query, in the schema's session: its query reads the
 * schema's tables and may call the schema's functions, so it runs with the schema's rights, as
 * any of the schema's statements. Concurrently (readers keep the old rows until the new ones are
 * in) wherever the view allows it, unless the caller says otherwise.
 */
export async function refreshView(access: SchemaAccess, { schema, view, concurrently }: RefreshViewInput) {
  const { rows } = await access.catalog.query<{ kind: string | null; populated: boolean; keyed: boolean }>({
    name: 'dbadmin.refreshable',
    text: REFRESHABLE,
    values: [schema, view],
  });
  const found = rows[0];
  if (!found) throw schemaNotFound(schema);
  if (found.kind !== 'm') {
    if (found.kind === null)
      throw new NotFound('View not found', `schema "${schema}" has no materialized view "${view}"`);
    throw new BadRequest(
      'Not a materialized view',
      `"${view}" is not a materialized view: only a materialized view keeps rows to refresh`,
    );
  }
  const why = !found.populated
    ? 'it has never been filled: refresh it once without concurrently'
    : !found.keyed
      ? 'it has no unique index over plain columns covering every row: add one (CREATE UNIQUE INDEX in the SQL editor), or refresh without concurrently'
      : undefined;
  if (concurrently === true && why) {
    throw new BadRequest(
      'Cannot refresh concurrently',
      `materialized view "${view}" cannot be refreshed concurrently: ${why}`,
    );
  }
  const together = concurrently ?? !why;
  // A refresh waits for its lock a few seconds at most: while it waits, every later reader of the
  // view queues behind it.
  const sql = `REFRESH MATERIALIZED VIEW ${together ? 'CONCURRENTLY ' : ''}${qualified(schema, view)}`;
  await access
    .run((client) =>
      inTransaction(client, () => client.query(sql), { lockTimeout: REFRESH_LOCK_WAIT, audit: access.audit }),
    )
    .catch((error: unknown) => {
      throw schemaBusy(schema, error);
    });
  return {
    success: true,
    concurrently: together,
    message: `Materialized view "${view}" refreshed${together ? ' concurrently' : ''}`,
  };
}
