import pg from 'pg';
import { ApiError } from '#lib/errors';

/** Ceilings on what one response may carry, whoever asks (QUERY_MAX_ROWS, QUERY_MAX_BYTES). */
export interface ResultLimits {
  maxRows: number;
  maxBytes: number;
}

export class ResultTooLarge extends ApiError {
  constructor(setting: 'QUERY_MAX_ROWS' | 'QUERY_MAX_BYTES', limit: number) {
    const what = setting === 'QUERY_MAX_ROWS' ? `${limit} rows` : `${limit} bytes of JSON`;
    super(
      413,
      'Result too large',
      `the result is over ${what} (${setting}); select fewer rows or columns, or page with LIMIT/OFFSET`,
    );
  }
}

/**
 * Runs a query collecting its rows under the limits, so a huge result never sits in memory:
 * past a limit the rows are dropped and `onExceeded` cancels the statement in PostgreSQL. A
 * script (several statements) yields one result per statement; the limits apply to each.
 */
export function boundedQuery(
  client: pg.ClientBase,
  config: pg.QueryConfig,
  limits: ResultLimits,
  onExceeded: () => void,
): Promise<pg.QueryResult[]> {
  const query = new pg.Query(config);
  const results: pg.QueryResult[] = [];
  let current: unknown;
  let rows: unknown[] = [];
  let bytes = 0;
  let exceeded: ResultTooLarge | undefined;
  query.on('row', (row: unknown, result?: unknown) => {
    if (result !== current) {
      current = result;
      rows = [];
      bytes = 0;
    }
    if (exceeded) return;
    bytes += Buffer.byteLength(JSON.stringify(row)) + 1;
    if (rows.length >= limits.maxRows) exceeded = new ResultTooLarge('QUERY_MAX_ROWS', limits.maxRows);
    else if (bytes > limits.maxBytes) exceeded = new ResultTooLarge('QUERY_MAX_BYTES', limits.maxBytes);
    if (exceeded) {
      rows = [];
      onExceeded();
      return;
    }
    rows.push(row);
    (result as pg.QueryResult & { collected?: unknown[] }).collected = rows;
  });
  return new Promise((resolve, reject) => {
    query.on('error', (error: Error) => reject(exceeded ?? error));
    query.on('end', (ended: pg.QueryResult | pg.QueryResult[]) => {
      if (exceeded) return reject(exceeded);
      for (const result of Array.isArray(ended) ? ended : [ended]) {
        result.rows = (result as { collected?: unknown[] }).collected ?? [];
        results.push(result);
      }
      resolve(results);
    });
    client.query(query);
  });
}
