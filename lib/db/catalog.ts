import type pg from 'pg';
import { type CatalogRead, type CatalogRow, runCatalogRead } from '#lib/db/catalog-read';
import { quoteCatalogName } from '#lib/db/identifiers';
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

/** What a relation's rows can be: a table's are changed, the others' only read. */
export type RelationKind = 'table' | 'view' | 'materialized view' | 'foreign table';

const KINDS: Record<string, RelationKind> = {
  r: 'table',
  p: 'table',
  v: 'view',
  m: 'materialized view',
  f: 'foreign table',
};

export interface TableInfo {
  schema: string;
  table: string;
  /** A table, or a relation whose rows are only read (reads that ask for one: `readable`). */
  kind: RelationKind;
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
  SELECT c.oid IS NOT NULL AS table_exists, c.relkind::text AS kind,
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
    LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $2 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
   WHERE n.nspname = $1`;

const TABLE_INFO = tableInfoQuery();

export const schemaNotFound = (schema: string) =>
  new NotFound('Schema not found', `schema "${schema}" does not exist`);
export const tableNotFound = (schema: string, table: string) =>
  new NotFound('Table not found', `table "${table}" does not exist in schema "${schema}"`);

interface TableInfoRow {
  table_exists: boolean;
  kind: string | null;
  columns: ColumnInfo[];
  primary_key: string[];
}

/** What toTableInfo accepts: tables alone (whose rows and structure change), or any `readable` relation. */
export type Relations = 'tables' | 'readable';

/**
 * tableInfoQuery's answer as a TableInfo; a missing schema or relation is a 404, and a view where
 * only a table will do is a 400 that says its rows are read, not changed.
 */
export function toTableInfo(
  row: CatalogRow | undefined,
  schema: string,
  table: string,
  relations: Relations = 'tables',
): TableInfo {
  const found = row as TableInfoRow | undefined;
  if (!found) throw schemaNotFound(schema);
  const kind = found.table_exists ? KINDS[found.kind ?? ''] : undefined;
  if (!kind) throw tableNotFound(schema, table);
  if (kind !== 'table' && relations === 'tables') {
    throw new BadRequest(
      'Not a table',
      `"${table}" in schema "${schema}" is a ${kind}: its rows can be read and exported, not changed, and its structure is its definition`,
    );
  }
  return { schema, table, kind, columns: found.columns, primaryKey: found.primary_key };
}

const tableInfoRead = (schema: string, table: string, relations: Relations): CatalogRead<TableInfo> => ({
  name: 'dbadmin.table-info',
  text: TABLE_INFO,
  values: [schema, table],
  schema,
  decode: (row) => toTableInfo(row, schema, table, relations),
});

export const tableInfo = (
  db: pg.Pool | pg.ClientBase,
  schema: string,
  table: string,
  relations: Relations = 'tables',
) => runCatalogRead(db, tableInfoRead(schema, table, relations));

/**
 * The order that makes a page read stable when no key does: the primary key, else the row's place
 * in its heap (a table's and a materialized view's ctid), else, for a view, which has neither, the
 * whole row as text (every type has a text form, not every type an ordering).
 */
export function rowOrder(info: Pick<TableInfo, 'primaryKey' | 'kind'>, alias: string): string[] {
  if (info.primaryKey.length > 0) return info.primaryKey.map((key) => `${alias}.${quoteCatalogName(key)}`);
  return [
    info.kind === 'view' || info.kind === 'foreign table' ? `(${alias}.*)::pg_catalog.text` : `${alias}.ctid`,
  ];
}

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
