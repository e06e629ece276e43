import { leaseFor } from '#lib/license/answers';
import { type CacheRow, type DatabaseTraces, readTraces } from '#lib/license/cache-table';
import { highWaterOf, keepTime } from '#lib/license/high-water';
import { asDate, type Known, type Lease, type LicensingDeps, type Unsigned } from '#lib/license/known';
import { licenseKeyHash, type TrustedKey } from '#lib/license/lease';
import { type FileKeys, type LicenseFile, loadLicenseFile } from '#lib/license/license-file';

/**
 * What the deployment's local traces say, read again every minute: the license file (in the data
 * directory), the cache row and the trial record (in PostgreSQL), and PostgreSQL's clock. The
 * licensee owns all of them, so they recover ids, leases and markers but grant nothing a signed
 * lease does not: a lease counts only when it verifies (lib/license/answers), a file only when it
 * is not older than the row.
 */

export interface TraceReader {
  deps: LicensingDeps;
  trusted: readonly TrustedKey[];
  machineId: string;
  keys: FileKeys;
  /** This host's clock, ms. */
  hostNow: () => number;
}

/** Reads file, cache row, trial traces and PostgreSQL's clock; keeps this process's own answer. */
export async function readKnown(reader: TraceReader, previous: Known | undefined): Promise<Known> {
  const { deps, machineId } = reader;
  const [file, traces] = await Promise.all([
    loadLicenseFile(deps.dataDir, reader.keys),
    readTraces(deps.db, machineId),
  ]);
  const row = traces.row;
  const key = file?.licenseKey ?? null;
  const keyHash = key ? licenseKeyHash(key) : (row?.licenseKeyHash ?? null);
  // What this process learnt itself (its answer, its pinning) holds while the key stays the same.
  const carried = previous?.keyHash === keyHash ? previous : undefined;
  const { leases, fileCurrent } = leasesOf(reader, file, row, keyHash, carried);
  const lease = [...leases].sort((a, b) => b.payload.seq - a.payload.seq)[0];
  const fileRefused = fileCurrent && file?.status === 'invalid';
  const pinned = leases.length > 0 || carried?.pinned === true;
  const refusedUnsigned = !lease && (fileRefused || row?.status === 'invalid');
  const recorded = recordedUnsigned(deps, file, row, pinned || refusedUnsigned);
  const databaseNow = (deps.databaseClock?.() ?? traces.databaseNow).getTime();
  await keepTime(deps.db, machineId, row, { hostNow: reader.hostNow(), databaseNow });
  return {
    machineId,
    file,
    key,
    email: file?.email ?? null,
    keyHash,
    lease,
    pinned,
    refusedUnsigned,
    trial: trialOf(traces, key ? undefined : file),
    highWater: highWaterOf({
      previous: previous?.highWater,
      databaseNow,
      row: row?.highWater,
      file: fileCurrent ? asDate(file?.highWater) : null,
      leases,
    }),
    answer: carried?.answer,
    unsigned: latest(carried?.unsigned, recorded),
    checkedAt: carried?.checkedAt ?? Number.NaN,
    loadedAt: reader.hostNow(),
  };
}

/**
 * Every lease that verifies for this machine and key: the file's, the row's, this process's.
 * The file counts only when it is not older than the row's lease (restored from a backup).
 */
function leasesOf(
  { trusted, machineId }: TraceReader,
  file: LicenseFile | undefined,
  row: CacheRow | undefined,
  keyHash: string | null,
  previous: Known | undefined,
): { leases: Lease[]; fileCurrent: boolean } {
  const fileLease = leaseFor(file?.lease, trusted, machineId, keyHash);
  const rowLease = leaseFor(parseJson(row?.lease), trusted, machineId, keyHash);
  const leases = [fileLease, rowLease, previous?.lease].filter((l): l is Lease => !!l);
  const fileCurrent = !rowLease || (fileLease?.payload.seq ?? -1) >= rowLease.payload.seq;
  return { leases, fileCurrent };
}

/**
 * The unsigned validation the license file records, for SPEC.md's grace across a restart. Only
 * in warn mode, where requests proceed whatever it says: it grants nothing there that was not
 * granted already. Never when anything signed was seen (a lease in the file or the row, verified
 * or not) or a refusal is recorded; never from the row alone, which holds no key to ask with.
 */
function recordedUnsigned(
  deps: LicensingDeps,
  file: LicenseFile | undefined,
  row: CacheRow | undefined,
  signedOrRefused: boolean,
): Unsigned | undefined {
  if (deps.requireSignature || signedOrRefused) return undefined;
  if (!file?.licenseKey || file.lease || row?.lease) return undefined;
  const at = asDate(file.lastValidatedAt);
  if (!at || Number.isNaN(at.getTime())) return undefined;
  const expiresAt = asDate(file.expiresAt);
  if (expiresAt && Number.isNaN(expiresAt.getTime())) return undefined;
  return { at, type: file.type, expiresAt };
}

/** The earliest trial end any trace records: the database's trial table, or a keyless file. */
function trialOf(traces: DatabaseTraces, keylessFile: LicenseFile | undefined): Known['trial'] {
  const ends = [traces.trialExpiresAt, keylessFile?.type === 'trial' ? asDate(keylessFile.expiresAt) : null]
    .filter((d): d is Date => d !== null)
    .sort((a, b) => a.getTime() - b.getTime())[0];
  return ends ? { expiresAt: ends, email: traces.trialEmail ?? keylessFile?.email ?? null } : undefined;
}

/** The later of two unsigned validations (this process's own, the one on record). */
function latest(a: Unsigned | undefined, b: Unsigned | undefined): Unsigned | undefined {
  if (!a || !b) return a ?? b;
  return a.at.getTime() >= b.at.getTime() ? a : b;
}

function parseJson(text: string | null | undefined): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
