import { type Config, getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { activateFromEnvironment } from '#lib/license/activation';
import type { TrustedKey } from '#lib/license/lease';
import { Licensing } from '#lib/license/licensing';
import { licenseServerClient } from '#lib/license/server-client';

/**
 * The container's one Licensing (lib/license/licensing), made on first use with the settings and
 * the service's pool; tests swap in their own with a clock.
 */

let instance: Promise<Licensing> | undefined;

/** Tests move the clocks together and trust their own server's key; nothing else sets these. */
export interface LicensingOptions {
  clock?: () => Date;
  databaseClock?: () => Date;
  trustedKeys?: readonly TrustedKey[];
}

export function createLicensing(
  config: Config,
  db: Awaited<ReturnType<typeof getDatabase>>,
  options: LicensingOptions = {},
) {
  return new Licensing({
    db,
    dataDir: config.LICENSE_DATA_DIR,
    secret: config.DBADMIN_SECRET,
    client: () =>
      licenseServerClient({ url: config.LICENSE_SERVER_URL, caFile: config.LICENSE_SERVER_CA_FILE }),
    requireSignature: config.LICENSE_ENFORCEMENT === 'strict',
    ...options,
  });
}

/**
 * The container's licensing, made on first use; on Lambda, at cold start (see startLicensing),
 * which also activates from LICENSE_KEY + LICENSE_EMAIL.
 */
export function getLicensing(): Promise<Licensing> {
  instance ??= Promise.all([getConfig(), getDatabase()])
    .then(async ([config, db]) => {
      const licensing = createLicensing(config, db);
      await activateFromEnvironment(licensing, config);
      return licensing;
    })
    .catch((error: unknown) => {
      instance = undefined;
      throw error;
    });
  return instance;
}

/** Tests: use this licensing (say, with an injected clock), or with undefined build anew. */
export function setLicensing(licensing: Licensing | undefined): void {
  instance = licensing ? Promise.resolve(licensing) : undefined;
}

/**
 * Cold start on Lambda: build the licensing (and activate from the environment) while the
 * function initializes, not on its first request. The local host and the container activate in
 * bin/start.ts before they serve, and hand the functions an environment without the key.
 */
export function startLicensing(env: NodeJS.ProcessEnv = process.env): void {
  if (env.AWS_LAMBDA_FUNCTION_NAME && !env.IS_OFFLINE) getLicensing().catch(() => undefined);
}
