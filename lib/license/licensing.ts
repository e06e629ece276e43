import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type pg from 'pg';
import { ConfigError } from '#lib/errors';
import {
  type CacheRow,
  type DatabaseTraces,
  raiseHighWater,
  readTraces,
  recordTrial,
  recoverMachineId,
  writeCacheRow,
} from '#lib/license/cache-table';
import {
  type LeasePayload,
  licenseKeyHash,
  openLease,
  type SignedLease,
  TRUSTED_KEYS,
  type TrustedKey,
} from '#lib/license/lease';
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
  GRACE_MS,
  isFresh,
  type LicenseRecord,
  type LicenseState,
  type LicenseType,
  licenseState,
  type ServerAnswer,
  TRIAL_MS,
} from '#lib/license/state';

/** After a failed validation, the server is asked again this soon (not on every request). */
const RETRY_MS = 5 * 60_000;
/** The file and the cache row are read again this often: changes by other containers show up. */
const RELOAD_MS = 60_000;
/** `POST /api/license/refresh` asks the server at most this often (it needs no credentials). */
const REFRESH_MS = 10_000;

export interface LicensingDeps {
  db: pg.Pool;
  dataDir: string;
  /** DBADMIN_SECRET: with the machine id, keys the license file. Not kept in the data directory. */
  secret: string;
  /** Throws LicenseServerMisconfigured when no server is configured. */
  client: () => LicenseServerClient;
  clock?: () => Date;
  /** PostgreSQL's clock; read with the cache row unless given (tests move it with `clock`). */
  databaseClock?: () => Date;
  /** Keys whose signatures are trusted: the compiled-in TRUSTED_KEYS unless a test gives its own. */
  trustedKeys?: readonly TrustedKey[];
  /** Unsigned answers are refused (LICENSE_ENFORCEMENT=strict). */
  requireSignature?: boolean;
}

interface Lease {
  signed: SignedLease;
  payload: LeasePayload;
}

/** A valid answer from a server that does not sign: when it came, and what it said. */
interface Unsigned {
  at: Date;
  type: LicenseType;
  expiresAt: Date | null;
}

/** What this container knows: local traces (re-read every minute) and its own last server answer. */
interface Known {
  machineId: string;
  file: LicenseFile | undefined;
  /** The key from the license file: needed to ask the server, grants nothing by itself. */
  key: string | null;
  email: string | null;
  keyHash: string | null;
  /** The newest lease signed by a trusted key for this key and machine, from file or cache row. */
  lease: Lease | undefined;
  /** A lease signed for this key has been seen: unsigned answers for it are refused. */
  pinned: boolean;
  /** Persisted refusal from a server that does not sign. */
  refusedUnsigned: boolean;
  trial: { expiresAt: Date; email: string | null } | undefined;
  /** The latest trustworthy time seen, ms. */
  highWater: number;
  /** This process's last answer from the server, for `keyHash`. */
  answer: ServerAnswer | undefined;
  /**
   * The last unsigned valid answer (warn mode, a server that does not sign): this process's, or
   * one recorded in the license file. Never in strict mode, never beside a signed lease.
   */
  unsigned: Unsigned | undefined;
  /** Local ms of the last server call, and of the last read of file and row. */
  checkedAt: number;
  loadedAt: number;
}

const asDate = (value: string | null | undefined) => (value ? new Date(value) : null);
const newNonce = () => randomBytes(16).toString('hex');

/** One of SPEC.md's answers the service judged untrustworthy: it counts as no answer at all. */
class Untrusted extends Error {}

/**
 * This deployment's license: machine id, license file, cache row, signed leases, and the
 * operations of the license and trial endpoints. One per container; the state is recomputed from
 * memory on every request, local traces re-read every minute, the server asked when the last
 * check is 12 hours old. Only answers signed by a compiled-in key count in strict mode; files and
 * rows recover ids, leases and trial markers, and in warn mode the file the time of the last
 * unsigned validation (grace from it, `verified: false`).
 */
export class Licensing {
  private machine: Promise<string> | undefined;
  private known: Promise<Known> | undefined;
  /** The last state read or reached: what a reload keeps of this process's own answers. */
  private last: Known | undefined;
  private readonly clock: () => Date;
  private readonly trusted: readonly TrustedKey[];
  private readonly revalidate = singleFlight(() => this.askServer());
  private readonly reload = singleFlight(() => this.load());
  /** When `refresh()` last asked the server (NaN: never). */
  private lastRefresh = Number.NaN;

  constructor(private readonly deps: LicensingDeps) {
    this.clock = deps.clock ?? (() => new Date());
    this.trusted = deps.trustedKeys ?? TRUSTED_KEYS;
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

  /** Forget what is in memory: the next request reads file and row again. */
  invalidate(): void {
    this.known = undefined;
  }

  private remember(known: Known): Known {
    this.last = known;
    this.known = Promise.resolve(known);
    return known;
  }

  /** A lease that verifies, for this machine and this key; otherwise undefined. */
  private openLease(raw: unknown, machineId: string, keyHash: string | null): Lease | undefined {
    const payload = openLease(raw, this.trusted);
    if (!payload || payload.machineId !== machineId || payload.keyHash !== keyHash) return undefined;
    return { signed: raw as SignedLease, payload };
  }

  /** Reads file, cache row, trial traces and PostgreSQL's clock; keeps this process's own answer. */
  private async load(): Promise<Known> {
    const machineId = await this.machineId();
    const previous = this.last;
    const [file, traces] = await Promise.all([
      loadLicenseFile(this.deps.dataDir, await this.keys()),
      readTraces(this.deps.db, machineId),
    ]);
    const row = traces.row;
    const key = file?.licenseKey ?? null;
    const keyHash = key ? licenseKeyHash(key) : (row?.licenseKeyHash ?? null);
    // What this process learnt itself (its answer, its pinning) holds while the key stays the same.
    const carried = previous?.keyHash === keyHash ? previous : undefined;
    const { leases, fileCurrent } = this.leases(file, row, machineId, keyHash, carried);
    const lease = [...leases].sort((a, b) => b.payload.seq - a.payload.seq)[0];
    const fileRefused = fileCurrent && file?.status === 'invalid';
    const pinned = leases.length > 0 || carried?.pinned === true;
    const refusedUnsigned = !lease && (fileRefused || row?.status === 'invalid');
    const recorded = this.recordedUnsigned(file, row, pinned || refusedUnsigned);
    const databaseNow = (this.deps.databaseClock?.() ?? traces.databaseNow).getTime();
    await this.keepTime(machineId, row, databaseNow);
    const highWater = Math.max(
      previous?.highWater ?? 0,
      databaseNow,
      ...[row?.highWater, fileCurrent ? asDate(file?.highWater) : null].map((d) => d?.getTime() ?? 0),
      ...leases.map((l) => Date.parse(l.payload.serverTime)),
    );
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
      highWater,
      answer: carried?.answer,
      unsigned: latest(carried?.unsigned, recorded),
      checkedAt: carried?.checkedAt ?? Number.NaN,
      loadedAt: this.clock().getTime(),
    };
  }

  /**
   * Records, about once a minute, the time both this host's clock and PostgreSQL's have reached:
   * rolling both back and restarting then shows as a rollback. The earlier of the two, so one clock
   * set wrongly ahead (and corrected) never makes an honest deployment look rolled back.
   */
  private async keepTime(machineId: string, row: CacheRow | undefined, databaseNow: number): Promise<void> {
    const agreed = Math.min(this.clock().getTime(), databaseNow);
    if (!row || agreed - (row.highWater?.getTime() ?? 0) < RELOAD_MS) return;
    await raiseHighWater(this.deps.db, machineId, new Date(agreed));
  }

  /**
   * Every lease that verifies for this machine and key: the file's, the row's, this process's.
   * The file counts only when it is not older than the row's lease (restored from a backup).
   */
  private leases(
    file: LicenseFile | undefined,
    row: CacheRow | undefined,
    machineId: string,
    keyHash: string | null,
    previous: Known | undefined,
  ): { leases: Lease[]; fileCurrent: boolean } {
    const fileLease = this.openLease(file?.lease, machineId, keyHash);
    const rowLease = this.openLease(parseJson(row?.lease), machineId, keyHash);
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
  private recordedUnsigned(
    file: LicenseFile | undefined,
    row: CacheRow | undefined,
    signedOrRefused: boolean,
  ): Unsigned | undefined {
    if (this.deps.requireSignature || signedOrRefused) return undefined;
    if (!file?.licenseKey || file.lease || row?.lease) return undefined;
    const at = asDate(file.lastValidatedAt);
    if (!at || Number.isNaN(at.getTime())) return undefined;
    const expiresAt = asDate(file.expiresAt);
    if (expiresAt && Number.isNaN(expiresAt.getTime())) return undefined;
    return { at, type: file.type, expiresAt };
  }

  /**
   * The license as the state machine sees it: built from signed leases and trial markers, and in
   * warn mode from the last unsigned validation.
   */
  private record(known: Known): LicenseRecord | undefined {
    if (known.keyHash) return keyedRecord(known);
    if (!known.trial) return undefined;
    return {
      type: 'trial',
      keyed: false,
      expiresAt: known.trial.expiresAt,
      lastValidatedAt: null,
      graceEndsAt: null,
      verified: false,
      refused: null,
    };
  }

  private current(): Promise<Known> {
    this.known ??= this.fresh().catch((error: unknown) => {
      this.known = undefined;
      throw error;
    });
    return this.known;
  }

  private async fresh(): Promise<Known> {
    return this.remember(await this.reload());
  }

  /** Judges a server answer: a signed lease must verify and echo our nonce, machine and key. */
  private judge(
    known: Known,
    reply: {
      valid: boolean;
      activated?: boolean | undefined;
      message?: string | undefined;
      type?: LicenseType | null;
      expiresAt?: string | null;
      lease?: unknown;
    },
    nonce: string,
    key: string,
  ): {
    lease: Lease | undefined;
    valid: boolean;
    message: string | undefined;
    type: LicenseType | null;
    expiresAt: string | null;
  } {
    if (reply.lease !== undefined) {
      const lease = this.openLease(reply.lease, known.machineId, licenseKeyHash(key));
      if (!lease || lease.payload.nonce !== nonce)
        throw new Untrusted('the answer is not signed by a trusted key for this request');
      if (known.lease && lease.payload.seq <= known.lease.payload.seq)
        throw new Untrusted('the answer is older than the lease already held');
      const { valid, activated, type, expiresAt } = lease.payload;
      return { lease, valid: valid && activated, message: reply.message, type, expiresAt };
    }
    if (this.deps.requireSignature) throw new Untrusted('strict enforcement requires a signed answer');
    if (known.pinned) throw new Untrusted('an unsigned answer for a license seen signed before');
    return {
      lease: undefined,
      valid: reply.valid && reply.activated !== false,
      message: reply.message,
      type: reply.type ?? null,
      expiresAt: reply.expiresAt ?? null,
    };
  }

  /** Asks the license server about the key in the file; records the answer in file and table. */
  private async askServer(): Promise<Known> {
    const known = await this.fresh();
    if (!this.record(known)?.keyed) return known;
    const at = this.clock();
    let next: Known = { ...known, checkedAt: at.getTime() };
    if (!known.key) {
      next.answer = {
        kind: 'unreachable',
        at,
        message: 'the license file is gone; activate the license again',
      };
    } else {
      try {
        const nonce = newNonce();
        const reply = await this.deps
          .client()
          .validate({ licenseKey: known.key, machineId: known.machineId, nonce });
        const judged = this.judge(known, reply, nonce, known.key);
        next = this.accept(next, judged, at);
        await this.save(next);
      } catch (error) {
        if (
          !(
            error instanceof LicenseServerUnreachable ||
            error instanceof LicenseServerMisconfigured ||
            error instanceof Untrusted
          )
        )
          throw error;
        const message = error instanceof Untrusted ? `answer refused: ${error.message}` : error.message;
        next.answer = { kind: 'unreachable', at, message };
      }
    }
    return this.remember(next);
  }

  /** Folds a judged answer into what is known. */
  private accept(known: Known, judged: ReturnType<Licensing['judge']>, at: Date): Known {
    const highWater = Math.max(
      known.highWater,
      at.getTime(),
      judged.lease ? Date.parse(judged.lease.payload.serverTime) : 0,
    );
    const answer: ServerAnswer = judged.valid
      ? { kind: 'valid', at, expiresAt: asDate(judged.expiresAt) }
      : { kind: 'invalid', at, message: judged.message ?? 'License key not found or inactive' };
    return {
      ...known,
      lease: judged.lease ?? known.lease,
      pinned: known.pinned || judged.lease !== undefined,
      refusedUnsigned: !judged.lease && !judged.valid,
      unsigned:
        judged.lease || !judged.valid
          ? undefined
          : { at, type: judged.type ?? 'paid', expiresAt: asDate(judged.expiresAt) },
      answer,
      highWater,
    };
  }

  /** Writes what is known to the license file and the cache row. */
  private async save(known: Known): Promise<void> {
    const now = this.clock();
    const record = this.record(known);
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
      await saveLicenseFile(this.deps.dataDir, await this.keys(), file).catch((error: Error) => {
        throw new ConfigError(
          `cannot write the license file in ${this.deps.dataDir} (${error.message}); set LICENSE_DATA_DIR to a writable directory (EFS on Lambda)`,
        );
      });
    } else {
      await rm(join(this.deps.dataDir, LICENSE_FILE), { force: true });
    }
    await writeCacheRow(this.deps.db, {
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

  /** The license state now; asks the server only when a keyed license's last check is stale. */
  async state(): Promise<LicenseState> {
    let known = await this.current();
    const now = this.clock();
    const sinceLoad = now.getTime() - known.loadedAt;
    if (!(sinceLoad >= 0 && sinceLoad < RELOAD_MS)) known = await this.fresh();
    if (this.record(known)?.keyed && this.stale(known, now)) known = await this.revalidate();
    return this.stateOf(known, now);
  }

  private stateOf(known: Known, now: Date): LicenseState {
    return licenseState(this.record(known), now, known.answer, new Date(known.highWater));
  }

  private stale(known: Known, now: Date): boolean {
    const lastValidatedAt = this.record(known)?.lastValidatedAt ?? null;
    if (!known.answer) return !isFresh(lastValidatedAt, now);
    const since = now.getTime() - known.checkedAt;
    if (!(since >= 0)) return true;
    if (known.answer.kind === 'unreachable') return since >= RETRY_MS;
    return since >= CACHE_TTL_MS && !isFresh(lastValidatedAt, now);
  }

  /** SPEC.md's refresh action: read file and row again and ask the server now (at most every 10 s). */
  async refresh(): Promise<LicenseState> {
    const known = await this.fresh();
    const now = this.clock();
    // Throttled against refreshes only: one right after an activation still asks (a revocation
    // since shows at once), and a flood of calls to this public endpoint reaches the server once.
    const since = now.getTime() - this.lastRefresh;
    const asked = this.record(known)?.keyed && !(since >= 0 && since < REFRESH_MS);
    if (!asked) return this.stateOf(known, now);
    this.lastRefresh = now.getTime();
    return this.stateOf(await this.revalidate(), now);
  }

  async startTrial(email: string): Promise<{ trialExpiresAt: Date }> {
    const known = await this.fresh();
    const refuse = (what: string) =>
      new TrialRefused(`${what} on this deployment; trials cannot be restarted`);
    if (known.keyHash) throw refuse('a license is already active');
    if (known.trial) throw refuse('a trial was already started');
    const now = this.clock();
    const expiresAt = new Date(now.getTime() + TRIAL_MS);
    const recorded = await recordTrial(this.deps.db, {
      email,
      machineId: known.machineId,
      startedAt: now,
      expiresAt,
    });
    if (!recorded) throw refuse('a trial was already started');
    await this.save({ ...known, trial: { expiresAt, email } });
    this.invalidate();
    return { trialExpiresAt: expiresAt };
  }

  async trialStatus() {
    const known = await this.current();
    const record = this.record(known);
    const state = this.stateOf(known, this.clock());
    const isTrial = record !== undefined && !record.keyed;
    return {
      active: isTrial && state.valid,
      trialExpiresAt: isTrial ? record.expiresAt : null,
      daysRemaining: isTrial ? (state.daysRemaining ?? 0) : 0,
      email: isTrial ? (known.trial?.email ?? null) : null,
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
    const known = await this.fresh();
    const nonce = newNonce();
    const reply = await this.deps.client().activate({ licenseKey, machineId: known.machineId, email, nonce });
    if (!reply.success) return { valid: true, success: false, message: reply.message };
    const at = this.clock();
    const keyHash = licenseKeyHash(licenseKey);
    const sameKey = known.keyHash === keyHash;
    const base: Known = {
      ...known,
      key: licenseKey,
      keyHash,
      lease: sameKey ? known.lease : undefined,
      pinned: sameKey && known.pinned,
      email,
      checkedAt: at.getTime(),
    };
    let judged: ReturnType<Licensing['judge']>;
    try {
      judged = this.judge(
        base,
        { ...reply, valid: true, activated: true, type: checked.type, expiresAt: checked.expiresAt },
        nonce,
        licenseKey,
      );
    } catch (error) {
      if (!(error instanceof Untrusted)) throw error;
      return { valid: true, success: false, message: `License server answer refused: ${error.message}` };
    }
    await this.save(this.accept(base, judged, at));
    this.invalidate();
    return {
      valid: true,
      success: true,
      message: reply.message,
      ...(reply.notice ? { notice: reply.notice } : {}),
    };
  }

  /**
   * Frees this deployment's slot at the license server and forgets the license here (the trial
   * marker stays). The server's "not activated" also clears the local copy.
   */
  async deactivate(): Promise<{ success: boolean; message: string }> {
    const known = await this.fresh();
    if (!known.key || !known.email) throw new NotActivated('no license is activated on this deployment');
    const reply = await serverTrouble(
      this.deps
        .client()
        .deactivate({ licenseKey: known.key, machineId: known.machineId, email: known.email }),
      (message) => ({ success: false, message }),
    );
    const gone = reply.success || reply.message === 'This machine is not activated for the license';
    if (!gone) return reply;
    await this.save({
      ...known,
      key: null,
      keyHash: null,
      lease: undefined,
      pinned: false,
      refusedUnsigned: false,
      answer: undefined,
      unsigned: undefined,
    });
    this.invalidate();
    return { success: true, message: reply.message };
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

/**
 * A license held by key: the newest of the signed lease and the last unsigned answer (a SPEC-only
 * server, warn mode only, reported `verified: false`); its grace runs from that answer's time.
 */
function keyedRecord(known: Known): LicenseRecord {
  const lease = known.lease?.payload;
  const type = (lease?.type ?? known.unsigned?.type ?? known.file?.type ?? 'paid') as LicenseType;
  const { unsigned } = known;
  if (unsigned && (!lease || Date.parse(lease.serverTime) < unsigned.at.getTime())) {
    return {
      type,
      keyed: true,
      expiresAt: unsigned.expiresAt,
      lastValidatedAt: unsigned.at,
      graceEndsAt: new Date(unsigned.at.getTime() + GRACE_MS[type]),
      verified: false,
      refused: null,
    };
  }
  if (!lease) {
    return {
      type,
      keyed: true,
      expiresAt: asDate(known.file?.expiresAt),
      lastValidatedAt: null,
      graceEndsAt: null,
      verified: false,
      refused: known.refusedUnsigned ? 'License key not found or inactive' : null,
    };
  }
  const good = lease.valid && lease.activated;
  const refusal = lease.valid
    ? 'this machine does not hold a deployment slot: activate again'
    : 'License key not found or inactive';
  return {
    type,
    keyed: true,
    expiresAt: asDate(lease.expiresAt),
    lastValidatedAt: good ? new Date(lease.serverTime) : null,
    graceEndsAt: good ? new Date(lease.notAfter) : null,
    verified: true,
    refused: good ? null : refusal,
  };
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

/** The earliest trial end any trace records: the database's trial table, or a keyless file. */
function trialOf(traces: DatabaseTraces, keylessFile: LicenseFile | undefined): Known['trial'] {
  const ends = [traces.trialExpiresAt, keylessFile?.type === 'trial' ? asDate(keylessFile.expiresAt) : null]
    .filter((d): d is Date => d !== null)
    .sort((a, b) => a.getTime() - b.getTime())[0];
  return ends ? { expiresAt: ends, email: traces.trialEmail ?? keylessFile?.email ?? null } : undefined;
}

export class NotActivated extends Error {
  override name = 'NotActivated';
}
