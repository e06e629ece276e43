import type pg from 'pg';
import { schemaNotFound } from '#lib/db/catalog';
import { schemaBusy } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { JsonText } from '#lib/json-text';

/**
 * Every table of a schema with its columns and foreign keys, in one catalog query. Types are
 * PostgreSQL's own names in lower-case words (`character varying`, `timestamp without time zone`).
 *
 * It must not wait on a lock a tenant holds on its tables: that would keep one of the service's
 * connections for the query timeout, one per call of the tenant's own key. Defaults are deparsed
 * without the relation (`pg_get_expr(..., 0)` opens none; a default cannot name a column), and a
 * generated column has no default, as information_schema.columns has it (its expression names
 * columns, which only the locking deparse prints). Printing a default's constant of a row type
 * still loads that table's layout, under a lock: describeSchema bounds the wait.
 */
const STRUCTURE = `
  WITH tables AS (
    SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'p')
  ),
  primary_keys AS (
    SELECT i.indrelid, i.indkey FROM pg_index i JOIN tables t ON t.oid = i.indrelid WHERE i.indisprimary
  )
  SELECT t.relname AS "table",
         (SELECT coalesce(json_agg(json_build_object(
                    'name', a.attname,
                    'type', format_type(a.atttypid, NULL),
                    'maxLength', CASE WHEN a.atttypid IN ('bpchar'::regtype, 'varchar'::regtype) AND a.atttypmod > 0
                                      THEN a.atttypmod - 4 END,
                    'nullable', NOT a.attnotnull,
                    'defaultValue', CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, 0) END,
                    'primaryKey', coalesce(a.attnum = ANY(pk.indkey), false)
                  ) ORDER BY a.attnum), '[]')
            FROM pg_attribute a
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            LEFT JOIN primary_keys pk ON pk.indrelid = a.attrelid
           WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         (SELECT coalesce(json_agg(json_build_object(
                    'column', a.attname,
                    'referencedTable', rc.relname,
                    'referencedColumn', ra.attname,
                    'constraintName', con.conname
                  ) ORDER BY con.conname, k.ord), '[]')
            FROM pg_constraint con
            CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(attnum, refattnum, ord)
            JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
            JOIN pg_class rc ON rc.oid = con.confrelid
            JOIN pg_attribute ra ON ra.attrelid = con.confrelid AND ra.attnum = k.refattnum
           WHERE con.conrelid = t.oid AND con.contype = 'f') AS "foreignKeys"
    FROM tables t`;

/**
 * One round trip: whether the schema exists, and its entries in table order as JSON text, which
 * is sent as it is (a 500-table schema is half a megabyte: not parsed here only to be written
 * again).
 */
const SCHEMA_STRUCTURE = `
  SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists,
         (SELECT coalesce(json_agg(e ORDER BY e."table"), '[]')::text FROM (${STRUCTURE}) e) AS entries`;

/**
 * `{schema: [{table, columns, foreignKeys}]}`, the shape functions/tables declares. In a
 * transaction whose lock waits end after 50 ms (see STRUCTURE), then a 409: long enough for a
 * tenant's quick schema change to commit, short enough that a lock held on purpose costs the
 * service's pool no more than any request does.
 */
export async function describeSchema(db: pg.Pool, schema: string): Promise<JsonText> {
  const { rows } = await withTransaction(
    db,
    (client) =>
      client.query<{ schema_exists: boolean; entries: string }>({
        name: 'dbadmin.structure',
        text: SCHEMA_STRUCTURE,
        values: [schema],
      }),
    { lockTimeout: '50ms' },
  ).catch((error: unknown) => {
    throw schemaBusy(schema, error);
  });
  if (!rows[0]?.schema_exists) throw schemaNotFound(schema);
  return new JsonText(`{"schema":${rows[0].entries}}`);
}
