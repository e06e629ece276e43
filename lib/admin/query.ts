import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { quoteIdent } from '#lib/db/identifiers';
import { fromDatabaseError, isPgError } from '#lib/db/pg-errors';
import { withClient } from '#lib/db/pool';
import { ApiError, BadRequest } from '#lib/errors';

export interface RunQueryInput {
  sql: string;
  schema: string;
  timeoutMs: number;
  /** Aborted when the caller is gone (or the function is about to time out): cancels the statement. */
  signal?: AbortSignal | undefined;
  /**
   * SQL on behalf of an API key: sent as exactly one statement (extended protocol, so a `;` cannot
   * smuggle in a second one) on the key role's pool.
   */
  asKey?: boolean | undefined;
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
 * Undoes whatever a caller's SQL did to the session (SET, SET ROLE, PREPARE, LISTEN, cursors,
 * advisory locks, temporary tables): DISCARD ALL, spelled out, because DISCARD ALL itself cannot
 * share a query string with the COMMIT before it.
 */
const RESET_STATEMENTS = [
  'CLOSE ALL',
  'SET SESSION AUTHORIZATION DEFAULT',
  'RESET ALL',
  'DEALLOCATE ALL',
  'UNLISTEN *',
  'SELECT pg_advisory_unlock_all()',
  'DISCARD PLANS',
  'DISCARD TEMP',
  'DISCARD SEQUENCES',
];
const RESET_SESSION = RESET_STATEMENTS.join('; ');
/** The epilogue's statements: COMMIT and the reset. */
const EPILOGUE = `\n;COMMIT; ${RESET_SESSION}`;
const EPILOGUE_RESULTS = 1 + RESET_STATEMENTS.length;

/**
 * Runs a caller's SQL (one statement or a script) in one transaction, with the schema first on
 * the search path and a statement timeout enforced by PostgreSQL; the response describes the last
 * statement's result. One round trip: prelude, SQL, COMMIT and the session reset travel as one
 * simple query, so the connection goes back to the pool as it came. When a statement fails,
 * PostgreSQL skips the rest of the string, and a second round trip rolls back and resets.
 */
export async function runQuery(
  queryDb: pg.Pool,
  adminDb: pg.Pool,
  { sql, schema, timeoutMs, signal, asKey }: RunQueryInput,
): Promise<QueryResult> {
  const searchPath = schema === 'public' ? 'public' : `${quoteIdent(schema, 'schema name')}, public`;
  const prelude = `BEGIN; SET LOCAL search_path TO ${searchPath}; SET LOCAL statement_timeout = ${Math.trunc(timeoutMs)};\n`;
  return withClient(queryDb, async (client) => {
    const pid = (client as unknown as { processID: number }).processID;
    let cancelled = false;
    const cancel = () => {
      cancelled = true;
      adminDb.query('SELECT pg_cancel_backend($1)', [pid]).catch(() => undefined);
    };
    const fail = async (error: unknown, offset: number): Promise<never> => {
      await client.query(`ROLLBACK; ${RESET_SESSION}`).catch(() => undefined);
      throw queryError(shiftPosition(error, offset), cancelled);
    };
    const started = performance.now();
    signal?.addEventListener('abort', cancel, { once: true });
    try {
      let last: pg.QueryResult;
      if (asKey) {
        // One statement in its own (implicit) transaction; the key role's session defaults give it
        // its schema, read-only mode for anon, and the pool's statement_timeout.
        last = await client
          .query({ text: sql, queryMode: 'extended' } as pg.QueryConfig)
          .catch((e) => fail(e, 0));
        await client.query(RESET_SESSION);
      } else {
        const results = (await client
          .query(prelude + sql + EPILOGUE)
          .catch((e) => fail(e, prelude.length))) as unknown as pg.QueryResult[];
        last = results.at(-1 - EPILOGUE_RESULTS) as pg.QueryResult;
      }
      return {
        rows: last.rows,
        fields: (last.fields ?? []).map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })),
        rowCount: last.rowCount ?? last.rows.length,
        duration: Math.round(performance.now() - started),
      };
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
  });
}

/** Positions count from the start of the caller's SQL, not of the prelude sent before it. */
function shiftPosition(error: unknown, by: number): unknown {
  if (isPgError(error) && error.position) error.position = String(Number(error.position) - by);
  return error;
}
