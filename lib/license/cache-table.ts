import type pg from 'pg';
import type { LicenseType } from '#lib/license/state';

export { licenseKeyHash } from '#lib/license/lease';

/**
 * `_dbadmin.license_cache`: metadata only. It recovers the machine id and the trial marker, and
 * keeps a copy of the last signed lease; nothing in it grants a license by itself.
 */
export interface CacheRow {
  machineId: string;
  licenseKeyHash: string | null;
  licenseType: LicenseType | null;
  expiresAt: Date | null;
  lastValidatedAt: Date | null;
  /** The signed lease as JSON text; verified by the reader. */
  lease: string | null;
  leaseSeq: number | null;
  highWater: Date | null;
  status: string | null;
}

/** Everything the database knows about this deployment's license, and its clock, in one round trip. */
export interface DatabaseTraces {
  row: CacheRow | undefined;
  /** The earliest end of any trial this database has seen (trial table, trial cache rows). */
  trialExpiresAt: Date | null;
  trialEmail: string | null;
  /** PostgreSQL's clock: a floor for the high-water mark that the service host's clock cannot move. */
  databaseNow: Date;
}

/** The latest time a Date can hold: where PostgreSQL's 'infinity' lands (tampering, never ours). */
const END_OF_TIME = 8.64e15;

/** A timestamp as json_build_object writes it; 'infinity' is the end of time, junk is absent. */
function asDate(value: string | null | undefined): Date | null {
  if (!value || value === '-infinity') return null;
  if (value === 'infinity') return new Date(END_OF_TIME);
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? null : date;
}

export async function readTraces(db: pg.Pool, machineId: string): Promise<DatabaseTraces> {
  const { rows } = await db.query<{
    row: Record<string, string | null> | null;
    trialExpiresAt: Date | null;
    trialEmail: string | null;
    databaseNow: Date;
  }>(
    `SELECT now() AS "databaseNow",
            (SELECT json_build_object(
                      'machineId', c.machine_id, 'licenseKeyHash', c.license_key_hash,
                      'licenseType', c.license_type, 'expiresAt', c.expires_at,
                      'lastValidatedAt', c.last_validated_at, 'lease', c.lease, 'leaseSeq', c.lease_seq,
                      'highWater', c.high_water, 'status', c.status)
               FROM _dbadmin.license_cache c WHERE c.machine_id = $1) AS row,
            (SELECT min(t.expires_at) FROM (
                SELECT expires_at FROM _dbadmin.trial
                UNION ALL
                SELECT expires_at FROM _dbadmin.license_cache
                 WHERE license_type = 'trial' AND license_key_hash IS NULL AND expires_at IS NOT NULL) t
            ) AS "trialExpiresAt",
            (SELECT email FROM _dbadmin.trial) AS "trialEmail"`,
    [machineId],
  );
  const found = rows[0];
  if (!found) throw new Error('readTraces: no answer');
  const raw = found.row;
  return {
    databaseNow: found.databaseNow,
    trialExpiresAt: found.trialExpiresAt,
    trialEmail: found.trialEmail,
    row: raw
      ? {
          machineId: raw.machineId as string,
          licenseKeyHash: raw.licenseKeyHash ?? null,
          licenseType: (raw.licenseType as LicenseType | null) ?? null,
          expiresAt: asDate(raw.expiresAt),
          lastValidatedAt: asDate(raw.lastValidatedAt),
          lease: raw.lease ?? null,
          leaseSeq: raw.leaseSeq === null || raw.leaseSeq === undefined ? null : Number(raw.leaseSeq),
          highWater: asDate(raw.highWater),
          status: raw.status ?? null,
        }
      : undefined,
  };
}

/** The machine id of the most recently updated row: this deployment's, when its file was lost. */
export async function recoverMachineId(db: pg.Pool): Promise<string | undefined> {
  const { rows } = await db.query<{ machine_id: string }>(
    'SELECT machine_id FROM _dbadmin.license_cache ORDER BY updated_at DESC LIMIT 1',
  );
  return rows[0]?.machine_id;
}

/**
 * Saves this machine's row. A row holding a newer lease (higher sequence) than the one written is
 * left as it is: two containers saving at once never roll each other back.
 */
export async function writeCacheRow(db: pg.Pool, row: CacheRow): Promise<void> {
  await db.query(
    `INSERT INTO _dbadmin.license_cache AS c
            (machine_id, license_key_hash, license_type, expires_at, last_validated_at, lease, lease_seq, high_water, status)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (machine_id) DO UPDATE SET license_key_hash = $2, license_type = $3, expires_at = $4,
       last_validated_at = $5, lease = $6, lease_seq = $7, high_water = greatest(c.high_water, $8), status = $9,
       updated_at = now()
     WHERE c.lease_seq IS NULL OR EXCLUDED.lease_seq IS NULL OR EXCLUDED.lease_seq >= c.lease_seq`,
    [
      row.machineId,
      row.licenseKeyHash,
      row.licenseType,
      row.expiresAt,
      row.lastValidatedAt,
      row.lease,
      row.leaseSeq,
      row.highWater,
      row.status,
    ],
  );
}

/**
 * Raises this machine's high-water mark to `at` (a time both the host and PostgreSQL have passed),
 * so a clock rolled back and a restart are noticed without a server answer or a save between.
 */
export async function raiseHighWater(db: pg.Pool, machineId: string, at: Date): Promise<void> {
  await db.query(
    `UPDATE _dbadmin.license_cache SET high_water = $2
      WHERE machine_id = $1 AND (high_water IS NULL OR high_water < $2)`,
    [machineId, at],
  );
}

/** The database's one trial: true when this call recorded it, false when one was already there. */
export async function recordTrial(
  db: pg.Pool,
  trial: { email: string; machineId: string; startedAt: Date; expiresAt: Date },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO _dbadmin.trial (email, machine_id, started_at, expires_at) VALUES ($1, $2, $3, $4)
     ON CONFLICT DO NOTHING`,
    [trial.email, trial.machineId, trial.startedAt, trial.expiresAt],
  );
  return rowCount === 1;
}
