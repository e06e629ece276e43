import type pg from 'pg';
import { loggedError, logger } from '#lib/log';

/**
 * The records of Idempotency-Keys in `_dbadmin.idempotency_keys` (migration 15), on the service's
 * pool: a key's claim before its request runs, its answer after. Only the service reads or writes
 * them, but for the door through which the request's write transaction binds itself to its claim
 * (bound_xid). Times are the database's clock, the same for every process.
 *
 * A write's transaction holds its record's row lock from its door call to the end of its COMMIT
 * (code the tenant planted can run then: deferred triggers). Nothing here waits for that lock:
 * a record locked is a request whose change is being committed ('in progress'), skipped (SKIP
 * LOCKED) and looked at again by the next retry.
 */

/** How long a key's record is kept from its first use (from its last take-over, at the least). */
export const KEPT_HOURS = 24;

/** The most of an answer kept: a bigger one is kept as `applied`, and a retry told to read it back. */
export const MAX_ANSWER_BYTES = 64 * 1024;

/**
 * running: claimed, its request not known to be over; done: its answer kept; applied: its change
 * committed but no answer was kept (its request failed after, or its answer was too large).
 */
export type KeyState = 'running' | 'done' | 'applied';

export interface KeyRecord {
  /** Its first request's fingerprint is this request's. */
  sameRequest: boolean;
  claim: string;
  state: KeyState;
  /** Running, and its request's time not yet up. */
  leased: boolean;
  /** A transaction of its request bound itself to the claim and committed: its change is made. */
  bound: boolean;
  status: number | null;
  answer: string | null;
}

export interface Claim {
  scope: Buffer;
  fingerprint: Buffer;
  /** A random uuid, which only the service's own statements carry (as a bind parameter). */
  claim: string;
  /** How long its request may still run, in milliseconds. */
  leaseMs: number;
  /** The schema it acts in, and its API key: their records go when they are deleted. */
  schema: string | undefined;
  keyId: number | undefined;
}

const LEASE = `pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => $4::pg_catalog.float8 / 1000)`;
const KEPT = `pg_catalog.make_interval(hours => ${KEPT_HOURS})`;
const NOW = 'pg_catalog.clock_timestamp()';

/** The record's row, unless another transaction holds it (a write binding itself, committing). */
const unlocked = (where: string) =>
  `scope IN (SELECT scope FROM _dbadmin.idempotency_keys WHERE ${where} FOR UPDATE SKIP LOCKED)`;

/**
 * A new claim. A record there, even expired, is left alone (never waited for): the caller reads
 * it, and replaces it only through `replaceExpired` or `takeOver`.
 */
const CLAIM = `
  INSERT INTO _dbadmin.idempotency_keys
         (scope, fingerprint, claim, state, lease_until, expires_at, schema_name, key_id)
  VALUES ($1, $2, $3, 'running', ${LEASE}, ${NOW} + ${KEPT}, $5, $6)
  ON CONFLICT (scope) DO NOTHING`;

/**
 * An expired record replaced by a new claim: never one still running within its lease (expires_at
 * is kept past it, so that is a record changed by hand), never one a transaction holds.
 */
const REPLACE_EXPIRED = `
  UPDATE _dbadmin.idempotency_keys
     SET fingerprint = $2, claim = $3, state = 'running', status = NULL, answer = NULL, bound_xid = NULL,
         lease_until = ${LEASE}, expires_at = ${NOW} + ${KEPT}, schema_name = $5, key_id = $6
   WHERE ${unlocked(`scope = $1 AND expires_at <= ${NOW} AND NOT (state = 'running' AND lease_until > ${NOW})`)}`;

const claimValues = (claim: Claim) => [
  claim.scope,
  claim.fingerprint,
  claim.claim,
  claim.leaseMs,
  claim.schema ?? null,
  claim.keyId ?? null,
];

/** Claims the key; false when a record holds it (which has not expired, or is locked). */
export async function claimKey(db: pg.Pool, claim: Claim): Promise<boolean> {
  // INSERT ... ON CONFLICT waits for a row another transaction holds: the record a tenant's write
  // bound itself to, held until its COMMIT ends (deferred triggers included). A plain read waits
  // for nothing: with a record there, only the SKIP LOCKED replacement is tried.
  const { rowCount } = await db.query('SELECT 1 FROM _dbadmin.idempotency_keys WHERE scope = $1', [
    claim.scope,
  ]);
  if (rowCount === 0 && (await db.query(CLAIM, claimValues(claim))).rowCount === 1) return true;
  const replaced = await db.query(REPLACE_EXPIRED, claimValues(claim));
  return replaced.rowCount === 1;
}

/** The record holding the key, unless it has expired. */
export async function keyRecord(
  db: pg.Pool,
  scope: Buffer,
  fingerprint: Buffer,
): Promise<KeyRecord | undefined> {
  const { rows } = await db.query<KeyRecord>(
    `SELECT fingerprint = $2 AS "sameRequest", claim, state,
            state = 'running' AND lease_until > ${NOW} AS leased,
            bound_xid IS NOT NULL AS bound, status, answer
       FROM _dbadmin.idempotency_keys
      WHERE scope = $1 AND expires_at > ${NOW}`,
    [scope, fingerprint],
  );
  return rows[0];
}

/**
 * Takes over a claim whose request's time is up and none of whose transactions committed (bound
 * the claim); false if another did first, or a transaction of the request is committing right
 * now (it holds the row: looked at again once it has ended). The record is then kept KEPT_HOURS
 * past the new lease at the least, so that it cannot expire under the request that took it.
 */
export async function takeOver(db: pg.Pool, held: string, claim: Claim): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE _dbadmin.idempotency_keys
        SET claim = $3, lease_until = ${LEASE},
            expires_at = GREATEST(expires_at, ${LEASE} + ${KEPT})
      WHERE ${unlocked(`scope = $1 AND claim = $2 AND state = 'running' AND lease_until <= ${NOW} AND bound_xid IS NULL`)}`,
    [claim.scope, held, claim.claim, claim.leaseMs],
  );
  return rowCount === 1;
}

/** The claim's request answered: its answer is kept, or, over MAX_ANSWER_BYTES, only that it applied. */
export async function keepAnswer(
  db: pg.Pool,
  scope: Buffer,
  claim: string,
  status: number,
  answer: string,
): Promise<void> {
  const kept = Buffer.byteLength(answer, 'utf8') <= MAX_ANSWER_BYTES;
  await db.query(
    `UPDATE _dbadmin.idempotency_keys SET state = $5, status = $3, answer = $4, lease_until = ${NOW}
      WHERE scope = $1 AND claim = $2`,
    [scope, claim, status, kept ? answer : null, kept ? 'done' : 'applied'],
  );
}

/** The claim's change committed, and no answer is kept: never run again. */
export async function markApplied(db: pg.Pool, scope: Buffer, claim: string): Promise<void> {
  await db.query(
    `UPDATE _dbadmin.idempotency_keys SET state = 'applied', lease_until = ${NOW}
      WHERE ${unlocked('scope = $1 AND claim = $2')}`,
    [scope, claim],
  );
}

/**
 * What became of a failed request's claim, as its record says: its change committed (a transaction
 * bound the claim), or nothing did and the key is free again for a retry; `held` when a
 * transaction of its request still holds the record (committing): the claim stands until its
 * time is up, and the retry then finds out.
 */
export async function settleFailed(
  db: pg.Pool,
  scope: Buffer,
  claim: string,
): Promise<'applied' | 'released' | 'held' | 'gone'> {
  const { rows } = await db.query<{ bound: boolean }>(
    `SELECT bound_xid IS NOT NULL AS bound FROM _dbadmin.idempotency_keys WHERE scope = $1 AND claim = $2`,
    [scope, claim],
  );
  const record = rows[0];
  if (!record) return 'gone';
  if (record.bound) {
    await markApplied(db, scope, claim);
    return 'applied';
  }
  // A transaction of the request that has not bound the claim yet never will once it is gone.
  const released = await db.query(
    `DELETE FROM _dbadmin.idempotency_keys WHERE ${unlocked('scope = $1 AND claim = $2 AND bound_xid IS NULL')}`,
    [scope, claim],
  );
  return released.rowCount === 1 ? 'released' : 'held';
}

/** Forgets every record of an API key: called in the key's deletion's transaction. */
export async function forgetKeyRecords(client: pg.ClientBase, keyId: number): Promise<void> {
  await client.query('DELETE FROM _dbadmin.idempotency_keys WHERE key_id = $1', [keyId]);
}

/** Forgets every record of requests in a schema: called in the schema's deletion's transaction. */
export async function forgetSchemaRecords(client: pg.ClientBase, schema: string): Promise<void> {
  await client.query('DELETE FROM _dbadmin.idempotency_keys WHERE schema_name = $1', [schema]);
}

const SWEEP_BATCH = 1000;
const SWEEP_EVERY_MS = 10 * 60_000;
let lastSweep = Number.NEGATIVE_INFINITY;

/**
 * Deletes expired records, a batch at a time by their expiry's index, at most once every ten
 * minutes per process, never waited for: started by keyed requests' claims and by every write's
 * audit (lib/http/audit), so records expire even when no key is sent any more. Correctness never
 * waits on it: a lookup ignores an expired record, and a claim replaces one.
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
            WHERE expires_at <= ${NOW} LIMIT ${SWEEP_BATCH} FOR UPDATE SKIP LOCKED)`,
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
