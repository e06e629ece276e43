/**
 * activate-license --key KEY --email EMAIL [--server-url URL]
 * Validates the key, activates this machine, saves the license file, prints type and expiry.
 */
import { parseArgs } from 'node:util';
import { type Config, loadConfig } from '#lib/config';
import { migrate } from '#lib/db/migrations';
import { createPool, withClient } from '#lib/db/pool';
import { activateLicense, describeExpiry } from '#lib/license/activation';
import { createLicensing } from '#lib/license/index';

export const HELP = `Usage: activate-license --key KEY --email EMAIL [--server-url URL]

Activates a dbadmin license on this machine (container).

  -k, --key         license key (required)
  -e, --email       the email the license was bought with (required)
  -s, --server-url  license server, instead of LICENSE_SERVER_URL (https:// only)
  -h, --help        show this help

Uses the service's settings (DATABASE_URL, DBADMIN_SECRET, LICENSE_DATA_DIR, ...).`;

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

export async function run(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<number> {
  let values: { key?: string; email?: string; 'server-url'?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        key: { type: 'string', short: 'k' },
        email: { type: 'string', short: 'e' },
        'server-url': { type: 'string', short: 's' },
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
  if (missing.length > 0 || !values.key || !values.email) {
    io.err(`activate-license: missing ${missing.join(' and ')}\n\n${HELP}`);
    return 2;
  }
  let config: Config;
  try {
    config = await loadConfig({
      ...env,
      ...(values['server-url'] ? { LICENSE_SERVER_URL: values['server-url'] } : {}),
    });
  } catch (error) {
    io.err(`activate-license: ${(error as Error).message}`);
    return 1;
  }
  const db = createPool(config, {
    applicationName: 'dbadmin-activate-license',
    settings: { search_path: 'pg_catalog, pg_temp' },
  });
  try {
    await withClient(db, (client) => migrate(client));
    const result = await activateLicense(createLicensing(config, db), values.key, values.email);
    if (!result.success) {
      io.err(`activate-license: ${result.message}`);
      return 1;
    }
    io.out(`License activated (${result.message}): type ${result.type}, ${describeExpiry(result)}`);
    return 0;
  } catch (error) {
    io.err(`activate-license: ${(error as Error).message}`);
    return 1;
  } finally {
    await db.end();
  }
}

if (require.main === module) {
  run(process.argv.slice(2), process.env, { out: console.log, err: console.error }).then((code) => {
    process.exitCode = code;
  });
}
