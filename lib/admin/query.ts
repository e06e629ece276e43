import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { quoteIdent } from '#lib/db/identifiers';
import { fromDatabaseError, isPgError } from '#lib/db/pg-errors';
import { ApiError, BadRequest } from '#lib/errors';

export interface RunQueryInput {
  sql: string;
  schema: string;
  timeoutMs: number;
  /** Aborted when the caller is gone (or the function is about to time out): cancels the statement. */
  signal?: AbortSignal | undefined;
}

export interface QueryResult {
  rows: unknown[];
  fields: { name: string; dataTypeID: number }[];
  rowCount: number;
  duration: number;
}

/** A SQL error is the caller's to fix: 400 with PostgreSQL's message and position. */
function queryError(error: unknown, cancelled: boolean): unknown {
  if (cancelled)
    return new ApiError(499, 'Query cancelled', 'the statement was cancelled because the request ended');
  const mapped = fromDatabaseError(error);
  if (!mapped || !isPgError(error) || mapped.status === 503) return mapped ?? error;
  if (error.code === '57014') {
    return new BadRequest(
      'Query timeout',
      `the statement ran longer than the query timeout and was cancelled`,
      error,
    );
  }
  const status = mapped.status === 404 ? 400 : mapped.status;
  return new ApiError(status, mapped.title, mapped.message, { cause: error, details: mapped.details });
}

/**
 * Runs a caller's SQL (one statement or a script) in one transaction, with the schema first on
 * the search path and a statement timeout enforced by PostgreSQL; the response describes the last
 * statement's result. The connection is reset afterwards whatever the SQL did to its session.
 */
export async function runQuery(
  queryDb: pg.Pool,
  adminDb: pg.Pool,
  { sql, schema, timeoutMs, signal }: RunQueryInput,
): Promise<QueryResult> {
  const client = await queryDb.connect();
  const pid = (client as unknown as { processID: number }).processID;
  let cancelled = false;
  const cancel = () => {
    cancelled = true;
    adminDb.query('SELECT pg_cancel_backend($1)', [pid]).catch(() => undefined);
  };
  let broken: Error | undefined;
  const started = performance.now();
  try {
    const searchPath = schema === 'public' ? 'public' : `${quoteIdent(schema, 'schema name')}, public`;
    await client.query(
      `BEGIN; SET LOCAL search_path TO ${searchPath}; SET LOCAL statement_timeout = ${Math.trunc(timeoutMs)}`,
    );
    signal?.addEventListener('abort', cancel, { once: true });
    let result: pg.QueryResult | pg.QueryResult[];
    try {
      result = (await client.query(sql)) as pg.QueryResult | pg.QueryResult[];
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw queryError(error, cancelled);
    }
    const last = Array.isArray(result) ? (result.at(-1) as pg.QueryResult) : result;
    return {
      rows: last.rows,
      fields: (last.fields ?? []).map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })),
      rowCount: last.rowCount ?? last.rows.length,
      duration: Math.round(performance.now() - started),
    };
  } catch (error) {
    if (fromDatabaseError(error)?.status === 503) broken = error as Error;
    throw error;
  } finally {
    signal?.removeEventListener('abort', cancel);
    // Whatever the SQL SET, PREPAREd, LISTENed or locked is dropped before the next caller.
    if (!broken) await client.query('DISCARD ALL').catch((error: Error) => (broken = error));
    client.release(broken);
  }
}
