import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import type { TableInfo } from '#lib/db/catalog';
import { qualified, quoteCatalogName } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { beginText } from '#lib/db/pooler';
import { BadRequest } from '#lib/errors';

/**
 * A change that some rows fail (a type they do not fit, a NOT NULL, a unique or check constraint):
 * how many rows, and the first few keys (or, for uniqueness, the values held more than once),
 * counted in the schema's session after the change rolled back, so the caller's expression runs
 * with the schema's rights only. Any other error, or a count that finds nothing, is left as it is.
 */

/** How long counting the failing rows may take before the caller gets PostgreSQL's reason alone. */
const EXPLAIN_TIMEOUT_MS = 5000;

/** At most this many keys or values are named. */
const SHOWN = 5;

interface Found {
  n: number;
  shown: string[];
  /** For duplicates: the rows that hold them. */
  rows?: number;
}

const names = (columns: string[]) => columns.map(quoteCatalogName);

/** `2 rows of "t" (id "2", "4")`. */
function rowsNamed(info: TableInfo, { n, shown }: Found): string {
  const more = n > SHOWN ? ', ...' : '';
  const keys = shown.map((k) => JSON.stringify(k)).join(', ');
  return `${n} row${n === 1 ? '' : 's'} of "${info.table}" (${info.primaryKey[0] ?? 'ctid'} ${keys}${more})`;
}

/** Runs `count` in a transaction it rolls back; its failure leaves the original error standing. */
async function counted(
  client: pg.ClientBase,
  error: unknown,
  count: () => Promise<Found>,
  explain: (found: Found) => BadRequest,
): Promise<unknown> {
  try {
    // A second scan, per row in the worst case: past a few seconds the original error stands.
    await client.query(`${beginText(client)}; SET LOCAL statement_timeout = ${EXPLAIN_TIMEOUT_MS}`);
    const found = await count();
    return found.n === 0 ? error : explain(found);
  } catch {
    return error;
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
  }
}

/** The rows of the table (as `r`) where `where` holds: how many, and the first keys. */
async function failing(client: pg.ClientBase, info: TableInfo, where: string): Promise<Found> {
  const key = info.primaryKey[0] ? quoteCatalogName(info.primaryKey[0]) : 'ctid';
  const { rows } = await client.query<{ n: string; shown: string[] | null }>({
    text: `SELECT pg_catalog.count(*) AS n,
                  (pg_catalog.array_agg(r.${key}::pg_catalog.text ORDER BY r.${key}))[1:${SHOWN}] AS shown
             FROM ${qualified(info.schema, info.table)} AS r WHERE ${where}`,
    queryMode: 'extended',
  } as pg.QueryConfig);
  return { n: Number(rows[0]?.n ?? 0), shown: rows[0]?.shown ?? [] };
}

/** A unique constraint (or primary key) some rows break: the values held by more than one row. */
export function explainDuplicates(
  client: pg.ClientBase,
  info: TableInfo,
  columns: string[],
  error: unknown,
): Promise<unknown> {
  if (!isPgError(error) || error.code !== '23505' || columns.length === 0) return Promise.resolve(error);
  const cols = names(columns);
  const value =
    cols.length === 1 ? `${cols[0]}::pg_catalog.text` : `ROW(${cols.join(', ')})::pg_catalog.text`;
  return counted(
    client,
    error,
    async () => {
      const { rows } = await client.query<{ n: string; rows: string; shown: string[] | null }>(
        `SELECT pg_catalog.count(*) AS n, pg_catalog.sum(d.n) AS rows,
                (pg_catalog.array_agg(d.v ORDER BY d.v))[1:${SHOWN}] AS shown
           FROM (SELECT ${value} AS v, pg_catalog.count(*) AS n FROM ${qualified(info.schema, info.table)}
                  WHERE ${cols.map((c) => `${c} IS NOT NULL`).join(' AND ')}
                  GROUP BY ${cols.join(', ')} HAVING pg_catalog.count(*) > 1) AS d`,
      );
      const row = rows[0];
      return { n: Number(row?.n ?? 0), shown: row?.shown ?? [], rows: Number(row?.rows ?? 0) };
    },
    (found) => {
      const shown = found.shown.map((v) => JSON.stringify(v)).join(', ');
      return new BadRequest(
        'Rows are not unique',
        `${found.n} value${found.n === 1 ? ' is' : 's are'} held by more than one row of "${info.table}" in (${columns.join(', ')}), ${found.rows} rows in all: ${shown}${found.n > SHOWN ? ', ...' : ''}; nothing was changed`,
        error,
      );
    },
  );
}

/** A check some rows fail: the rows for which the expression is false. */
export function explainFailingCheck(
  client: pg.ClientBase,
  info: TableInfo,
  check: string,
  error: unknown,
): Promise<unknown> {
  if (!isPgError(error) || error.code !== '23514') return Promise.resolve(error);
  return counted(
    client,
    error,
    () => failing(client, info, `NOT (${check})`),
    (found) =>
      new BadRequest(
        'Rows fail the check',
        `${rowsNamed(info, found)} fail the check (${check}); nothing was changed`,
        error,
      ),
  );
}

/** A NOT NULL or a primary key over NULLs: the rows that hold NULL in one of its columns. */
export function explainNulls(
  client: pg.ClientBase,
  info: TableInfo,
  columns: string[],
  error: unknown,
  because = '',
): Promise<unknown> {
  if (!isPgError(error) || error.code !== '23502') return Promise.resolve(error);
  return counted(
    client,
    error,
    () =>
      failing(
        client,
        info,
        names(columns)
          .map((c) => `r.${c} IS NULL`)
          .join(' OR '),
      ),
    (found) =>
      new BadRequest(
        'Rows are NULL',
        `${rowsNamed(info, found)} hold NULL in (${columns.join(', ')})${because}; nothing was changed`,
        error,
      ),
  );
}

/** The USING expression a type change PostgreSQL does not make by itself is offered: the plain cast. */
export const castUsing = (column: string, newType: string) => `${quoteCatalogName(column)}::${newType}`;

/**
 * A type change some rows do not fit: each row's new value is computed as the change would (the
 * USING expression, else the column's cast) in a temporary function that catches its error, since
 * PostgreSQL 15 has no pg_input_is_valid and USING may be any expression. A type PostgreSQL does
 * not convert by itself asks for USING.
 */
export function explainUnconvertible(
  client: pg.ClientBase,
  info: TableInfo,
  change: { column: string; newType: string; using: string | undefined },
  error: unknown,
): Promise<unknown> {
  if (!isPgError(error)) return Promise.resolve(error);
  const column = quoteCatalogName(change.column);
  if (error.code === '42804') {
    const example = JSON.stringify(castUsing(change.column, change.newType));
    return Promise.resolve(
      new BadRequest(
        'Type needs a conversion',
        `${error.message}: send "using" with the expression that computes the new value, such as ${example}`,
        error,
      ),
    );
  }
  if (!error.code.startsWith('22') && !error.code.startsWith('23')) return Promise.resolve(error);
  const tag = `$dbadmin_${randomBytes(6).toString('hex')}$`;
  return counted(
    client,
    error,
    async () => {
      await client.query({
        // The row is an unnamed parameter: a named one would clash with a column of the same name.
        text: `CREATE FUNCTION pg_temp.dbadmin_fits(${qualified(info.schema, info.table)}) RETURNS boolean
                 LANGUAGE plpgsql AS ${tag}
                 BEGIN PERFORM (SELECT (${change.using ?? column})::${change.newType} FROM (SELECT ($1).*) AS x);
                 RETURN true; EXCEPTION WHEN others THEN RETURN false; END ${tag}`,
        queryMode: 'extended',
      } as pg.QueryConfig);
      return failing(client, info, 'NOT pg_temp.dbadmin_fits(r.*)');
    },
    (found) =>
      new BadRequest(
        'Rows do not fit the type',
        `${rowsNamed(info, found)} cannot be made ${change.newType} in (${change.column}); nothing was changed`,
        error,
      ),
  );
}
