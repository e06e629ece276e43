import { type Config, getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { activateFromEnvironment } from '#lib/license/activation';
import { Licensing } from '#lib/license/licensing';
import { licenseServerClient } from '#lib/license/server-client';

let instance: Promise<Licensing> | undefined;

export function createLicensing(
  config: Config,
  db: Awaited<ReturnType<typeof getDatabase>>,
  clock?: () => Date,
) {
  return new Licensing({
    db,
    dataDir: config.LICENSE_DATA_DIR,
    secret: config.DBADMIN_SECRET,
    client: () =>
      licenseServerClient({ url: config.LICENSE_SERVER_URL, caFile: config.LICENSE_SERVER_CA_FILE }),
    ...(clock ? { clock } : {}),
  });
}

/** The container's licensing, made on first use. */
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
