import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError } from '#lib/errors';
import { writeCacheRow } from '#lib/license/cache-table';
import { type Known, type LicensingDeps, recordOf } from '#lib/license/known';
import { type FileKeys, LICENSE_FILE, type LicenseFile, saveLicenseFile } from '#lib/license/license-file';
import { licenseState } from '#lib/license/state';

/**
 * Writes what a container knows back to its traces: the license file (signed with keys from the
 * secret and machine id, so the licensee cannot forge it) and the cache row other containers read.
 */
export async function saveKnown(
  deps: LicensingDeps,
  keys: () => Promise<FileKeys>,
  known: Known,
  now: Date,
): Promise<void> {
  const record = recordOf(known);
  const state = licenseState(record, now, known.answer);
  const highWater = new Date(Math.max(known.highWater, now.getTime()));
  const lease = known.lease?.signed ?? null;
  const keyed = known.key !== null;
  const file: LicenseFile = {
    licenseKey: known.key,
    email: keyed ? known.email : (known.trial?.email ?? null),
    type: record?.type ?? 'trial',
    valid: state.valid,
    status: state.status,
    expiresAt: record?.expiresAt?.toISOString() ?? null,
    daysRemaining: state.daysRemaining,
    lastValidatedAt: record?.lastValidatedAt?.toISOString() ?? null,
    lastSavedAt: now.toISOString(),
    lease,
    highWater: highWater.toISOString(),
  };
  if (record) {
    await saveLicenseFile(deps.dataDir, await keys(), file).catch((error: Error) => {
      throw new ConfigError(
        `cannot write the license file in ${deps.dataDir} (${error.message}); set LICENSE_DATA_DIR to a writable directory (EFS on Lambda)`,
      );
    });
  } else {
    await rm(join(deps.dataDir, LICENSE_FILE), { force: true });
  }
  await writeCacheRow(deps.db, {
    machineId: known.machineId,
    licenseKeyHash: keyed ? known.keyHash : null,
    licenseType: record?.type ?? null,
    expiresAt: record?.expiresAt ?? null,
    lastValidatedAt: record?.lastValidatedAt ?? null,
    lease: lease ? JSON.stringify(lease) : null,
    leaseSeq: known.lease?.payload.seq ?? null,
    highWater,
    status: state.status,
  });
}
