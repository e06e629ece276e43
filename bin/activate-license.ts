/**
 * activate-license --key KEY --email EMAIL [--server-url URL]
 * Validates the key, activates this machine, saves the license file, prints type and expiry.
 * activate-license --deactivate [--server-url URL]: frees this machine's slot.
 */
import { parseArgs } from 'node:util';
import { type Config, loadConfig } from '#lib/config';
import { withServicePool } from '#lib/db/pool';
import { activateLicense, describeExpiry } from '#lib/license/activation';
import { createLicensing } from '#lib/license/index';
import type { Licensing } from '#lib/license/licensing';
import { localEnvironment } from './local';

export const HELP = `Usage: activate-license --key KEY --email EMAIL [--server-url URL]
       activate-license --deactivate [--server-url URL]

Activates a dbadmin license on this machine (container), or frees its deployment slot.

  -k, --key         license key (required to activate)
  -e, --email       the email the license was bought with (required to activate)
  -d, --deactivate  free this machine's slot at the license server and forget the license here
  -s, --server-url  license server, instead of LICENSE_SERVER_URL (https:// only)
  -h, --help        show this help

Uses the service's settings (DATABASE_URL, DBADMIN_SECRET, LICENSE_DATA_DIR, ...).`;

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

/** The service's licensing on its own pool (migrated), for one piece of work, then closed. */
export async function withLicensing<T>(
  config: Config,
  work: (licensing: Licensing) => Promise<T>,
): Promise<T> {
  return withServicePool(config, 'dbadmin-activate-license', (db) => work(createLicensing(config, db)));
}

export async function run(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<number> {
  let values: { key?: string; email?: string; 'server-url'?: string; help?: boolean; deactivate?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        key: { type: 'string', short: 'k' },
        email: { type: 'string', short: 'e' },
        'server-url': { type: 'string', short: 's' },
        deactivate: { type: 'boolean', short: 'd' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (error) {
    io.err(`activate-license: ${(error as Error).message}\n\n${HELP}`);
    return 2;
  }
  if (values.help) {
    io.out(HELP);
    return 0;
  }
  const missing = [!values.key && '--key', !values.email && '--email'].filter(Boolean);
  if (!values.deactivate && (missing.length > 0 || !values.key || !values.email)) {
    io.err(`activate-license: missing ${missing.join(' and ')}\n\n${HELP}`);
    return 2;
  }
  // Beside a local `npm start`: its generated secret, and its database (or the embedded one).
  let local: Awaited<ReturnType<typeof localEnvironment>> | undefined;
  let config: Config;
  try {
    local = await localEnvironment(env);
    config = await loadConfig({
      ...local.env,
      ...(values['server-url'] ? { LICENSE_SERVER_URL: values['server-url'] } : {}),
    });
  } catch (error) {
    await local?.stop();
    io.err(`activate-license: ${(error as Error).message}`);
    return 1;
  }
  const { key, email, deactivate } = values;
  try {
    return await withLicensing(config, async (licensing) => {
      if (deactivate || !key || !email) {
        const freed = await licensing.deactivate();
        if (freed.success) io.out(`License deactivated (${freed.message}): this machine's slot is free`);
        else io.err(`activate-license: ${freed.message}`);
        return freed.success ? 0 : 1;
      }
      const result = await activateLicense(licensing, key, email);
      if (result.success)
        io.out(`License activated (${result.message}): type ${result.type}, ${describeExpiry(result)}`);
      else io.err(`activate-license: ${result.message}`);
      return result.success ? 0 : 1;
    });
  } catch (error) {
    io.err(`activate-license: ${(error as Error).message}`);
    return 1;
  } finally {
    await local?.stop();
  }
}
