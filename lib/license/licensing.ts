import { watch } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import type pg from 'pg';
import { ConfigError } from '#lib/errors';
import { licenseKeyHash, readCacheRow, recoverMachineId, writeCacheRow } from '#lib/license/cache-table';
import {
  fileKeys,
  LICENSE_FILE,
  type LicenseFile,
  loadLicenseFile,
  saveLicenseFile,
} from '#lib/license/license-file';
import { machineId as readMachineId } from '#lib/license/machine-id';
import {
  type LicenseServerClient,
  LicenseServerMisconfigured,
  LicenseServerUnreachable,
  singleFlight,
} from '#lib/license/server-client';
import {
  CACHE_TTL_MS,
  DAY,
  isFresh,
  type LicenseRecord,
  type LicenseState,
  licenseState,
  type ServerAnswer,
  TRIAL_MS,
} from '#lib/license/state';

/** After a failed validation, the server is asked again this soon (not on every request). */
const RETRY_MS = 5 * 60_000;

export interface LicensingDeps {
  db: pg.Pool;
  dataDir: string;
  /** DBADMIN_SECRET: with the machine id, keys the license file. Not kept in the data directory. */
  secret: string;
  /** Throws LicenseServerMisconfigured when no server is configured. */
  client: () => LicenseServerClient;
  clock?: () => Date;
}

interface Known {
  file: LicenseFile | undefined;
  record: LicenseRecord | undefined;
  answer: ServerAnswer | undefined;
  /** When the server was last asked (or the record last loaded), in ms. */
  checkedAt: number;
}

const asDate = (value: string | Date | null | undefined) => (value ? new Date(value) : null);

function recordFromFile(file: LicenseFile): LicenseRecord {
  return {
    type: file.type,
    keyed: file.licenseKey !== null,
    expiresAt: asDate(file.expiresAt),
    lastValidatedAt: asDate(file.lastValidatedAt),
  };
}

/** SPEC.md's outcome of a server answer: the runtime check passes on `valid && activated !== false`. */
function toAnswer(
  at: Date,
  reply: {
    valid: boolean;
    activated?: boolean | undefined;
    message?: string | undefined;
    expiresAt?: string | null | undefined;
  },
): ServerAnswer {
  if (reply.valid && reply.activated !== false)
    return { kind: 'valid', at, expiresAt: asDate(reply.expiresAt) };
  return {
    kind: 'invalid',
    at,
    message:
      reply.message ?? (reply.valid ? 'not activated on this machine' : 'License key not found or inactive'),
  };
}

/**
 * This deployment's license: its machine id, file and cache row, the last server answer, and the
 * operations of the license and trial endpoints. One per container; the state is recomputed from
 * memory on every request and the server asked only when the last check is 12 hours old.
 */
export class Licensing {
  private machine: Promise<string> | undefined;
  private known: Promise<Known> | undefined;
  private readonly clock: () => Date;
  private watching = false;
  private readonly revalidate = singleFlight(() => this.askServer());

  constructor(private readonly deps: LicensingDeps) {
    this.clock = deps.clock ?? (() => new Date());
  }

  machineId(): Promise<string> {
    this.machine ??= mkdir(this.deps.dataDir, { recursive: true })
      .catch(() => undefined)
      .then(() => readMachineId(this.deps.dataDir, () => recoverMachineId(this.deps.db), this.clock()))
      .then((file) => file.machineId)
      .catch((error: unknown) => {
        this.machine = undefined;
        throw error;
      });
    return this.machine;
  }

  private async keys() {
    return fileKeys(this.deps.secret, await this.machineId());
  }

  /** Forget what is in memory: the next request reads the file again (activation elsewhere). */
  invalidate(): void {
    this.known = undefined;
  }

  private watchFile(): void {
    if (this.watching) return;
    this.watching = true;
    try {
      // A CLI activation in another process rewrites the file: notice it without polling.
      const watcher = watch(this.deps.dataDir, (_, name) => {
        if (name === LICENSE_FILE) this.invalidate();
      });
      watcher.unref();
      watcher.on('error', () => undefined);
    } catch {
      // No watching on this file system: changes are seen at the next validation instead.
    }
  }

  private async load(): Promise<Known> {
    const machineId = await this.machineId();
    this.watchFile();
    const file = await loadLicenseFile(this.deps.dataDir, await this.keys());
    if (file)
      return { file, record: recordFromFile(file), answer: undefined, checkedAt: this.clock().getTime() };
    const row = await readCacheRow(this.deps.db, machineId);
    const record: LicenseRecord | undefined = row?.licenseType
      ? {
          type: row.licenseType,
          keyed: row.licenseKeyHash !== null,
          expiresAt: row.expiresAt,
          lastValidatedAt: row.lastValidatedAt,
        }
      : undefined;
    return { file: undefined, record, answer: undefined, checkedAt: this.clock().getTime() };
  }

  private current(): Promise<Known> {
    this.known ??= this.load().catch((error: unknown) => {
      this.known = undefined;
      throw error;
    });
    return this.known;
  }

  /** Asks the license server about the key in the file; records a valid answer in file and table. */
  private async askServer(): Promise<Known> {
    const known = await this.current();
    const at = this.clock();
    const key = known.file?.licenseKey;
    let answer: ServerAnswer;
    if (!key) {
      answer = { kind: 'unreachable', at, message: 'the license file is gone; activate the license again' };
    } else {
      try {
        answer = toAnswer(
          at,
          await this.deps.client().validate({ licenseKey: key, machineId: await this.machineId() }),
        );
      } catch (error) {
        if (!(error instanceof LicenseServerUnreachable || error instanceof LicenseServerMisconfigured))
          throw error;
        answer = { kind: 'unreachable', at, message: error.message };
      }
    }
    const next: Known = { ...known, answer, checkedAt: at.getTime() };
    if (answer.kind === 'valid' && known.file && known.record) {
      const record = {
        ...known.record,
        lastValidatedAt: at,
        expiresAt: answer.expiresAt ?? known.record.expiresAt,
      };
      await this.save(
        {
          ...known.file,
          lastValidatedAt: at.toISOString(),
          expiresAt: record.expiresAt?.toISOString() ?? null,
        },
        record,
      );
      Object.assign(next, { record });
    }
    this.known = Promise.resolve(next);
    return next;
  }

  private async save(file: LicenseFile, record: LicenseRecord): Promise<void> {
    const state = licenseState(record, this.clock());
    await saveLicenseFile(this.deps.dataDir, await this.keys(), {
      ...file,
      valid: state.valid,
      status: state.status,
      daysRemaining: state.daysRemaining,
      lastSavedAt: this.clock().toISOString(),
    }).catch((error: Error) => {
      throw new ConfigError(
        `cannot write the license file in ${this.deps.dataDir} (${error.message}); set LICENSE_DATA_DIR to a writable directory (EFS on Lambda)`,
      );
    });
    await writeCacheRow(this.deps.db, {
      machineId: await this.machineId(),
      licenseKeyHash: file.licenseKey ? licenseKeyHash(file.licenseKey) : null,
      licenseType: record.type,
      expiresAt: record.expiresAt,
      lastValidatedAt: record.lastValidatedAt,
    });
  }

  /** The license state now; asks the server only when a keyed license's last check is stale. */
  async state(): Promise<LicenseState> {
    let known = await this.current();
    const now = this.clock();
    if (known.record?.keyed && this.stale(known, now)) known = await this.revalidate();
    return licenseState(known.record, now, known.answer);
  }

  private stale(known: Known, now: Date): boolean {
    const since = now.getTime() - known.checkedAt;
    if (known.answer === undefined) return !isFresh(known.record?.lastValidatedAt ?? null, now);
    return since >= (known.answer.kind === 'unreachable' ? RETRY_MS : CACHE_TTL_MS);
  }

  async startTrial(email: string): Promise<{ trialExpiresAt: Date }> {
    const known = await this.current();
    if (known.record) {
      const what =
        known.record.type === 'trial' && !known.record.keyed
          ? 'a trial was already started'
          : 'a license is already active';
      throw new TrialRefused(`${what} on this deployment; trials cannot be restarted`);
    }
    const now = this.clock();
    const expiresAt = new Date(now.getTime() + TRIAL_MS);
    const record: LicenseRecord = { type: 'trial', keyed: false, expiresAt, lastValidatedAt: null };
    await this.save(
      {
        licenseKey: null,
        email,
        type: 'trial',
        valid: true,
        status: 'trial',
        expiresAt: expiresAt.toISOString(),
        daysRemaining: Math.round(TRIAL_MS / DAY),
        lastValidatedAt: null,
        lastSavedAt: now.toISOString(),
      },
      record,
    );
    this.invalidate();
    return { trialExpiresAt: expiresAt };
  }

  async trialStatus() {
    const known = await this.current();
    const state = licenseState(known.record, this.clock());
    const isTrial = known.record?.type === 'trial' && !known.record.keyed;
    return {
      active: isTrial && state.valid,
      trialExpiresAt: isTrial ? (known.record?.expiresAt ?? null) : null,
      daysRemaining: isTrial ? (state.daysRemaining ?? 0) : 0,
      email: isTrial ? (known.file?.email ?? null) : null,
    };
  }

  /** Pre-activation check: is the key good (and the email its owner's)? Needs only `valid`. */
  checkKey(licenseKey: string, email?: string) {
    return serverTrouble(this.askKey(licenseKey, email), (message) => ({
      valid: false,
      message,
      type: null,
      expiresAt: null,
    }));
  }

  private async askKey(licenseKey: string, email?: string) {
    const reply = await this.deps
      .client()
      .validate({ licenseKey, machineId: await this.machineId(), ...(email ? { email } : {}) });
    return {
      valid: reply.valid,
      message: reply.message ?? (reply.valid ? 'License is valid' : 'License key not found or inactive'),
      type: reply.type ?? null,
      expiresAt: reply.expiresAt ?? null,
    };
  }

  /** Validates, activates this machine, saves the file and the cache row, refreshes memory. */
  activate(licenseKey: string, email: string) {
    return serverTrouble(this.activateKey(licenseKey, email), (message) => ({
      valid: false,
      success: false,
      message,
    }));
  }

  private async activateKey(licenseKey: string, email: string) {
    const checked = await this.askKey(licenseKey, email);
    if (!checked.valid) {
      // SPEC.md's activation messages: an owner mismatch says so; any other refusal is "Invalid license".
      const message = checked.message === 'Email mismatch' ? checked.message : 'Invalid license';
      return { valid: false, success: false, message };
    }
    const reply = await this.deps.client().activate({ licenseKey, machineId: await this.machineId(), email });
    if (!reply.success) return { valid: true, success: false, message: reply.message };
    const now = this.clock();
    const type = checked.type ?? 'paid';
    const expiresAt = asDate(checked.expiresAt);
    await this.save(
      {
        licenseKey,
        email,
        type,
        valid: true,
        status: type === 'paid' ? 'active' : 'trial',
        expiresAt: expiresAt?.toISOString() ?? null,
        daysRemaining: null,
        lastValidatedAt: now.toISOString(),
        lastSavedAt: now.toISOString(),
      },
      { type, keyed: true, expiresAt, lastValidatedAt: now },
    );
    this.invalidate();
    return { valid: true, success: true, message: reply.message };
  }
}

/** An unreachable or unconfigured license server is an answer to report, not a failure. */
async function serverTrouble<T>(work: Promise<T>, report: (message: string) => T): Promise<T> {
  try {
    return await work;
  } catch (error) {
    if (error instanceof LicenseServerUnreachable || error instanceof LicenseServerMisconfigured) {
      return report(error.message);
    }
    throw error;
  }
}

export class TrialRefused extends Error {
  override name = 'TrialRefused';
}
