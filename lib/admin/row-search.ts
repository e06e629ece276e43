import type pg from 'pg';
import { type Bind, filterFacts, filterSql, parseFilters } from '#lib/admin/row-filter';
import {
  afterSql,
  decodeCursor,
  encodeCursor,
  MAX_CURSOR_LENGTH,
  pageOrderSql,
  parseOrder,
  parseSelect,
  searchSql,
  totalOrder,
} from '#lib/admin/row-view';
import type { TableInfo } from '#lib/db/catalog';
import type { SchemaAccess } from '#lib/db/executor';
import { quoteCatalogName } from '#lib/db/identifiers';
import { boundedQuery, type ResultLimits } from '#lib/db/result-limits';
import type { TableEstimate } from '#lib/db/table-estimate';
import { withSessionSettings } from '#lib/db/transaction';
import { BadRequest } from '#lib/errors';

/**
 * A page of a table as the caller asks to see it: filtered (lib/admin/row-filter), searched,
 * sorted and narrowed to some columns (lib/admin/row-view), paged by number or by a signed cursor
 * over any order. One statement as the schema's role; the count rides along while the table is
 * small, and past that the planner estimates the filtered rows: nothing reads a big table to count.
 */

export interface RowSearch {
  filter?: string[] | undefined;
  or?: string | undefined;
  and?: string | undefined;
  order?: string | undefined;
  select?: string | undefined;
  q?: string | undefined;
}

/** Whether the request asks for more than the plain page in key order. */
export const isSearch = (search: RowSearch) =>
  Object.values(search).some((value) => value !== undefined && !(Array.isArray(value) && value.length === 0));

export interface SearchPageInput extends RowSearch {
  page: number;
  limit: number;
  count: boolean;
  after?: string | undefined;
  /** Signs and checks cursors (DBADMIN_SECRET). */
  cursorSecret: string;
  /** Tables past this many rows (the statistics' estimate) are not counted: the planner estimates. */
  exactCountMaxRows: number;
}

/** The WHERE clause of the request's filters and search over `alias`, its values bound; '' when none. */
export function searchWhere(info: TableInfo, search: RowSearch, alias: string, bind: Bind): string {
  const tree = parseFilters(search);
  const parts: string[] = [];
  if (tree) parts.push(filterSql(tree, info.columns, info.table, alias, bind));
  if (search.q !== undefined && search.q !== '') parts.push(searchSql(search.q, info, alias, bind));
  return parts.join(' AND ');
}

/**
 * The page's one statement, `text` and `values`, and what reading its answer takes: the rows
 * (`shown` columns or all), each followed by its sort keys as text when the order is total
 * (`seeks`), and the bounded count when it rides along.
 */
export function searchStatement(info: TableEstimate, input: SearchPageInput) {
  const from = `${quoteCatalogName(info.schema)}.${quoteCatalogName(info.table)}`;
  const values: unknown[] = [];
  const bind = (value: unknown) => `$${values.push(value)}`;
  const shown = parseSelect(input.select, info);
  const keys = parseOrder(input.order, info);
  const seeks = totalOrder(keys, info);
  const where = searchWhere(info, input, 'r', bind);
  const whereValues = [...values];
  const conditions = where ? [where] : [];
  if (input.after !== undefined) {
    if (!seeks) {
      throw new BadRequest(
        'No primary key',
        `table "${info.table}" has no primary key, so no row can be found again; page by page number instead`,
      );
    }
    const cursor = decodeCursor(input.cursorSecret, info, keys, input.after);
    // What the filter fixes or keeps from NULL lets the index the plan walks seek to the cursor.
    const facts = filterFacts(parseFilters(input), info.columns, info.table);
    conditions.push(afterSql(keys, cursor, 'r', bind, facts));
  }
  const filtered = `${from} AS r${where ? ` WHERE ${where}` : ''}`;
  const countsAlong = input.count && info.estimatedRows <= input.exactCountMaxRows;
  const columns = shown ? shown.map((c) => `r.${quoteCatalogName(c.name)}`) : ['r.*'];
  const extra = [
    ...(seeks ? keys.map((k) => `r.${quoteCatalogName(k.column.name)}::pg_catalog.text`) : []),
    ...(countsAlong
      ? [
          `(SELECT pg_catalog.count(*) FROM (SELECT FROM ${filtered} LIMIT ${bind(input.exactCountMaxRows + 1)}) AS bounded)`,
        ]
      : []),
  ];
  const offset = input.after === undefined ? (input.page - 1) * input.limit : 0;
  const text = [
    `SELECT ${[...columns, ...extra].join(', ')} FROM ${from} AS r`,
    conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : '',
    `ORDER BY ${pageOrderSql(keys, info, 'r')}`,
    `LIMIT ${bind(input.limit + 1)}`,
    offset > 0 ? `OFFSET ${bind(offset)}` : '',
  ]
    .filter(Boolean)
    .join(' ');
  return { text, values, shown, keys, seeks, where, whereValues, filtered, countsAlong, offset };
}

export function searchPage(
  access: SchemaAccess,
  info: TableEstimate,
  limits: ResultLimits,
  input: SearchPageInput,
) {
  return access.run((client) =>
    withSessionSettings(client, () => readSearchPage(client, access, info, limits, input)),
  );
}

async function readSearchPage(
  client: pg.PoolClient,
  access: SchemaAccess,
  info: TableEstimate,
  limits: ResultLimits,
  input: SearchPageInput,
) {
  const { text, values, shown, keys, seeks, where, whereValues, filtered, countsAlong, offset } =
    searchStatement(info, input);
  const [result] = await boundedQuery(
    client,
    { text, values, rowMode: 'array' } as pg.QueryArrayConfig,
    limits,
    () => access.cancel(client),
  );
  const found = pageRows(result, {
    limit: input.limit,
    keys: seeks ? keys.length : 0,
    counts: countsAlong,
  });
  const cursor = found.more && found.lastKeys && encodeCursor(input.cursorSecret, info, keys, found.lastKeys);
  // A sort value so long the cursor would not fit in a URL ends paging by cursor: by number then.
  const nextCursor = cursor && cursor.length <= MAX_CURSOR_LENGTH ? cursor : null;
  const reachedEnd = input.after === undefined && !found.more && (found.data.length > 0 || offset === 0);
  const total = input.count
    ? await searchTotal(client, {
        known: reachedEnd ? offset + found.data.length : undefined,
        counted: found.counted,
        countsAlong,
        filtered,
        values: whereValues,
        where,
        info,
        exactCountMaxRows: input.exactCountMaxRows,
      })
    : { total: null, totalExact: false };
  return {
    data: found.data,
    columns: shown ? shown.map((c) => c.name) : found.names,
    ...total,
    page: input.page,
    nextCursor,
  };
}

/**
 * The page's rows as objects, whether a row follows (one more than the page was read), the last
 * row's sort keys as text (`keys` columns after the row's own) and the count riding on each row.
 */
function pageRows(
  result: pg.QueryResult | undefined,
  shape: { limit: number; keys: number; counts: boolean },
) {
  const rows: unknown[][] = result?.rows ?? [];
  const fields = result?.fields ?? [];
  const width = fields.length - shape.keys - (shape.counts ? 1 : 0);
  const names = fields.slice(0, width).map((f) => f.name);
  const more = rows.length > shape.limit;
  const page = more ? rows.slice(0, shape.limit) : rows;
  const last = page.at(-1);
  return {
    names,
    data: page.map((row) => Object.fromEntries(names.map((name, i) => [name, row[i]]))),
    more,
    lastKeys:
      shape.keys > 0 && last ? (last.slice(width, width + shape.keys) as Array<string | null>) : undefined,
    counted: shape.counts && rows[0] ? Number(rows[0].at(-1)) : undefined,
  };
}

interface Counting {
  known: number | undefined;
  counted: number | undefined;
  countsAlong: boolean;
  filtered: string;
  /** The WHERE clause's values alone. */
  values: unknown[];
  where: string;
  info: TableEstimate;
  exactCountMaxRows: number;
}

/**
 * Exact when the page shows it or the bounded count stayed under the threshold; for a big table,
 * its statistics without a filter, the planner's estimate of the filtered rows with one.
 */
async function searchTotal(client: pg.ClientBase, counting: Counting) {
  const { known, counted, countsAlong, filtered, values, where, info, exactCountMaxRows } = counting;
  if (known !== undefined) return { total: known, totalExact: true };
  let seen = 0;
  if (countsAlong) {
    const n =
      counted ??
      Number(
        (
          await client.query(
            `SELECT pg_catalog.count(*) AS n FROM (SELECT FROM ${filtered} LIMIT ${exactCountMaxRows + 1}) AS bounded`,
            values,
          )
        ).rows[0]?.n ?? 0,
      );
    if (n <= exactCountMaxRows) return { total: n, totalExact: true };
    seen = n;
  }
  // A big table's statistics, unless the count just passed them (a load not yet analysed): then,
  // as readTable's pageTotal does, the planner's estimate, never fewer than the rows counted.
  if (!where && seen === 0) return { total: info.estimatedRows, totalExact: false };
  const plan = await client.query<{ 'QUERY PLAN': Array<{ Plan?: { 'Plan Rows'?: number } }> }>(
    `EXPLAIN (FORMAT JSON) SELECT FROM ${filtered}`,
    values,
  );
  const planned = Math.round(plan.rows[0]?.['QUERY PLAN'][0]?.Plan?.['Plan Rows'] ?? 0);
  return { total: Math.max(planned, seen), totalExact: false };
}
