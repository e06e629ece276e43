import type pg from 'pg';
import { schemaNotFound } from '#lib/db/catalog';
import { quoteLiteral } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { ApiError } from '#lib/errors';
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
const structure = (schemaLiteral: string) => `
  WITH tables AS (
    SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = ${schemaLiteral} AND c.relkind IN ('r', 'p')
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
 * How long the read may wait for a table lock (see structure) before it answers 409: long enough
 * for a tenant's quick DDL to commit, short enough that a held lock costs the service's pool no
 * more than a request does.
 */
const LOCK_WAIT = '50ms';

/**
 * One round trip: whether the schema exists, and its entries in table order as JSON text, which
 * is sent as it is (a 500-table schema is half a megabyte: not parsed here only to be written
 * again). The lock wait is set for this statement's implicit transaction alone, so it goes out as
 * one simple-protocol string, the schema name a quoted literal.
 */
const schemaStructure = (schema: string) => `SET LOCAL lock_timeout = '${LOCK_WAIT}';
  SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = ${quoteLiteral(schema)}) AS schema_exists,
         (SELECT coalesce(json_agg(e ORDER BY e."table"), '[]')::text
            FROM (${structure(quoteLiteral(schema))}) e) AS entries`;

const tablesLocked = (schema: string, cause: unknown) =>
  new ApiError(
    409,
    'Tables locked',
    `a table of schema "${schema}" is locked by a transaction still open (a schema change, or LOCK TABLE); try again once it ends`,
    { cause },
  );

/** `{schema: [{table, columns, foreignKeys}]}`, the shape functions/tables declares. */
export async function describeSchema(db: pg.Pool, schema: string): Promise<JsonText> {
  const results = (await db.query(schemaStructure(schema)).catch((error: unknown) => {
    throw isPgError(error) && error.code === '55P03' ? tablesLocked(schema, error) : error;
  })) as unknown as pg.QueryResult<{ schema_exists: boolean; entries: string }>[];
  const [row] = results[1]?.rows ?? [];
  if (!row?.schema_exists) throw schemaNotFound(schema);
  return new JsonText(`{"schema":${row.entries}}`);
}
