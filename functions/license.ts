import { z } from 'zod';
import { ApiError } from '#lib/errors';
import { DATABASE } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { getLicensing } from '#lib/license/index';
import { type LicenseState, NotActivated, TrialRefused } from '#lib/license/licensing';

const email = z.string().trim().email('email must be an email address');
const licenseKey = z.string().trim().min(1, 'licenseKey is required').max(200);
const iso = (date: Date | null) => date?.toISOString() ?? null;

const statusBody = (state: LicenseState) => ({
  valid: state.valid,
  status: state.status,
  type: state.type,
  expiresAt: iso(state.expiresAt),
  trialExpiresAt: iso(state.trialExpiresAt),
  gracePeriodEndsAt: iso(state.gracePeriodEndsAt),
  daysRemaining: state.daysRemaining,
  lastValidatedAt: iso(state.lastValidatedAt),
  warning: state.warning,
  verified: state.verified,
});

const StatusBody = z.object({
  valid: z.boolean(),
  status: z.enum(['active', 'trial', 'grace_period', 'expired', 'invalid', 'none']),
  type: z.enum(['trial', 'paid']).nullable(),
  expiresAt: z.string().nullable(),
  trialExpiresAt: z.string().nullable(),
  gracePeriodEndsAt: z.string().nullable(),
  daysRemaining: z.number().nullable(),
  lastValidatedAt: z.string().nullable(),
  warning: z.string().nullable(),
  /** Keyed licenses: backed by an answer signed with a compiled-in key; null without one. */
  verified: z.boolean().nullable(),
});

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/license/status',
    summary: 'License status: active, trial, grace_period, expired, invalid or none',
    access: 'public',
    errors: [DATABASE],
    response: StatusBody,
    handler: async () => statusBody(await (await getLicensing()).state()),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/refresh',
    audit: false,
    summary: 'Read the license data again and revalidate with the license server now; answers the status',
    access: 'public',
    errors: [DATABASE],
    response: StatusBody,
    handler: async () => statusBody(await (await getLicensing()).refresh()),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/deactivate',
    audit: { action: 'license.deactivate', changed: (result) => result.success },
    summary: 'Free this deployment’s slot at the license server and forget the license here (admin)',
    access: 'admin',
    permission: 'license',
    ungated: true,
    response: z.object({ success: z.boolean(), message: z.string() }),
    errors: [{ status: 400, why: 'no license is activated on this deployment' }],
    handler: async () => {
      try {
        return await (await getLicensing()).deactivate();
      } catch (error) {
        if (error instanceof NotActivated) throw new ApiError(400, 'Not activated', error.message);
        throw error;
      }
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/validate',
    audit: false,
    summary: 'Check a license key (and its owner email) with the license server',
    access: 'public',
    errors: [DATABASE],
    body: z.strictObject({ licenseKey, email: email.optional() }),
    response: z.object({
      valid: z.boolean(),
      message: z.string(),
      type: z.string().nullable(),
      expiresAt: z.string().nullable(),
    }),
    handler: async ({ body }) => (await getLicensing()).checkKey(body.licenseKey, body.email),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/license/activate',
    audit: { action: 'license.activate', changed: (result) => result.success },
    summary: 'Activate a license on this deployment; check `success`',
    access: 'public',
    errors: [DATABASE],
    body: z.strictObject({ licenseKey, email }),
    response: z.object({
      valid: z.boolean(),
      success: z.boolean(),
      message: z.string(),
      notice: z.string().optional(),
    }),
    handler: async ({ body }) => (await getLicensing()).activate(body.licenseKey, body.email),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/trial/start',
    audit: { action: 'license.trial_start', changed: (result) => result.success },
    summary: 'Start the 14-day trial (once per deployment)',
    access: 'public',
    errors: [DATABASE],
    body: z.strictObject({ email }),
    response: z.object({ success: z.boolean(), message: z.string(), trialExpiresAt: z.string() }),
    handler: async ({ body }) => {
      try {
        const { trialExpiresAt } = await (await getLicensing()).startTrial(body.email);
        return {
          success: true,
          message: 'Trial started: 14 days',
          trialExpiresAt: trialExpiresAt.toISOString(),
        };
      } catch (error) {
        if (error instanceof TrialRefused) throw new ApiError(400, 'Trial not available', error.message);
        throw error;
      }
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/trial/status',
    summary: 'Trial status',
    access: 'public',
    errors: [DATABASE],
    response: z.object({
      active: z.boolean(),
      trialExpiresAt: z.string().nullable(),
      daysRemaining: z.number(),
      email: z.string().nullable(),
    }),
    handler: async () => {
      const trial = await (await getLicensing()).trialStatus();
      return { ...trial, trialExpiresAt: iso(trial.trialExpiresAt) };
    },
  }),
];

export const handler = httpHandler(routes);
