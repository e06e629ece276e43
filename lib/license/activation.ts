import type { Config } from '#lib/config';
import type { Licensing } from '#lib/license/licensing';
import { logger } from '#lib/log';

/**
 * SPEC.md's activation at start: LICENSE_KEY and LICENSE_EMAIL activate this machine once, from
 * the environment (the local host before it serves, Lambda at cold start), and are then dropped.
 */

export interface ActivationResult {
  success: boolean;
  message: string;
  type: 'trial' | 'paid' | null;
  expiresAt: string | null;
}

/**
 * What the CLI, the invoked function and startup activation share: validate, activate this
 * machine, save the file, and report the license type and expiry.
 */
export async function activateLicense(
  licensing: Licensing,
  licenseKey: string,
  email: string,
): Promise<ActivationResult> {
  const outcome = await licensing.activate(licenseKey, email);
  if (!outcome.success) return { success: false, message: outcome.message, type: null, expiresAt: null };
  const state = await licensing.state();
  return {
    success: true,
    message: outcome.message,
    type: state.type,
    expiresAt: state.expiresAt?.toISOString() ?? null,
  };
}

/**
 * LICENSE_KEY + LICENSE_EMAIL at cold start: activate (idempotent: an activated machine answers
 * "Already activated"), then drop both from the environment and the settings in memory. A failure
 * is logged and the service starts anyway, so the API can still be used to activate.
 */
export async function activateFromEnvironment(
  licensing: Licensing,
  config: Config,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  const { LICENSE_KEY: key, LICENSE_EMAIL: email } = config;
  delete env.LICENSE_KEY;
  delete env.LICENSE_EMAIL;
  delete config.LICENSE_KEY;
  delete config.LICENSE_EMAIL;
  if (!key || !email) return;
  const result = await activateLicense(licensing, key, email).catch((error: Error) => ({
    success: false,
    message: error.message,
  }));
  if (result.success) logger.info('license activated from the environment', { result: result.message });
  else logger.warn('license activation from the environment failed', { result: result.message });
}

export function describeExpiry(result: ActivationResult): string {
  return result.expiresAt ? `expires ${result.expiresAt}` : 'lifetime, no expiry';
}
