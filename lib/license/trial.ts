import type pg from 'pg';
import { recordTrial } from '#lib/license/cache-table';
import { type Known, recordOf } from '#lib/license/known';
import { type LicenseState, TRIAL_MS } from '#lib/license/state';

/**
 * The trial: 14 days from its start, once per deployment. Its record is a row in PostgreSQL that
 * a second start cannot overwrite (and the license file, for a deployment that lost the row); a
 * trial is refused once either trace, or a license, exists.
 */

export class TrialRefused extends Error {
  override name = 'TrialRefused';
}

/** Records a trial starting now: what is known with it, or TrialRefused. */
export async function beginTrial(
  db: pg.Pool,
  known: Known,
  email: string,
  clock: () => Date,
): Promise<Known> {
  const refuse = (what: string) => new TrialRefused(`${what} on this deployment; trials cannot be restarted`);
  if (known.keyHash) throw refuse('a license is already active');
  if (known.trial) throw refuse('a trial was already started');
  const now = clock();
  const expiresAt = new Date(now.getTime() + TRIAL_MS);
  const recorded = await recordTrial(db, { email, machineId: known.machineId, startedAt: now, expiresAt });
  if (!recorded) throw refuse('a trial was already started');
  return { ...known, trial: { expiresAt, email } };
}

/** SPEC.md's trial status: active, when it ends, days left, whose it is. */
export function trialStatusOf(known: Known, state: LicenseState) {
  const record = recordOf(known);
  const isTrial = record !== undefined && !record.keyed;
  return {
    active: isTrial && state.valid,
    trialExpiresAt: isTrial ? record.expiresAt : null,
    daysRemaining: isTrial ? (state.daysRemaining ?? 0) : 0,
    email: isTrial ? (known.trial?.email ?? null) : null,
  };
}
