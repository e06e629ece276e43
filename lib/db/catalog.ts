import type pg from 'pg';
import { NotFound } from '#lib/errors';

export interface ColumnInfo {
  name: string;
  /** As PostgreSQL prints it: `integer`, `character varying(255)`. */
  type: string;
}

export interface TableInfo {
  schema: string;
  table: string;
  columns: ColumnInfo[];
  /** Primary key columns in key order; empty when the table has none. */
  primaryKey: string[];
  /** The role `<schema>_user` when it owns the schema (schemas made through the API). */
  schemaUser: string | null;
}

/** One round trip: does the schema exist, the table, its columns and primary key. */
const TABLE_INFO = `
  SELECT c.oid IS NOT NULL AS table_exists,
         CASE WHEN pg_get_userbyid(n.nspowner) = n.nspname || '_user' THEN n.nspname || '_user' END AS schema_user,
         (SELECT coalesce(json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod))
                                   ORDER BY a.attnum), '[]')
            FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         (SELECT coalesce(array_agg(a.attname::text ORDER BY k.ord), '{}')
            FROM pg_index i
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
           WHERE i.indrelid = c.oid AND i.indisprimary) AS primary_key
    FROM pg_namespace n
    LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $2 AND c.relkind IN ('r', 'p')
   WHERE n.nspname = $1`;

export const schemaNotFound = (schema: string) =>
  new NotFound('Schema not found', `schema "${schema}" does not exist`);
export const tableNotFound = (schema: string, table: string) =>
  new NotFound('Table not found', `table "${table}" does not exist in schema "${schema}"`);

export async function tableInfo(
  db: pg.Pool | pg.ClientBase,
  schema: string,
  table: string,
): Promise<TableInfo> {
  const { rows } = await db.query<{
    table_exists: boolean;
    schema_user: string | null;
    columns: ColumnInfo[];
    primary_key: string[];
  }>({ name: 'dbadmin.table-info', text: TABLE_INFO, values: [schema, table] });
  const row = rows[0];
  if (!row) throw schemaNotFound(schema);
  if (!row.table_exists) throw tableNotFound(schema, table);
  return { schema, table, columns: row.columns, primaryKey: row.primary_key, schemaUser: row.schema_user };
}

/** The schema's owner when it is the schema's own user; throws when the schema does not exist. */
export async function schemaInfo(
  db: pg.Pool | pg.ClientBase,
  schema: string,
): Promise<{ schemaUser: string | null }> {
  const { rows } = await db.query<{ schema_user: string | null }>({
    name: 'dbadmin.schema-info',
    text: `SELECT CASE WHEN pg_get_userbyid(nspowner) = nspname || '_user' THEN nspname || '_user' END AS schema_user
             FROM pg_namespace WHERE nspname = $1`,
    values: [schema],
  });
  const row = rows[0];
  if (!row) throw schemaNotFound(schema);
  return { schemaUser: row.schema_user };
}
