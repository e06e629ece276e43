import type pg from 'pg';
import { type RowSearch, searchWhere } from '#lib/admin/row-search';
import {
  afterSql,
  decodeCursor,
  encodeCursor,
  orderSql,
  pageOrderSql,
  parseOrder,
  parseSelect,
  type SortKey,
} from '#lib/admin/row-view';
import { type TableInfo, tableInfoQuery, toTableInfo } from '#lib/db/catalog';
import type { CatalogRead } from '#lib/db/catalog-read';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName, quoteLiteral } from '#lib/db/identifiers';
import { jsonSql } from '#lib/db/json-rows';
import { type ResultLimits, ResultTooLarge } from '#lib/db/result-limits';
import { readText } from '#lib/db/text-result';
import { inPlainTransaction, withSessionSettings } from '#lib/db/transaction';
import { Download } from '#lib/download';
import { BadRequest, NotFound } from '#lib/errors';
import { JsonText } from '#lib/json-text';

/**
 * A table's rows out as a file: JSON rendered by PostgreSQL (`row_to_json`) or CSV by its `COPY`,
 * read as text while it arrives under the result limits, with the page read's filters, order and
 * selection, and a cursor for the next page of a whole table (GET /api/table/{tableName}/export).
 */

export interface ExportInput extends RowSearch {
  format: 'json' | 'csv';
  limit: number;
  /** A nextCursor of the same export: the rows after it (a whole table, page by page). */
  after?: string | undefined;
  /** Signs and checks cursors (DBADMIN_SECRET). */
  cursorSecret: string;
  /** CSV: the header line (left out of the pages after the first, to join them into one file). */
  header?: boolean | undefined;
  /** CSV: text cells a spreadsheet would run as a formula start with `'` (spreadsheetCell). */
  spreadsheetSafe?: boolean | undefined;
}

/** Numbers, money and oids: what a spreadsheet reads as a number, never a formula, even with a `-`. */
const NUMERIC_TYPES = new Set([20, 21, 23, 26, 700, 701, 790, 1700]);

/**
 * What a spreadsheet may run as a formula (OWASP's CSV injection): a cell that starts with `=`,
 * `+`, `-` or `@` (or their full-width forms), after any blanks a spreadsheet may trim, or with a
 * tab or a carriage return. The same pattern for JavaScript and PostgreSQL's regular expressions:
 * the blanks are spelled out (JavaScript's `\s`), since PostgreSQL's `\s` follows the database's
 * LC_CTYPE, and under the C locale would let a cell pass that its column's name would not.
 */
const FORMULA_START =
  /^(?:[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]*[=+@\uff1d\uff0b\uff0d\uff20-]|[\t\r])/;

/**
 * A cell as a spreadsheet may open it: one that starts like a formula gets a leading `'`, which
 * spreadsheets take as "text" and do not show. Numbers are left as they are. Not for a round
 * trip: the value changes.
 */
function spreadsheetCell(column: ExportColumn, header: boolean): string {
  const name = quoteCatalogName(column.name);
  const label = header ? quoteCatalogName(spreadsheetText(column.name)) : name;
  if (NUMERIC_TYPES.has(column.type)) return `r.${name} AS ${label}`;
  const text = `r.${name}::pg_catalog.text`;
  return `CASE WHEN ${text} OPERATOR(pg_catalog.~) ${quoteLiteral(FORMULA_START.source)}
     THEN pg_catalog.concat('''', ${text}) ELSE ${text} END AS ${label}`;
}

/** A column's name in the header line, under the same rule as its cells (a tenant names columns). */
const spreadsheetText = (name: string) => (FORMULA_START.test(name) ? `'${name}` : name);

/** A column as the export renders it: by its type, a domain by the type under it. */
interface ExportColumn {
  name: string;
  /** The base type's oid. */
  type: number;
}

/**
 * tableInfo's question (lib/db/catalog) and each column's base type (a domain's, through any
 * domains under it) in one round trip on the catalog pool, whose search path is pg_catalog alone.
 */
const EXPORT_COLUMNS = tableInfoQuery(`,
         (WITH RECURSIVE typ (attnum, typid, depth) AS (
            SELECT a.attnum, a.atttypid, 0 FROM pg_attribute a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            UNION ALL
            SELECT typ.attnum, t.typbasetype, typ.depth + 1
              FROM typ JOIN pg_type t ON t.oid = typ.typid
             WHERE t.typtype = 'd')
          SELECT coalesce(json_agg(json_build_object('type', b.typid::int8) ORDER BY b.attnum), '[]')
            FROM (SELECT DISTINCT ON (attnum) attnum, typid FROM typ ORDER BY attnum, depth DESC) b) AS base_types`);

/** The table's columns as the export renders them, and its primary key: one catalog read. */
export interface ExportTable {
  schema: string;
  table: string;
  columns: ExportColumn[];
  primaryKey: string[];
  /** The table as filters, order and select read it. */
  info: TableInfo;
}

export const exportTableRead = (schema: string, table: string): CatalogRead<ExportTable> => ({
  name: 'dbadmin.export-columns',
  text: EXPORT_COLUMNS,
  values: [schema, table],
  schema,
  decode: (row) => {
    const info = toTableInfo(row, schema, table, 'readable');
    // Both lists are the table's live columns in attnum order.
    const types = (row?.base_types ?? []) as Omit<ExportColumn, 'name'>[];
    const columns = info.columns.map((column, i) => ({
      name: column.name,
      ...(types[i] as Omit<ExportColumn, 'name'>),
    }));
    return { schema, table, columns, primaryKey: info.primaryKey, info };
  },
});

/**
 * The values of the JSON export are the table read's (lib/db/json-rows), rendered by PostgreSQL:
 * each column becomes the expression jsonSql gives for its base type (a domain's, through any
 * domains under it), which row_to_json renders as the table read answers it. A tenant's own
 * enums, composites and arrays of them print as it says, in its own session.
 */
const jsonValue = (column: ExportColumn) => jsonSql(`t.${quoteCatalogName(column.name)}`, column.type);

const noData = (table: string, filtered: boolean) =>
  new NotFound(
    'No data to export',
    `table "${table}" has no rows${filtered ? ' that match the filter' : ''}`,
  );

/**
 * Both formats are rendered by PostgreSQL and read as text while they arrive (lib/db/text-result),
 * on a session of the schema's role, in primary-key order or the order asked: CSV by its own COPY
 * (RFC 4180 quoting, header line), JSON by row_to_json over expressions that give the table read's
 * values. The result limits hold: one row more than QUERY_MAX_ROWS is asked for, to tell a result
 * that is too long; past QUERY_MAX_BYTES the statement is cancelled and nothing more is kept.
 *
 * Filters (lib/admin/row-filter) need their values bound, and COPY takes no parameters: the
 * values are bound into settings of the export's transaction first (one statement, extended
 * protocol), which the filter reads with current_setting; they end with the transaction.
 */
export async function exportTable(
  access: SchemaAccess,
  table: ExportTable,
  limits: ResultLimits,
  input: ExportInput,
) {
  const { info } = table;
  const settings: string[] = [];
  const bind = (value: unknown) => {
    settings.push(Array.isArray(value) ? arrayLiteral(value.map(String)) : String(value));
    return `pg_catalog.current_setting('dbadmin.export_${settings.length}')`;
  };
  const keys = parseOrder(input.order, info);
  const where = [searchWhere(info, input, 'r', bind), after(info, keys, input, bind)]
    .filter(Boolean)
    .join(' AND ');
  const shown = parseSelect(input.select, info) ?? info.columns;
  // row_to_json's expressions, in the order selected.
  const columns = shown.map((c) => table.columns.find((e) => e.name === c.name) as ExportColumn);
  const selected =
    input.format === 'csv' && input.spreadsheetSafe
      ? columns.map((column) => spreadsheetCell(column, input.header !== false))
      : shown.map((c) => `r.${quoteCatalogName(c.name)}`);
  const rows = [
    `SELECT ${selected.join(', ')} FROM ${qualified(table.schema, table.table)} AS r`,
    where ? `WHERE ${where}` : '',
    `ORDER BY ${pageOrderSql(keys, table.info, 'r')}`,
    `LIMIT ${Math.min(Math.trunc(input.limit), limits.maxRows + 1)}`,
  ]
    .filter(Boolean)
    .join(' ');
  const csv = input.format === 'csv';
  const header = !csv || input.header !== false;
  const sql = csv
    ? `COPY (${rows}) TO STDOUT WITH (FORMAT csv, HEADER ${header})`
    : `SELECT pg_catalog.row_to_json(r.*) FROM (SELECT ${columns
        .map((column) => `${jsonValue(column)} AS ${quoteCatalogName(column.name)}`)
        .join(', ')} FROM (${rows}) t) r`;
  const paged = info.primaryKey.length > 0;
  const { text, records, last } = await access.run((client) =>
    // The cursor and the page it ends are read in one snapshot: a write between them moves neither.
    // The filter's values are settings of that transaction.
    inOneSnapshot(client, access.readOnly, paged || settings.length > 0, async () => {
      if (settings.length > 0) await client.query(settingsSql(settings.length), settings);
      const boundary = paged ? await lastKeys(client, table, keys, where, input.limit) : undefined;
      return { ...(await readText(client, sql, limits, () => access.cancel(client))), last: boundary };
    }),
  );
  const count = csv && header ? records - 1 : records;
  if (count > limits.maxRows) throw new ResultTooLarge('QUERY_MAX_ROWS', limits.maxRows);
  // After a cursor, no rows is the end of the table (its last rows deleted meanwhile): a page of none.
  if (count <= 0 && input.after === undefined) throw noData(table.table, where !== '');
  const nextCursor = last ? encodeCursor(input.cursorSecret, info, keys, last) : undefined;
  return exported(table.table, csv, text, Math.max(count, 0), nextCursor);
}

/** The page as its format answers it: CSV with X-Next-Cursor, or SPEC's JSON with nextCursor. */
function exported(table: string, csv: boolean, text: string, count: number, nextCursor: string | undefined) {
  if (csv) {
    const headers: Record<string, string> = nextCursor ? { 'x-next-cursor': nextCursor } : {};
    return new Download(text, 'text/csv; charset=utf-8', `${table}.csv`, headers);
  }
  // SPEC's answer is {table, count, data}: nextCursor joins it only when more rows follow.
  const next = nextCursor ? `"nextCursor":${JSON.stringify(nextCursor)},` : '';
  return new JsonText(`{"table":${JSON.stringify(table)},"count":${count},${next}"data":[${text}]}`);
}

/**
 * `work` in one REPEATABLE READ snapshot when `needed`: its own transaction, or, for an anon key
 * (whose work runs in a read-only transaction already open), that one's isolation.
 */
async function inOneSnapshot<T>(
  client: pg.ClientBase,
  inTransaction: boolean,
  needed: boolean,
  work: () => Promise<T>,
) {
  // Else as a page read: alone, or through a transaction pooler in a transaction of its own.
  if (!needed) return withSessionSettings(client, work);
  if (inTransaction) {
    await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ');
    return work();
  }
  // Not READ ONLY: the export reads as the page read does, code a tenant planted there included.
  return inPlainTransaction(client, 'BEGIN ISOLATION LEVEL REPEATABLE READ', work);
}

/** The rows after the cursor `after` names, in this order; none without a cursor. */
function after(
  info: TableInfo,
  keys: SortKey[],
  input: ExportInput,
  bind: (value: unknown) => string,
): string {
  if (input.after === undefined) return '';
  if (info.primaryKey.length === 0) {
    throw new BadRequest(
      'No primary key',
      `table "${info.table}" has no primary key, so no row can be found again: export it in one go (limit)`,
    );
  }
  return afterSql(keys, decodeCursor(input.cursorSecret, info, keys, input.after), 'r', bind);
}

/**
 * The sort keys of the page's last row, when rows follow it (else undefined: the last page): read
 * along the order's index before the page itself, as COPY's output has no room for them.
 */
async function lastKeys(
  client: pg.ClientBase,
  table: ExportTable,
  keys: SortKey[],
  where: string,
  limit: number,
): Promise<Array<string | null> | undefined> {
  const values = keys.map((k) => `r.${quoteCatalogName(k.column.name)}::pg_catalog.text`);
  const { rows } = await client.query<Array<string | null>>({
    text: `SELECT ${values.join(', ')} FROM ${qualified(table.schema, table.table)} AS r
            ${where ? `WHERE ${where}` : ''} ORDER BY ${orderSql(keys, 'r')} OFFSET ${Math.trunc(limit) - 1} LIMIT 2`,
    rowMode: 'array',
  } as pg.QueryConfig);
  return rows.length === 2 ? rows[0] : undefined;
}

/** One statement that sets each value bound as `dbadmin.export_<n>` for the transaction. */
const settingsSql = (n: number) =>
  `SELECT ${Array.from({ length: n }, (_, i) => `pg_catalog.set_config('dbadmin.export_${i + 1}', $${i + 1}, true)`).join(', ')}`;

/** A PostgreSQL array literal of text elements, each quoted: `{"a","b\\"c"}`. */
const arrayLiteral = (items: string[]) =>
  `{${items.map((item) => `"${item.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`;
