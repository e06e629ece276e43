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

export type LicenseType = 'trial' | 'paid';
export type LicenseStatusValue = 'active' | 'trial' | 'grace_period' | 'expired' | 'invalid' | 'none';

export interface LicenseRecord {
  type: LicenseType;
  /** A key issued by the license server; false for the local 14-day trial. */
  keyed: boolean;
  /** When the license (or trial) ends; null for lifetime licenses. */
  expiresAt: Date | null;
  /** Last successful validation with the license server (keyed licenses). */
  lastValidatedAt: Date | null;
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
}

const daysUntil = (end: Date, now: Date) => Math.max(0, Math.ceil((end.getTime() - now.getTime()) / DAY));

/** Does the last validation still stand without asking the server? */
export function isFresh(lastValidatedAt: Date | null, now: Date): boolean {
  return lastValidatedAt !== null && now.getTime() - lastValidatedAt.getTime() < CACHE_TTL_MS;
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
};

export function licenseState(
  record: LicenseRecord | undefined,
  now: Date,
  answer?: ServerAnswer,
): LicenseState {
  if (!record) return NONE;
  const base: Common = {
    type: record.type,
    expiresAt: record.expiresAt,
    trialExpiresAt: record.type === 'trial' ? record.expiresAt : null,
    daysRemaining: record.expiresAt ? daysUntil(record.expiresAt, now) : null,
    lastValidatedAt: answer?.kind === 'valid' ? answer.at : record.lastValidatedAt,
    gracePeriodEndsAt: null,
    warning: null,
    offline: false,
  };
  const expired = (warning: string): LicenseState => ({ ...base, valid: false, status: 'expired', warning });

  if (record.expiresAt && now.getTime() >= record.expiresAt.getTime()) {
    return expired(
      record.type === 'trial' ? 'the trial has ended: activate a license' : 'the license has expired',
    );
  }
  const healthy: LicenseState = { ...base, valid: true, status: record.type === 'paid' ? 'active' : 'trial' };
  if (!record.keyed) return healthy;
  if (answer?.kind === 'invalid') {
    return {
      ...base,
      valid: false,
      status: 'invalid',
      warning: `the license server refused the license: ${answer.message}`,
    };
  }
  if (answer?.kind === 'valid' || (answer === undefined && isFresh(record.lastValidatedAt, now)))
    return healthy;

  return offlineState(record, base, now);
}

type Common = Omit<LicenseState, 'valid' | 'status'>;

/** The server could not be asked: the last successful validation carries the grace period. */
function offlineState(record: LicenseRecord, base: Common, now: Date): LicenseState {
  const last = record.lastValidatedAt;
  const graceEnds = last ? new Date(last.getTime() + GRACE_MS[record.type]) : null;
  if (graceEnds && now.getTime() <= graceEnds.getTime()) {
    return {
      ...base,
      valid: true,
      status: 'grace_period',
      offline: true,
      gracePeriodEndsAt: graceEnds,
      warning: `license server unreachable; working offline until ${graceEnds.toISOString()}`,
    };
  }
  return {
    ...base,
    valid: false,
    status: 'expired',
    offline: true,
    gracePeriodEndsAt: graceEnds,
    warning:
      'license server unreachable and the offline grace period is over: validate or activate the license',
  };
}
