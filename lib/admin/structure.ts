import type pg from 'pg';
import { schemaNotFound } from '#lib/db/catalog';
import { isPgError, schemaBusy } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { JsonText } from '#lib/json-text';

/**
 * Every table of a schema with its columns, foreign keys, indexes, unique and check constraints,
 * comments, size and row estimate, in one catalog query. Types are
 * PostgreSQL's own names in lower-case words (`character varying`, `timestamp without time zone`).
 *
 * It must not wait on a lock a tenant holds on its tables: that would keep one of the service's
 * connections for the query timeout, one per call of the tenant's own key. Defaults are deparsed
 * without the relation (`pg_get_expr(..., 0)` opens none; a default cannot name a column), and a
 * generated column has no default, as information_schema.columns has it (its expression names
 * columns, which only the locking deparse prints). Printing a default's constant of a row type
 * still loads that table's layout, under a lock: describeSchema bounds the wait.
 *
 * The rest reads catalog rows alone, which takes no lock: indexes (key columns from pg_attribute,
 * null for an expression; sizes from relpages, where pg_relation_size would lock the index; no
 * pg_get_indexdef, which opens the table), unique and check constraints by name and columns (a
 * check's expression prints only with the table open: GET .../constraints prints it in the
 * schema's session), comments (pg_description), size and row estimate (relpages, reltuples: -1,
 * answered null, until the table is first vacuumed or analyzed), and each foreign key's
 * referenced schema.
 */
const structure = (printedDefault: string) => `
  WITH tables AS (
    SELECT c.oid, c.relname, c.relpages, c.reltuples FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
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
                    'defaultValue', CASE WHEN a.attgenerated = '' THEN ${printedDefault} END,
                    'identity', CASE a.attidentity WHEN 'a' THEN 'always' WHEN 'd' THEN 'by default' END,
                    'generated', a.attgenerated <> '',
                    'primaryKey', coalesce(a.attnum = ANY(pk.indkey), false),
                    'comment', cd.description
                  ) ORDER BY a.attnum), '[]')
            FROM pg_attribute a
            LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            LEFT JOIN primary_keys pk ON pk.indrelid = a.attrelid
            LEFT JOIN pg_description cd ON cd.objoid = a.attrelid AND cd.classoid = 'pg_class'::regclass
                                       AND cd.objsubid = a.attnum
           WHERE a.attrelid = t.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         (SELECT coalesce(json_agg(json_build_object(
                    'column', a.attname,
                    'referencedTable', rc.relname,
                    'referencedColumn', ra.attname,
                    'constraintName', con.conname,
                    'referencedSchema', rn.nspname
                  ) ORDER BY con.conname, k.ord), '[]')
            FROM pg_constraint con
            CROSS JOIN LATERAL unnest(con.conkey, con.confkey) WITH ORDINALITY AS k(attnum, refattnum, ord)
            JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
            JOIN pg_class rc ON rc.oid = con.confrelid
            JOIN pg_namespace rn ON rn.oid = rc.relnamespace
            JOIN pg_attribute ra ON ra.attrelid = con.confrelid AND ra.attnum = k.refattnum
           WHERE con.conrelid = t.oid AND con.contype = 'f') AS "foreignKeys",
         (SELECT coalesce(json_agg(json_build_object(
                    'name', ic.relname,
                    'columns', (SELECT coalesce(json_agg(a.attname ORDER BY k.ord), '[]')
                                  FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
                                  LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                                                          AND k.attnum > 0
                                 WHERE k.ord <= i.indnkeyatts),
                    'unique', i.indisunique,
                    'primary', i.indisprimary,
                    'method', am.amname,
                    'valid', i.indisvalid,
                    'sizeBytes', ic.relpages::int8 * current_setting('block_size')::int8
                  ) ORDER BY ic.relname), '[]')
            FROM pg_index i
            JOIN pg_class ic ON ic.oid = i.indexrelid
            JOIN pg_am am ON am.oid = ic.relam
           WHERE i.indrelid = t.oid) AS indexes,
         (SELECT coalesce(json_agg(json_build_object(
                    'name', con.conname,
                    'type', CASE con.contype WHEN 'u' THEN 'unique' ELSE 'check' END,
                    'columns', (SELECT coalesce(json_agg(a.attname ORDER BY k.ord), '[]')
                                  FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
                                  JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum)
                  ) ORDER BY con.conname), '[]')
            FROM pg_constraint con
           WHERE con.conrelid = t.oid AND con.contype IN ('u', 'c')) AS constraints,
         td.description AS comment,
         t.relpages::int8 * current_setting('block_size')::int8 AS "sizeBytes",
         CASE WHEN t.reltuples >= 0 THEN t.reltuples::int8 END AS "estimatedRows"
    FROM tables t
    LEFT JOIN pg_description td ON td.objoid = t.oid AND td.classoid = 'pg_class'::regclass AND td.objsubid = 0`;

/**
 * One round trip: whether the schema exists, and its entries in table order as JSON text, which
 * is sent as it is (a 500-table schema is half a megabyte: not parsed here only to be written
 * again).
 */
const schemaStructure = (printedDefault: string) => `
  SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1) AS schema_exists,
         (SELECT coalesce(json_agg(e ORDER BY e."table"), '[]')::text FROM (${structure(printedDefault)}) e) AS entries`;

/**
 * Defaults printed by PostgreSQL, and, when that fails for one of them, each printed apart: a
 * constant of a table's row type, stored in a default before that table's columns changed type,
 * no longer prints (PostgreSQL reads it with the new layout: "compressed pglz data is corrupt").
 * The tenant's own doing, and its inserts fail the same way; the rest of its schema is still
 * described, that default answered null (migration 11's _dbadmin.printed_default).
 */
const STRUCTURE_READ = { name: 'dbadmin.structure', text: schemaStructure('pg_get_expr(d.adbin, 0)') };
const EACH_DEFAULT_READ = {
  name: 'dbadmin.structure-each-default',
  text: schemaStructure('_dbadmin.printed_default(d.adbin)'),
};

/**
 * `{schema: [{table, columns, foreignKeys, indexes, constraints, comment, sizeBytes, estimatedRows}]}`,
 * the shape functions/tables declares. In a
 * transaction whose lock waits end after 50 ms (see STRUCTURE), then a 409: long enough for a
 * tenant's quick schema change to commit, short enough that a lock held on purpose costs the
 * service's pool no more than any request does.
 */
export async function describeSchema(db: pg.Pool, schema: string): Promise<JsonText> {
  const read = (query: typeof STRUCTURE_READ) =>
    withTransaction(
      db,
      (client) => client.query<{ schema_exists: boolean; entries: string }>({ ...query, values: [schema] }),
      { lockTimeout: '50ms' },
    );
  const { rows } = await read(STRUCTURE_READ)
    .catch((error: unknown) => {
      if (!isPgError(error) || NOT_A_DEFAULT.has(error.code)) throw error;
      return read(EACH_DEFAULT_READ);
    })
    .catch((error: unknown) => {
      throw schemaBusy(schema, error);
    });
  if (!rows[0]?.schema_exists) throw schemaNotFound(schema);
  return new JsonText(`{"schema":${rows[0].entries}}`);
}

/** Failures no default causes: a lock wait that ended (409), a timeout or cancel, the connection's. */
const NOT_A_DEFAULT = new Set(['55P03', '57014', '57P01', '08006', '08003', '53300']);
