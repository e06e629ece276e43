/**
 * The license state as a pure function of what is known: the license record (from the license
 * file, or recovered from the cache table), the last answer of the license server, and the clock.
 * Everything that reads files, tables or the network lives in adapters around this.
 */

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;
export const TRIAL_MS = 14 * DAY;
/** A validation this recent needs no network call (SPEC.md: 12 hours). */
export const CACHE_TTL_MS = 12 * HOUR;
/** Offline grace after the last successful validation (SPEC.md: 3 days trial, 7 days paid). */
export const GRACE_MS = { trial: 3 * DAY, paid: 7 * DAY } as const;
/** A clock this far behind the latest trustworthy time seen is a clock rolled back. */
export const CLOCK_TOLERANCE_MS = 5 * 60_000;

export type LicenseType = 'trial' | 'paid';
export type LicenseStatusValue = 'active' | 'trial' | 'grace_period' | 'expired' | 'invalid' | 'none';

export interface LicenseRecord {
  type: LicenseType;
  /** A key issued by the license server; false for the local 14-day trial. */
  keyed: boolean;
  /** When the license (or trial) ends; null for lifetime licenses. */
  expiresAt: Date | null;
  /**
   * Last successful validation with the license server (keyed licenses): a signed lease's time, or
   * (warn mode, a server that does not sign) the unsigned answer's time.
   */
  lastValidatedAt: Date | null;
  /**
   * Keyed licenses: when offline grace ends. From a signed lease's `notAfter` (no local field can
   * move it), or for an unsigned answer, its time plus the grace period.
   */
  graceEndsAt: Date | null;
  /** Keyed licenses: the license rests on an answer signed by a trusted key. */
  verified: boolean;
  /** The license server's last answer refused the license (kept across restarts). */
  refused: string | null;
}

export type ServerAnswer =
  | { kind: 'valid'; at: Date; expiresAt: Date | null }
  | { kind: 'invalid'; at: Date; message: string }
  | { kind: 'unreachable'; at: Date; message: string };

export interface LicenseState {
  valid: boolean;
  status: LicenseStatusValue;
  type: LicenseType | null;
  expiresAt: Date | null;
  trialExpiresAt: Date | null;
  gracePeriodEndsAt: Date | null;
  daysRemaining: number | null;
  lastValidatedAt: Date | null;
  /** Set when the license is not healthy: what the operator should do. */
  warning: string | null;
  /** The state rests on the license server being unreachable (grace, or expired for want of it). */
  offline: boolean;
  /** Keyed licenses: true when backed by a signed answer; false for an unsigned (SPEC-only) server. */
  verified: boolean | null;
}

const daysUntil = (end: Date, now: Date) => Math.max(0, Math.ceil((end.getTime() - now.getTime()) / DAY));

/** Does the last validation still stand without asking the server? A negative age is stale. */
export function isFresh(lastValidatedAt: Date | null, now: Date): boolean {
  if (lastValidatedAt === null) return false;
  const age = now.getTime() - lastValidatedAt.getTime();
  return age >= 0 && age < CACHE_TTL_MS;
}

const NONE: LicenseState = {
  valid: false,
  status: 'none',
  type: null,
  expiresAt: null,
  trialExpiresAt: null,
  gracePeriodEndsAt: null,
  daysRemaining: null,
  lastValidatedAt: null,
  warning: 'no license yet: start a trial or activate a license',
  offline: false,
  verified: null,
};

/**
 * @param highWater the latest trustworthy time seen (signed server time, PostgreSQL's clock, our
 *   own saves): a clock more than 5 minutes behind it has been rolled back.
 */
export function licenseState(
  known: LicenseRecord | undefined,
  now: Date,
  answer?: ServerAnswer,
  highWater?: Date | null,
): LicenseState {
  if (!known) return NONE;
  const record = credible(known, now);
  const base = common(record, now);
  if (highWater && now.getTime() < highWater.getTime() - CLOCK_TOLERANCE_MS) {
    return {
      ...base,
      valid: false,
      status: 'invalid',
      warning: `clock rollback: this clock (${now.toISOString()}) is behind the latest trusted time seen (${highWater.toISOString()}); set the clock right`,
    };
  }
  if (record.expiresAt && now.getTime() >= record.expiresAt.getTime()) {
    const warning =
      record.type === 'trial' ? 'the trial has ended: activate a license' : 'the license has expired';
    return { ...base, valid: false, status: 'expired', warning };
  }
  const healthy: LicenseState = { ...base, valid: true, status: record.type === 'paid' ? 'active' : 'trial' };
  return record.keyed ? keyedState(record, base, healthy, now, answer) : healthy;
}

type Common = Omit<LicenseState, 'valid' | 'status'>;

/**
 * An unsigned validation dated after now (beyond the clock's tolerance) is a time rewritten
 * locally, not one a server gave: it counts as no validation, so it neither is fresh nor carries
 * grace. Signed leases are left alone: their time is the server's, and a clock behind it is a
 * rollback.
 */
function credible(record: LicenseRecord, now: Date): LicenseRecord {
  const at = record.lastValidatedAt;
  if (!record.keyed || record.verified || !at || at.getTime() - now.getTime() <= CLOCK_TOLERANCE_MS)
    return record;
  return { ...record, lastValidatedAt: null, graceEndsAt: null };
}

function common(record: LicenseRecord, now: Date): Common {
  return {
    type: record.type,
    expiresAt: record.expiresAt,
    trialExpiresAt: record.type === 'trial' ? record.expiresAt : null,
    daysRemaining: record.expiresAt ? daysUntil(record.expiresAt, now) : null,
    lastValidatedAt: record.lastValidatedAt,
    gracePeriodEndsAt: record.keyed ? record.graceEndsAt : null,
    warning: null,
    offline: false,
    verified: record.keyed ? record.verified : null,
  };
}

/** A license held by key: what the server said now, else what it said last (refusals persist). */
function keyedState(
  record: LicenseRecord,
  base: Common,
  healthy: LicenseState,
  now: Date,
  answer: ServerAnswer | undefined,
): LicenseState {
  const refusal =
    answer === undefined || answer.kind === 'unreachable'
      ? record.refused
      : answer.kind === 'invalid'
        ? answer.message
        : null;
  if (refusal !== null) {
    return {
      ...base,
      valid: false,
      status: 'invalid',
      warning: `the license server refused the license: ${refusal}`,
    };
  }
  if (answer?.kind === 'valid' || (answer === undefined && isFresh(record.lastValidatedAt, now))) {
    return record.verified
      ? healthy
      : { ...healthy, warning: 'the license server did not sign its answer (verified: false)' };
  }
  return offlineState(record, base, now, answer?.kind === 'unreachable' ? answer.message : undefined);
}

/** The server could not be asked: the last lease carries the grace period, to its `notAfter`. */
function offlineState(record: LicenseRecord, base: Common, now: Date, reason?: string): LicenseState {
  const graceEnds = record.graceEndsAt;
  const why = reason ? ` (${reason})` : '';
  if (graceEnds && now.getTime() <= graceEnds.getTime()) {
    return {
      ...base,
      valid: true,
      status: 'grace_period',
      offline: true,
      gracePeriodEndsAt: graceEnds,
      warning: `license server unreachable${why}; working offline until ${graceEnds.toISOString()}`,
    };
  }
  return {
    ...base,
    valid: false,
    status: 'expired',
    offline: true,
    gracePeriodEndsAt: graceEnds,
    warning: `license server unreachable${why} and the offline grace period is over: validate or activate the license`,
  };
}
