import type pg from 'pg';
import { schemaNotFound } from '#lib/db/catalog';
import { JsonText } from '#lib/json-text';

/**
 * Every table of a schema with its columns and foreign keys, in one catalog query. Types are
 * PostgreSQL's own names in lower-case words (`character varying`, `timestamp without time zone`).
 *
 * Nothing in it takes a lock on a table: a tenant holding its table locked would otherwise stall
 * the service's connection until the query timeout, one per call of its own key. So defaults are
 * deparsed without the relation (`pg_get_expr(..., 0)` opens none; a default cannot name a
 * column), and a generated column has no default, as information_schema.columns has it (its
 * expression names columns, which only the locking deparse can print).
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

/** `{schema: [{table, columns, foreignKeys}]}`, the shape functions/tables declares. */
export async function describeSchema(db: pg.Pool, schema: string): Promise<JsonText> {
  const { rows } = await db.query<{ schema_exists: boolean; entries: string }>({
    name: 'dbadmin.structure',
    text: SCHEMA_STRUCTURE,
    values: [schema],
  });
  if (!rows[0]?.schema_exists) throw schemaNotFound(schema);
  return new JsonText(`{"schema":${rows[0].entries}}`);
}
