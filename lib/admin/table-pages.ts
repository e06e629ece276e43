import type pg from 'pg';
import { rowOrder, schemaNotFound, type TableInfo } from '#lib/db/catalog';
import type { CatalogRead } from '#lib/db/catalog-read';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName } from '#lib/db/identifiers';
import { boundedQuery, type ResultLimits } from '#lib/db/result-limits';
import type { TableEstimate } from '#lib/db/table-estimate';
import { withSessionSettings } from '#lib/db/transaction';
import { BadRequest } from '#lib/errors';

/**
 * A table's rows a page at a time, the page read SPEC's GET /api/table/{tableName} answers (the
 * filters, search and signed cursors of Finding rows are lib/admin/row-search's): the schema's
 * tables, a stable order, the page's rows as the schema's role, and its count while cheap.
 */

/** The schema's tables by name, in one read: its existence and its tables together. */
export const tablesRead = (schema: string): CatalogRead<string[]> => ({
  name: 'dbadmin.list-tables',
  text: `SELECT (SELECT pg_catalog.array_agg(c.relname::text ORDER BY c.relname)
                   FROM pg_catalog.pg_class c
                  WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p')) AS tables
           FROM pg_catalog.pg_namespace n WHERE n.nspname = $1`,
  values: [schema],
  schema,
  decode: (row) => {
    if (!row) throw schemaNotFound(schema);
    return (row.tables as string[] | null) ?? [];
  },
});

/**
 * Totals are exact up to this many rows (counting them takes a few milliseconds); past it, by the
 * planner's statistics, `total` is their estimate and no row is counted.
 */
export const EXACT_COUNT_MAX_ROWS = 50_000;

export interface ReadTableInput {
  /** Which page, when there is no cursor; with one it is only answered back. */
  page: number;
  limit: number;
  /** Count the rows (the default); false skips it (`total: null`) for page turns of big tables. */
  count?: boolean;
  /** A keyset cursor: the rows whose single-column primary key comes after this value, in key order. */
  after?: string | undefined;
}

/** The single-column primary key a page seeks by in its index, or none (no key, or a composite one). */
function seekKey(info: TableInfo) {
  const [key, ...rest] = info.primaryKey;
  const column = info.columns.find((c) => c.name === key);
  if (!column || rest.length > 0) return undefined;
  return { column: `r.${quoteCatalogName(column.name)}`, type: column.valueType };
}

/** Counts the table's rows, stopping one past the threshold: never through a big table. */
const boundedCount = (from: string, parameter: string) =>
  `(SELECT count(*) FROM (SELECT FROM ${from} LIMIT ${parameter}) AS bounded)`;

interface PageQuery {
  text: string;
  values: unknown[];
  /** Each row ends with its key as text and whether a row follows it. */
  seeks: boolean;
  /** Each row ends with the bounded count. */
  counts: boolean;
}

/**
 * One statement for the page, as the schema's role. By a single-column key it seeks in the key's
 * index: past `after`, or from the key that starts the page (found in the index alone, so the rows
 * before it are never read); each row comes with its key as text and whether a row follows it
 * (lead(), so nothing past the page is answered). `after` is cast to the key's type as the catalog
 * prints it, in the schema's session: a value the type refuses is the tenant's error (400), and
 * the type's checks run with the tenant's rights. Other tables page by OFFSET in their stable
 * order. When the total is to be counted, the count rides along on every row (one round trip).
 * Names are qualified by the alias: a bare ORDER BY name could mean one of the added columns.
 */
function pageQuery(info: TableInfo, from: string, input: ReadTableInput, counts: boolean): PageQuery {
  const key = seekKey(info);
  const offset = (input.page - 1) * input.limit;
  const values: unknown[] = [input.limit];
  const bind = (value: unknown) => `$${values.push(value)}`;
  const added: string[] = [];
  let where = '';
  let order: string;
  let skip = '';
  if (key) {
    order = key.column;
    added.push(`${key.column}::text`, `lead(true) OVER (ORDER BY ${key.column})`);
    if (input.after !== undefined) where = `WHERE ${key.column} > ${bind(input.after)}::${key.type}`;
    else if (offset > 0) {
      const start = `SELECT ${key.column} FROM ${from} AS r ORDER BY ${key.column} OFFSET ${bind(offset)} LIMIT 1`;
      where = `WHERE ${key.column} >= (${start})`;
    }
  } else {
    order = rowOrder(info, 'r').join(', ');
    skip = `OFFSET ${bind(offset)}`;
  }
  if (counts) added.push(boundedCount(from, bind(EXACT_COUNT_MAX_ROWS + 1)));
  const select = ['r.*', ...added].join(', ');
  const text = [`SELECT ${select} FROM ${from} AS r`, where, `ORDER BY ${order} LIMIT $1`, skip];
  return {
    text: text.filter(Boolean).join(' '),
    values,
    seeks: Boolean(key),
    counts,
  };
}

/** The rows as objects (as pg makes them), the next page's cursor (null on the last page), the count. */
function pageRows(result: pg.QueryResult | undefined, query: PageQuery) {
  const rows: unknown[][] = result?.rows ?? [];
  const fields = result?.fields ?? [];
  const names = fields
    .slice(0, fields.length - (query.seeks ? 2 : 0) - (query.counts ? 1 : 0))
    .map((f) => f.name);
  const data = rows.map((values) => Object.fromEntries(names.map((name, i) => [name, values[i]])));
  const last = rows.at(-1);
  const follows = query.seeks && last?.[names.length + 1] === true;
  return {
    data,
    nextCursor: follows ? (last?.[names.length] as string) : null,
    counted: query.counts && last ? Number(last.at(-1)) : undefined,
  };
}

type Total = { total: number | null; totalExact: boolean };

interface Counting {
  /** The exact total the page itself shows (read by number, it reached the table's end). */
  known: number | undefined;
  /** The statistics' estimate, when it is past the threshold. */
  estimate: number | undefined;
  /** The bounded count that rode along with the page; none when the page is empty. */
  counted: number | undefined;
}

/**
 * Exact when the page shows it; else the statistics' estimate past the threshold; else the bounded
 * count, exact while it stayed under the threshold. Past it the statistics lag behind the table (a
 * bulk load not yet analysed): the planner's own estimate (it sees the table's current size), at
 * least the rows seen.
 */
async function pageTotal(client: pg.ClientBase, from: string, { known, estimate, counted }: Counting) {
  if (known !== undefined) return { total: known, totalExact: true };
  if (estimate !== undefined) return { total: estimate, totalExact: false };
  const bound = EXACT_COUNT_MAX_ROWS + 1;
  const n =
    counted ??
    Number((await client.query(`SELECT ${boundedCount(from, '$1')} AS n`, [bound])).rows[0]?.n ?? 0);
  if (n <= EXACT_COUNT_MAX_ROWS) return { total: n, totalExact: true };
  const plan = await client.query<{ 'QUERY PLAN': Array<{ Plan?: { 'Plan Rows'?: number } }> }>(
    `EXPLAIN (FORMAT JSON) SELECT * FROM ${from}`,
  );
  const planned = plan.rows[0]?.['QUERY PLAN'][0]?.Plan?.['Plan Rows'] ?? 0;
  return { total: Math.max(Math.round(planned), n), totalExact: false };
}

/**
 * One page of rows in primary-key order, read as the schema's role, with the cursor of the next
 * page and the row count (exact while cheap: pageTotal). Nothing of the table's data is read on
 * the service's connection: only the catalog and the statistics (`info`, tableEstimateRead).
 */
export async function readTable(
  access: SchemaAccess,
  info: TableEstimate,
  limits: ResultLimits,
  input: ReadTableInput,
) {
  const { schema, table } = info;
  const { page, limit, count = true, after } = input;
  if (after !== undefined && !seekKey(info)) {
    throw new BadRequest(
      'No single-column primary key',
      `table "${table}" has ${info.primaryKey.length > 0 ? 'a composite' : 'no'} primary key; after pages by a single-column primary key, page by page number instead`,
    );
  }
  const from = qualified(schema, table);
  const estimate = info.estimatedRows > EXACT_COUNT_MAX_ROWS ? info.estimatedRows : undefined;
  const query = pageQuery(info, from, input, count && estimate === undefined);
  return access.run((client) =>
    withSessionSettings(client, async () => {
      const config: pg.QueryArrayConfig = { text: query.text, values: query.values, rowMode: 'array' };
      const [result] = await boundedQuery(client, config, limits, () => access.cancel(client));
      const { data, nextCursor, counted } = pageRows(result, query);
      const offset = (page - 1) * limit;
      const reachedEnd = query.seeks ? nextCursor === null : data.length < limit;
      const shown = after === undefined && reachedEnd && (data.length > 0 || offset === 0);
      const total: Total = count
        ? await pageTotal(client, from, {
            known: shown ? offset + data.length : undefined,
            estimate,
            counted,
          })
        : { total: null, totalExact: false };
      return { data, columns: info.columns.map((c) => c.name), ...total, page, nextCursor };
    }),
  );
}
