import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { LicenseType } from '#lib/license/state';

/** `_dbadmin.license_cache`: metadata only, to recover the machine id and the license when files are lost. */
export interface CacheRow {
  machineId: string;
  licenseKeyHash: string | null;
  licenseType: LicenseType | null;
  expiresAt: Date | null;
  lastValidatedAt: Date | null;
  createdAt: Date;
}

export const licenseKeyHash = (key: string) => createHash('sha256').update(key).digest('hex');

const COLUMNS = `machine_id AS "machineId", license_key_hash AS "licenseKeyHash", license_type AS "licenseType",
  expires_at AS "expiresAt", last_validated_at AS "lastValidatedAt", created_at AS "createdAt"`;

export async function readCacheRow(db: pg.Pool, machineId: string): Promise<CacheRow | undefined> {
  const { rows } = await db.query<CacheRow>(
    `SELECT ${COLUMNS} FROM _dbadmin.license_cache WHERE machine_id = $1`,
    [machineId],
  );
  return rows[0];
}

/** The machine id of the most recently updated row: this deployment's, when its file was lost. */
export async function recoverMachineId(db: pg.Pool): Promise<string | undefined> {
  const { rows } = await db.query<{ machine_id: string }>(
    'SELECT machine_id FROM _dbadmin.license_cache ORDER BY updated_at DESC LIMIT 1',
  );
  return rows[0]?.machine_id;
}

export async function writeCacheRow(db: pg.Pool, row: Omit<CacheRow, 'createdAt'>): Promise<void> {
  await db.query(
    `INSERT INTO _dbadmin.license_cache (machine_id, license_key_hash, license_type, expires_at, last_validated_at)
     VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (machine_id) DO UPDATE SET license_key_hash = $2, license_type = $3, expires_at = $4,
       last_validated_at = $5, updated_at = now()`,
    [row.machineId, row.licenseKeyHash, row.licenseType, row.expiresAt, row.lastValidatedAt],
  );
}
