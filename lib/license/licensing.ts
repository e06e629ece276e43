import { mkdir } from 'node:fs/promises';
import { accept, type Judged, judge, newNonce, type Reply, Untrusted } from '#lib/license/answers';
import { recoverMachineId } from '#lib/license/cache-table';
import { type Known, type LicensingDeps, recordOf } from '#lib/license/known';
import { licenseKeyHash, TRUSTED_KEYS, type TrustedKey } from '#lib/license/lease';
import { fileKeys } from '#lib/license/license-file';
import { readKnown } from '#lib/license/local-traces';
import { machineId as readMachineId } from '#lib/license/machine-id';
import { saveKnown } from '#lib/license/persist';
import { refreshMayAsk, reloadDue, validationDue } from '#lib/license/schedule';
import {
  LicenseServerMisconfigured,
  LicenseServerUnreachable,
  singleFlight,
} from '#lib/license/server-client';
import { type LicenseState, licenseState } from '#lib/license/state';
import { beginTrial, trialStatusOf } from '#lib/license/trial';

export type { LicensingDeps } from '#lib/license/known';
export type { LicenseState, LicenseStatusValue } from '#lib/license/state';
export { TrialRefused } from '#lib/license/trial';

/**
 * This deployment's license, and the operations of the license and trial endpoints: the one
 * thing the rest of the service uses (through lib/license/index). One per container; the state is
 * recomputed from memory on every request. Where each rule lives:
 *
 * - what is known and the record judged from it: lib/license/known; the states: lib/license/state
 * - the local traces (file, cache row, trial row) and what counts of them: lib/license/local-traces
 * - which leases and server answers count (the lease check): lib/license/answers
 * - the clock's high-water mark: lib/license/high-water
 * - when traces are re-read and the server asked: lib/license/schedule
 * - the trial: lib/license/trial; writing file and row back: lib/license/persist
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

  /** The license state now; asks the server only when a keyed license's last check is stale. */
  async state(): Promise<LicenseState> {
    let known = await this.current();
    const now = this.clock();
    if (reloadDue(known, now)) known = await this.fresh();
    if (validationDue(known, now)) known = await this.revalidate();
    return this.stateOf(known, now);
  }

  /** SPEC.md's refresh action: read file and row again and ask the server now (at most every 10 s). */
  async refresh(): Promise<LicenseState> {
    const known = await this.fresh();
    const now = this.clock();
    // Throttled against refreshes only: one right after an activation still asks (a revocation
    // since shows at once), and a flood of calls to this public endpoint reaches the server once.
    if (!refreshMayAsk(known, now, this.lastRefresh)) return this.stateOf(known, now);
    this.lastRefresh = now.getTime();
    return this.stateOf(await this.revalidate(), now);
  }

  async startTrial(email: string): Promise<{ trialExpiresAt: Date }> {
    const started = await beginTrial(this.deps.db, await this.fresh(), email, () => this.clock());
    await this.save(started);
    this.invalidate();
    return { trialExpiresAt: (started.trial as NonNullable<Known['trial']>).expiresAt };
  }

  async trialStatus() {
    const known = await this.current();
    return trialStatusOf(known, this.stateOf(known, this.clock()));
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

  /** Validates, activates this machine, saves the file and the cache row, refreshes memory. */
  activate(licenseKey: string, email: string) {
    return serverTrouble(this.activateKey(licenseKey, email), (message) => ({
      valid: false,
      success: false,
      message,
    }));
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

  private stateOf(known: Known, now: Date): LicenseState {
    return licenseState(recordOf(known), now, known.answer, new Date(known.highWater));
  }

  private remember(known: Known): Known {
    this.last = known;
    this.known = Promise.resolve(known);
    return known;
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

  private async load(): Promise<Known> {
    const machineId = await this.machineId();
    const previous = this.last;
    const reader = {
      deps: this.deps,
      trusted: this.trusted,
      machineId,
      keys: await this.keys(),
      hostNow: () => this.clock().getTime(),
    };
    return readKnown(reader, previous);
  }

  private save(known: Known): Promise<void> {
    return saveKnown(this.deps, () => this.keys(), known, this.clock());
  }

  private judge(known: Known, reply: Reply, nonce: string, key: string): Judged {
    return judge(known, reply, {
      nonce,
      key,
      trusted: this.trusted,
      requireSignature: this.deps.requireSignature ?? false,
    });
  }

  /** Asks the license server about the key in the file; records the answer in file and table. */
  private async askServer(): Promise<Known> {
    const known = await this.fresh();
    if (!recordOf(known)?.keyed) return known;
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
        next = accept(next, this.judge(known, reply, nonce, known.key), at);
        await this.save(next);
      } catch (error) {
        if (!answeredNothing(error)) throw error;
        const message = error instanceof Untrusted ? `answer refused: ${error.message}` : error.message;
        next.answer = { kind: 'unreachable', at, message };
      }
    }
    return this.remember(next);
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
    let judged: Judged;
    try {
      const activated = {
        ...reply,
        valid: true,
        activated: true,
        type: checked.type,
        expiresAt: checked.expiresAt,
      };
      judged = this.judge(base, activated, nonce, licenseKey);
    } catch (error) {
      if (!(error instanceof Untrusted)) throw error;
      return { valid: true, success: false, message: `License server answer refused: ${error.message}` };
    }
    await this.save(accept(base, judged, at));
    this.invalidate();
    return {
      valid: true,
      success: true,
      message: reply.message,
      ...(reply.notice ? { notice: reply.notice } : {}),
    };
  }
}

/** The server could not be asked, or its answer counts for nothing: no answer, for the schedule. */
const answeredNothing = (error: unknown): error is Error =>
  error instanceof LicenseServerUnreachable ||
  error instanceof LicenseServerMisconfigured ||
  error instanceof Untrusted;

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

export class NotActivated extends Error {
  override name = 'NotActivated';
}
