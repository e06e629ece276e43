import {
  CACHE_TTL_MS,
  DAY,
  GRACE_MS,
  HOUR,
  isFresh,
  type LicenseRecord,
  licenseState,
  TRIAL_MS,
} from '#lib/license/state';

const T0 = new Date('2026-01-01T00:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

const localTrial: LicenseRecord = {
  type: 'trial',
  keyed: false,
  expiresAt: at(TRIAL_MS),
  lastValidatedAt: null,
  graceEndsAt: null,
  verified: false,
  refused: null,
};
/** As the signed lease gives it: validated at T0, grace to T0 + 7 days. */
const paid: LicenseRecord = {
  type: 'paid',
  keyed: true,
  expiresAt: null,
  lastValidatedAt: T0,
  graceEndsAt: at(GRACE_MS.paid),
  verified: true,
  refused: null,
};
const serverTrial: LicenseRecord = {
  type: 'trial',
  keyed: true,
  expiresAt: at(30 * DAY),
  lastValidatedAt: T0,
  graceEndsAt: at(GRACE_MS.trial),
  verified: true,
  refused: null,
};
const unreachable = (ms: number) => ({ kind: 'unreachable' as const, at: at(ms), message: 'ECONNREFUSED' });

describe('licenseState', () => {
  it('is none, and not valid, before any license or trial', () => {
    expect(licenseState(undefined, T0)).toMatchObject({ status: 'none', valid: false, type: null });
  });

  describe('the local 14-day trial', () => {
    it('is a valid trial with its days remaining until just before 14 days', () => {
      expect(licenseState(localTrial, T0)).toMatchObject({ status: 'trial', valid: true, daysRemaining: 14 });
      expect(licenseState(localTrial, at(TRIAL_MS - 1))).toMatchObject({
        status: 'trial',
        valid: true,
        daysRemaining: 1,
      });
      expect(licenseState(localTrial, T0).trialExpiresAt).toEqual(at(TRIAL_MS));
    });

    it('is expired exactly at 14 days and after', () => {
      expect(licenseState(localTrial, at(TRIAL_MS))).toMatchObject({
        status: 'expired',
        valid: false,
        daysRemaining: 0,
      });
      expect(licenseState(localTrial, at(TRIAL_MS + 1)).status).toBe('expired');
    });

    it('needs no server', () => {
      expect(licenseState(localTrial, at(10 * DAY), unreachable(10 * DAY)).status).toBe('trial');
    });
  });

  describe('a paid license', () => {
    it('is active while the last validation is fresh, without asking the server', () => {
      expect(isFresh(T0, at(CACHE_TTL_MS - 1))).toBe(true);
      expect(licenseState(paid, at(CACHE_TTL_MS - 1))).toMatchObject({
        status: 'active',
        valid: true,
        expiresAt: null,
      });
    });

    it('is stale exactly at 12 hours, and at any negative age (a validation in the future)', () => {
      expect(isFresh(T0, at(CACHE_TTL_MS))).toBe(false);
      expect(isFresh(at(1), T0)).toBe(false);
      expect(licenseState({ ...paid, lastValidatedAt: at(100 * DAY), graceEndsAt: null }, T0).status).toBe(
        'expired',
      );
    });

    it('is active after a valid answer', () => {
      const state = licenseState(paid, at(3 * DAY), { kind: 'valid', at: at(3 * DAY), expiresAt: null });

      expect(state).toMatchObject({ status: 'active', valid: true, verified: true });
    });

    it('stays invalid after a persisted refusal, even with the server unreachable', () => {
      const refused = { ...paid, refused: 'License key not found or inactive' };
      expect(licenseState(refused, at(HOUR), unreachable(HOUR)).status).toBe('invalid');
      expect(licenseState(refused, at(HOUR), { kind: 'valid', at: at(HOUR), expiresAt: null }).status).toBe(
        'active',
      );
    });

    it('is invalid with a clock more than 5 minutes behind the high-water mark', () => {
      expect(licenseState(paid, T0, undefined, at(5 * 60_000)).status).toBe('active');
      const rolledBack = licenseState(paid, T0, undefined, at(5 * 60_000 + 1));
      expect(rolledBack.status).toBe('invalid');
      expect(rolledBack.warning).toMatch(/clock rollback/);
    });

    it('is in its grace period up to exactly 7 days after the last validation when the server is unreachable', () => {
      const justIn = licenseState(paid, at(GRACE_MS.paid), unreachable(GRACE_MS.paid));

      expect(justIn).toMatchObject({ status: 'grace_period', valid: true, gracePeriodEndsAt: at(7 * DAY) });
      expect(justIn.warning).toMatch(/unreachable/);
    });

    it('says when it rests on an unreachable server, and only then', () => {
      expect(licenseState(paid, at(DAY), unreachable(DAY)).offline).toBe(true);
      expect(licenseState(paid, at(8 * DAY), unreachable(8 * DAY)).offline).toBe(true);
      expect(licenseState(paid, at(HOUR)).offline).toBe(false);
      expect(licenseState(localTrial, at(TRIAL_MS)).offline).toBe(false);
    });

    it('is expired just past 7 days offline, still naming when grace ended', () => {
      const state = licenseState(paid, at(GRACE_MS.paid + 1), unreachable(GRACE_MS.paid + 1));

      expect(state).toMatchObject({ status: 'expired', valid: false, gracePeriodEndsAt: at(7 * DAY) });
    });

    it('is invalid when the server refuses it, whatever the grace', () => {
      const state = licenseState(paid, at(13 * HOUR), {
        kind: 'invalid',
        at: at(13 * HOUR),
        message: 'revoked',
      });

      expect(state).toMatchObject({ status: 'invalid', valid: false });
      expect(state.warning).toMatch(/revoked/);
    });

    it('with no answer and a stale validation, counts as offline', () => {
      expect(licenseState(paid, at(2 * DAY)).status).toBe('grace_period');
      expect(licenseState(paid, at(8 * DAY)).status).toBe('expired');
    });
  });

  describe('a paid license validated by a server that does not sign (warn mode)', () => {
    /** As an unsigned answer at T0 gives it: grace from its time, never verified. */
    const unsignedPaid: LicenseRecord = { ...paid, verified: false };

    it('has the same 7 days of grace from the validation, reported verified: false', () => {
      expect(licenseState(unsignedPaid, at(2 * DAY), unreachable(2 * DAY))).toMatchObject({
        status: 'grace_period',
        valid: true,
        verified: false,
        lastValidatedAt: T0,
        gracePeriodEndsAt: at(7 * DAY),
      });
      expect(licenseState(unsignedPaid, at(GRACE_MS.paid + 1), unreachable(GRACE_MS.paid + 1))).toMatchObject(
        { status: 'expired', valid: false, verified: false },
      );
    });

    it('gives no grace from a validation in the future (a rewritten time, nothing a server said)', () => {
      const future = { ...unsignedPaid, lastValidatedAt: at(3 * DAY), graceEndsAt: at(10 * DAY) };

      expect(licenseState(future, at(DAY), unreachable(DAY))).toMatchObject({
        status: 'expired',
        valid: false,
        lastValidatedAt: null,
        gracePeriodEndsAt: null,
      });
      expect(licenseState(future, at(3 * DAY), unreachable(3 * DAY)).status).toBe('grace_period');
    });
  });

  describe('a trial license issued by the server', () => {
    it('has 3 days of grace: exactly 3 days is in, just past is out', () => {
      expect(licenseState(serverTrial, at(GRACE_MS.trial), unreachable(GRACE_MS.trial)).status).toBe(
        'grace_period',
      );
      expect(licenseState(serverTrial, at(GRACE_MS.trial + 1), unreachable(GRACE_MS.trial + 1)).status).toBe(
        'expired',
      );
    });

    it('is expired at its expiry even when the server would say valid', () => {
      const end = 30 * DAY;
      expect(
        licenseState(serverTrial, at(end), { kind: 'valid', at: at(end), expiresAt: at(end) }).status,
      ).toBe('expired');
      expect(
        licenseState(serverTrial, at(end - 1), { kind: 'valid', at: at(end - 1), expiresAt: at(end) }).status,
      ).toBe('trial');
    });
  });
});
