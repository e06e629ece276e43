import type pg from 'pg';
import type { AuditDraft } from '#lib/db/audit-log';
import { withTransaction } from '#lib/db/pool';
import { Forbidden } from '#lib/errors';
import { loggedError, logger } from '#lib/log';
import type { Principal } from '#lib/principal';

/**
 * The SQL editor's history, kept per person on the server (POST /api/query with history: true
 * adds to it; GET /api/sql/history reads it back, searched): what ran, where, when, for how long
 * and how it ended. Only its own person reads it; AUTH_USER's administrator has one of its own.
 * API keys keep none: they are programs, whose statements the audit log already counts.
 */

/** Runs kept per person; older ones are forgotten as new ones come. */
export const HISTORY_KEPT = 1000;
/** The characters of a script kept (a page of 100 stays under 2 MB); a longer one is kept cut, and says so. */
export const HISTORY_SQL_CHARS = 20_000;
const ERROR_CHARS = 2000;

export interface HistoryEntry {
  id: number;
  schema: string;
  sql: string;
  /** The script was longer than HISTORY_SQL_CHARS and is kept cut. */
  cut: boolean;
  ranAt: string;
  durationMs: number | null;
  ok: boolean;
  rowCount: number | null;
  error: string | null;
}

export interface HistoryRun {
  schema: string;
  sql: string;
  durationMs: number;
  ok: boolean;
  rowCount?: number | null | undefined;
  error?: string | undefined;
}

/** Whose history a principal keeps: a person's id, null for the administrator; a key keeps none. */
function keeper(principal: Principal | undefined): number | null {
  if (principal?.kind === 'key') {
    throw new Forbidden(
      'history is kept for people signed in to the console, not for API keys: leave history out',
    );
  }
  return principal?.kind === 'person' ? principal.id : null;
}

/**
 * The schemas whose runs a principal sees: a person's scope as it is now (a token narrowed to
 * some schemas, or a scope since narrowed, sees the runs in those alone); null, all of them.
 */
const scopeOf = (principal: Principal | undefined) =>
  principal?.kind === 'person' && principal.schemas !== null ? [...principal.schemas] : null;

/**
 * Adds a run to its person's history and forgets what falls past HISTORY_KEPT, in one statement
 * on the service's pool (never in the tenant's transaction: a run that failed is kept too).
 */
export async function remember(db: pg.Pool, principal: Principal | undefined, run: HistoryRun) {
  await db.query({
    name: 'dbadmin.history-add',
    // The statement's snapshot is from before its INSERT: the HISTORY_KEPT-th newest run it sees
    // and the older ones make room for the new one.
    text: `WITH added AS (
             INSERT INTO _dbadmin.sql_history (person_id, schema_name, sql, cut, duration_ms, ok, row_count, error)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8))
           DELETE FROM _dbadmin.sql_history h
            WHERE coalesce(h.person_id, 0) = coalesce($1, 0)
              AND h.id <= (SELECT o.id FROM _dbadmin.sql_history o WHERE coalesce(o.person_id, 0) = coalesce($1, 0)
                            ORDER BY o.id DESC OFFSET $9 - 1 LIMIT 1)`,
    values: [
      keeper(principal),
      run.schema,
      run.sql.slice(0, HISTORY_SQL_CHARS),
      run.sql.length > HISTORY_SQL_CHARS,
      Math.round(run.durationMs),
      run.ok,
      run.rowCount ?? null,
      run.error?.slice(0, ERROR_CHARS) ?? null,
      HISTORY_KEPT,
    ],
  });
}

export interface HistoryQuery {
  /** Text the SQL holds, any case. */
  q?: string | undefined;
  /** Entries older than this id (the previous page's last). */
  before?: number | undefined;
  limit: number;
}

/** The principal's runs, newest first, searched; `next` is the `before` of the following page. */
export async function readHistory(db: pg.Pool, principal: Principal | undefined, query: HistoryQuery) {
  const { rows } = await db.query<HistoryEntry>({
    name: 'dbadmin.history-read',
    text: `SELECT id::int8::float8 AS id, schema_name AS schema, sql,
                  cut,
                  pg_catalog.to_char(pg_catalog.timezone('UTC', ran_at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS "ranAt",
                  duration_ms AS "durationMs", ok, row_count::float8 AS "rowCount", error
             FROM _dbadmin.sql_history
            WHERE coalesce(person_id, 0) = coalesce($1, 0)
              AND ($2::int8 IS NULL OR id < $2)
              AND ($3::text IS NULL OR pg_catalog.strpos(pg_catalog.lower(sql), pg_catalog.lower($3)) > 0)
              AND ($5::text[] IS NULL OR schema_name = ANY ($5))
            ORDER BY id DESC LIMIT $4`,
    values: [keeper(principal), query.before ?? null, query.q ?? null, query.limit + 1, scopeOf(principal)],
  });
  const entries = rows.slice(0, query.limit);
  return { entries, next: rows.length > query.limit ? (entries.at(-1)?.id ?? null) : null };
}

/** Forgets the principal's history (in their scope); answers how many runs it held. */
export async function forgetHistory(
  db: pg.Pool,
  principal: Principal | undefined,
  audit: AuditDraft | undefined,
) {
  const { rowCount } = await withTransaction(
    db,
    (client) =>
      client.query({
        name: 'dbadmin.history-forget',
        text: `DELETE FROM _dbadmin.sql_history
                WHERE coalesce(person_id, 0) = coalesce($1, 0) AND ($2::text[] IS NULL OR schema_name = ANY ($2))`,
        values: [keeper(principal), scopeOf(principal)],
      }),
    { audit },
  );
  return { success: true as const, forgotten: rowCount ?? 0 };
}

/**
 * Runs the statement and keeps the run in the principal's history, however it ends. The history
 * is written after the statement's own transaction; a history that cannot be written is logged,
 * never the request's failure (the statement's outcome already stands).
 */
export async function keptInHistory<T extends { rowCount: number | null }>(
  db: pg.Pool,
  principal: Principal | undefined,
  place: { schema: string; sql: string },
  run: () => Promise<T>,
  /** What the caller was told of a failure: its answer's words, never the service's own. */
  told: (error: unknown) => string,
): Promise<T> {
  keeper(principal);
  const started = performance.now();
  const keep = async (outcome: Pick<HistoryRun, 'ok' | 'rowCount' | 'error'>) => {
    try {
      await remember(db, principal, {
        ...place,
        ...outcome,
        durationMs: performance.now() - started,
      });
    } catch (error) {
      logger.warn('sql history not kept', loggedError(error));
    }
  };
  try {
    const result = await run();
    await keep({ ok: true, rowCount: result.rowCount });
    return result;
  } catch (error) {
    await keep({ ok: false, error: told(error) });
    throw error;
  }
}
