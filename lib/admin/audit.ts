import type pg from 'pg';
import { loggedError, logger } from '#lib/log';

/**
 * Reading the audit log (GET /api/audit) and keeping it to its retention. Entries are written by
 * lib/db/audit-log, in the changes' own transactions.
 */

export interface AuditFilter {
  /** Entries at or after this time, and before `to`. */
  from?: Date | undefined;
  to?: Date | undefined;
  schema?: string | undefined;
  /** Only entries about these schemas (a scoped person's view); undefined: every entry. */
  schemas?: readonly string[] | undefined;
  actor?: 'admin' | 'person' | 'key' | 'public' | undefined;
  keyId?: number | undefined;
  personId?: number | undefined;
  /** An action (`row.insert`), or a family of them (`row`). */
  action?: string | undefined;
  /** Entries older than this one (its `seq`): the next page, newest first. */
  before?: number | undefined;
  limit: number;
}

export interface AuditRecord {
  seq: number;
  id: string;
  at: string;
  requestId: string;
  actor: string;
  keyId: number | null;
  keyName: string | null;
  keyType: string | null;
  personId: number | null;
  personLogin: string | null;
  via: string | null;
  schema: string | null;
  action: string;
  target: string | null;
  status: number;
  rows: number | null;
  sqlKind: string | null;
  sqlFingerprint: string | null;
  sqlText: string | null;
}

/** Newest first, by `seq` (the order entries were appended in), a page at a time. */
export async function listAudit(db: pg.Pool, filter: AuditFilter) {
  const values: unknown[] = [];
  const where: string[] = [];
  const add = (condition: (n: string) => string, value: unknown) => {
    if (value === undefined) return;
    values.push(value);
    where.push(condition(`$${values.length}`));
  };
  add((n) => `at >= ${n}`, filter.from);
  add((n) => `at < ${n}`, filter.to);
  add((n) => `schema_name = ${n}`, filter.schema);
  add((n) => `actor = ${n}`, filter.actor);
  add((n) => `schema_name = ANY (${n}::text[])`, filter.schemas);
  add((n) => `key_id = ${n}`, filter.keyId);
  add((n) => `person_id = ${n}`, filter.personId);
  add((n) => `(action = ${n} OR pg_catalog.starts_with(action, ${n} || '.'))`, filter.action);
  add((n) => `seq < ${n}`, filter.before);
  values.push(filter.limit + 1);
  const { rows } = await db.query<AuditRecord & { at: Date }>(
    `SELECT seq, id, at, request_id AS "requestId", actor, key_id AS "keyId", key_name AS "keyName",
            key_type AS "keyType", person_id AS "personId", person_login AS "personLogin", via,
            schema_name AS "schema", action, target, status, row_count AS "rows",
            sql_kind AS "sqlKind", sql_fingerprint AS "sqlFingerprint", sql_text AS "sqlText"
       FROM _dbadmin.audit_log
      ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''}
      ORDER BY seq DESC LIMIT $${values.length}`,
    values,
  );
  const more = rows.length > filter.limit;
  const entries = (more ? rows.slice(0, filter.limit) : rows).map((row) => ({
    ...row,
    at: row.at.toISOString(),
  }));
  return { entries, nextCursor: more ? String(entries.at(-1)?.seq) : null };
}

/** At most one sweep an hour per process (retention is counted in days), failed or not. */
const SWEEP_EVERY_MS = 3_600_000;
/** Deleted a batch at a time, so a backlog never becomes one long statement. */
const SWEEP_BATCH = 5000;
let lastSweep = Number.NEGATIVE_INFINITY;

const SWEEP = `
  DELETE FROM _dbadmin.audit_log WHERE seq IN (
    SELECT seq FROM _dbadmin.audit_log
     WHERE at < pg_catalog.now() - pg_catalog.make_interval(days => $1) LIMIT ${SWEEP_BATCH})`;

/**
 * Deletes entries older than the retention (the database's clock decides what is old), in
 * batches, in the background of a request that wrote one. Returns how many, for tests; callers
 * need not wait. A failure waits for the next hour like a success: a struggling database is not
 * sent a sweep per request.
 */
export async function sweepAuditLog(
  db: pg.Pool,
  retentionDays: number,
  now = performance.now(),
): Promise<number> {
  if (now - lastSweep < SWEEP_EVERY_MS) return 0;
  lastSweep = now;
  let deleted = 0;
  try {
    for (;;) {
      const { rowCount } = await db.query(SWEEP, [retentionDays]);
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < SWEEP_BATCH) return deleted;
    }
  } catch (error) {
    logger.warn('audit log sweep failed', { error: loggedError(error) });
    return deleted;
  }
}
