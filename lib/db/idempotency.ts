import type pg from 'pg';
import { loggedError, logger } from '#lib/log';

/**
 * The records of Idempotency-Keys in `_dbadmin.idempotency_keys` (migration 15), on the service's
 * pool: a key's claim before its request runs, its answer after. Only the service reads or writes
 * them. Times are the database's clock, the same for every process.
 */

/** How long a key's record is kept from its first use. */
export const KEPT_HOURS = 24;

/**
 * running: claimed, its request not known to be over; done: its answer kept; applied: its change
 * committed but its request failed after, so no answer was kept.
 */
export type KeyState = 'running' | 'done' | 'applied';

export interface KeyRecord {
  /** Its first request's fingerprint is this request's. */
  sameRequest: boolean;
  claim: string;
  /** The audit entry that commits with its change: the proof that it committed. */
  entryId: string | null;
  state: KeyState;
  /** Running, and its request's time not yet up. */
  leased: boolean;
  status: number | null;
  answer: string | null;
}

export interface Claim {
  scope: Buffer;
  fingerprint: Buffer;
  claim: string;
  entryId: string | undefined;
  /** How long its request may still run, in milliseconds. */
  leaseMs: number;
}

const LEASE = `pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => $5::pg_catalog.float8 / 1000)`;

/** A new claim, or one in place of an expired record (which the sweep has not deleted yet). */
const CLAIM = `
  INSERT INTO _dbadmin.idempotency_keys AS k
         (scope, fingerprint, claim, entry_id, state, lease_until, expires_at)
  VALUES ($1, $2, $3, $4, 'running', ${LEASE},
          pg_catalog.clock_timestamp() + pg_catalog.make_interval(hours => ${KEPT_HOURS}))
  ON CONFLICT (scope) DO UPDATE
     SET fingerprint = EXCLUDED.fingerprint, claim = EXCLUDED.claim, entry_id = EXCLUDED.entry_id,
         state = 'running', status = NULL, answer = NULL,
         lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at
   WHERE k.expires_at <= pg_catalog.clock_timestamp()
  RETURNING claim`;

/** Claims the key; false when a record that has not expired holds it. */
export async function claimKey(db: pg.Pool, claim: Claim): Promise<boolean> {
  const { rowCount } = await db.query(CLAIM, [
    claim.scope,
    claim.fingerprint,
    claim.claim,
    claim.entryId ?? null,
    claim.leaseMs,
  ]);
  return rowCount === 1;
}

/** The record holding the key, unless it has expired. */
export async function keyRecord(
  db: pg.Pool,
  scope: Buffer,
  fingerprint: Buffer,
): Promise<KeyRecord | undefined> {
  const { rows } = await db.query<KeyRecord>(
    `SELECT fingerprint = $2 AS "sameRequest", claim, entry_id AS "entryId", state,
            state = 'running' AND lease_until > pg_catalog.clock_timestamp() AS leased, status, answer
       FROM _dbadmin.idempotency_keys
      WHERE scope = $1 AND expires_at > pg_catalog.clock_timestamp()`,
    [scope, fingerprint],
  );
  return rows[0];
}

/** Takes over a claim whose request's time is up and whose change never committed; false if another did first. */
export async function takeOver(db: pg.Pool, held: string, claim: Claim): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE _dbadmin.idempotency_keys
        SET claim = $3, entry_id = $4, lease_until = ${LEASE}
      WHERE scope = $1 AND claim = $2 AND state = 'running'`,
    [claim.scope, held, claim.claim, claim.entryId ?? null, claim.leaseMs],
  );
  return rowCount === 1;
}

/** The claim's request answered: its answer is kept. */
export async function keepAnswer(
  db: pg.Pool,
  scope: Buffer,
  claim: string,
  status: number,
  answer: string,
): Promise<void> {
  await db.query(
    `UPDATE _dbadmin.idempotency_keys SET state = 'done', status = $3, answer = $4
      WHERE scope = $1 AND claim = $2`,
    [scope, claim, status, answer],
  );
}

/** The claim's change committed, and its request failed after: no answer, and never run again. */
export async function markApplied(db: pg.Pool, scope: Buffer, claim: string): Promise<void> {
  await db.query(
    `UPDATE _dbadmin.idempotency_keys SET state = 'applied', lease_until = pg_catalog.clock_timestamp()
      WHERE scope = $1 AND claim = $2`,
    [scope, claim],
  );
}

/** The claim's request changed nothing: the key is free for a retry. */
export async function releaseKey(db: pg.Pool, scope: Buffer, claim: string): Promise<void> {
  await db.query('DELETE FROM _dbadmin.idempotency_keys WHERE scope = $1 AND claim = $2', [scope, claim]);
}

/** What PostgreSQL says became of a transaction: `committed`, `aborted`, `in progress`, or null (too old). */
export async function transactionStatus(db: pg.Pool, xid: string): Promise<string | null> {
  const { rows } = await db.query<{ status: string | null }>(
    'SELECT pg_catalog.pg_xact_status($1::pg_catalog.xid8) AS status',
    [xid],
  );
  return rows[0]?.status ?? null;
}

/** Whether the audit log holds the entry (read once the inbox is drained into it). */
export async function entryLogged(db: pg.Pool, entryId: string): Promise<boolean> {
  const { rows } = await db.query<{ logged: boolean }>(
    'SELECT EXISTS (SELECT FROM _dbadmin.audit_log WHERE id = $1) AS logged',
    [entryId],
  );
  return rows[0]?.logged === true;
}

const SWEEP_BATCH = 1000;
const SWEEP_EVERY_MS = 10 * 60_000;
let lastSweep = Number.NEGATIVE_INFINITY;

/**
 * Deletes expired records, a batch at a time by their expiry's index, at most once every ten
 * minutes per process, never waited for. Correctness never waits on it: a lookup ignores an
 * expired record, and a claim replaces one.
 */
export function sweepKeys(db: pg.Pool, now = performance.now()): Promise<number> {
  if (now - lastSweep < SWEEP_EVERY_MS) return Promise.resolve(0);
  lastSweep = now;
  const sweep = async () => {
    let deleted = 0;
    for (;;) {
      const { rowCount } = await db.query(
        `DELETE FROM _dbadmin.idempotency_keys WHERE scope IN (
           SELECT scope FROM _dbadmin.idempotency_keys
            WHERE expires_at <= pg_catalog.clock_timestamp() LIMIT ${SWEEP_BATCH})`,
      );
      deleted += rowCount ?? 0;
      if ((rowCount ?? 0) < SWEEP_BATCH) return deleted;
    }
  };
  return sweep().catch((error: unknown) => {
    logger.warn('idempotency key sweep failed', { error: loggedError(error) });
    return 0;
  });
}
