import type pg from 'pg';
import { type CatalogRead, type CatalogRow, runCatalogRead } from '#lib/db/catalog-read';
import { BadRequest, NotFound } from '#lib/errors';

/**
 * What the catalog says about a table and a schema (columns with their types, the primary key), read
 * on the service's pool without opening the table, and the 404s when they are not there.
 */

export interface ColumnInfo {
  name: string;
  /** As PostgreSQL prints it: `integer`, `character varying(255)`. */
  type: string;
  /** NOT NULL (a primary key's columns are). */
  notNull: boolean;
  /**
   * The type a caller's value is cast to: the column's without its modifier, since a cast to
   * `varchar(20)` or `numeric(10,2)` would cut or round the value and match what it does not say.
   * Typmod -1, not NULL: with NULL, char(n) and bit(n) print as `character` and `bit`, which mean
   * char(1) and bit(1); with -1 they are `bpchar` and `"bit"`, of any length.
   */
  valueType: string;
  /**
   * Whether `=` on it means the same value: false under a nondeterministic collation (`'a' = 'A'`
   * in a case-insensitive one). Left out where a read does not ask.
   */
  deterministic?: boolean;
}

export interface TableInfo {
  schema: string;
  table: string;
  columns: ColumnInfo[];
  /** Primary key columns in key order; empty when the table has none. */
  primaryKey: string[];
}

/** The table's column of that name; 400 naming the table when it has none. */
export function columnOf(info: { table: string; columns: readonly ColumnInfo[] }, name: string): ColumnInfo {
  const found = info.columns.find((c) => c.name === name);
  if (!found) throw new BadRequest('Unknown column', `table "${info.table}" has no column "${name}"`);
  return found;
}

/**
 * One round trip: does the schema exist, the table, its columns and primary key, and `more`
 * (further expressions over `c`, the table's pg_class row: lib/db/table-estimate adds its row
 * estimate). Catalog SQL runs on the service's pool, whose search path is pg_catalog alone.
 */
export const tableInfoQuery = (more = '') => `
  SELECT c.oid IS NOT NULL AS table_exists,
         (SELECT coalesce(json_agg(json_build_object('name', a.attname, 'type', format_type(a.atttypid, a.atttypmod),
                                                     'notNull', a.attnotnull, 'valueType', format_type(a.atttypid, -1),
                                                     'deterministic', a.attcollation = 0 OR coalesce(
                                                       (SELECT co.collisdeterministic FROM pg_collation co WHERE co.oid = a.attcollation), false))
                                   ORDER BY a.attnum), '[]')
            FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS columns,
         (SELECT coalesce(array_agg(a.attname::text ORDER BY k.ord), '{}')
            FROM pg_index i
            CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
           -- Key columns only: an index's INCLUDE columns follow them in indkey.
           WHERE i.indrelid = c.oid AND i.indisprimary AND k.ord <= i.indnkeyatts) AS primary_key${more}
    FROM pg_namespace n
    LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $2 AND c.relkind IN ('r', 'p')
   WHERE n.nspname = $1`;

const TABLE_INFO = tableInfoQuery();

export const schemaNotFound = (schema: string) =>
  new NotFound('Schema not found', `schema "${schema}" does not exist`);
export const tableNotFound = (schema: string, table: string) =>
  new NotFound('Table not found', `table "${table}" does not exist in schema "${schema}"`);

interface TableInfoRow {
  table_exists: boolean;
  columns: ColumnInfo[];
  primary_key: string[];
}

/** tableInfoQuery's answer as a TableInfo; a missing schema or table is a 404. */
export function toTableInfo(row: CatalogRow | undefined, schema: string, table: string): TableInfo {
  const found = row as TableInfoRow | undefined;
  if (!found) throw schemaNotFound(schema);
  if (!found.table_exists) throw tableNotFound(schema, table);
  return { schema, table, columns: found.columns, primaryKey: found.primary_key };
}

const tableInfoRead = (schema: string, table: string): CatalogRead<TableInfo> => ({
  name: 'dbadmin.table-info',
  text: TABLE_INFO,
  values: [schema, table],
  schema,
  decode: (row) => toTableInfo(row, schema, table),
});

export const tableInfo = (db: pg.Pool | pg.ClientBase, schema: string, table: string) =>
  runCatalogRead(db, tableInfoRead(schema, table));

/** Throws when the schema does not exist. */
export async function schemaExists(db: pg.Pool | pg.ClientBase, schema: string): Promise<boolean> {
  const { rowCount } = await db.query({
    name: 'dbadmin.schema-exists',
    text: 'SELECT 1 FROM pg_namespace WHERE nspname = $1',
    values: [schema],
  });
  return Boolean(rowCount);
}

export async function assertSchemaExists(db: pg.Pool | pg.ClientBase, schema: string): Promise<void> {
  if (!(await schemaExists(db, schema))) throw schemaNotFound(schema);
}
