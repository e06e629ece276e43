/**
 * Local host: `npm start`. Serves the Lambda functions through serverless-offline on PORT/HOST,
 * backed by DATABASE_URL or, when it is unset, an embedded PostgreSQL whose data lives in .data/.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadConfig } from '#lib/config';
import { activateFromEnvironment } from '#lib/license/activation';
import { withLicensing } from './activate-license';
import { startEmbeddedPostgres } from './embedded-postgres';
import { runOffline } from './offline';

const dataDir = resolve(process.env.DBADMIN_DATA_DIR ?? '.data');
const production = process.env.NODE_ENV === 'production';

interface LocalSecrets {
  authUser: string;
  authPass: string;
  postgresPassword: string;
  serviceSecret?: string;
  databasePassword?: string;
}

/** Generated once and kept in .data/secrets.json (mode 600), so restarts keep them. */
function localSecrets(): Required<LocalSecrets> {
  const file = join(dataDir, 'secrets.json');
  const kept = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as LocalSecrets) : undefined;
  const secrets: Required<LocalSecrets> = {
    authUser: kept?.authUser ?? 'admin',
    authPass: kept?.authPass ?? randomBytes(24).toString('base64url'),
    postgresPassword: kept?.postgresPassword ?? randomBytes(24).toString('base64url'),
    // Added after the first release: files written before it gain it on the next start.
    serviceSecret: kept?.serviceSecret ?? randomBytes(32).toString('hex'),
    // The service's own database login (not the superuser's), also added after the first release.
    databasePassword: kept?.databasePassword ?? randomBytes(24).toString('base64url'),
  };
  if (JSON.stringify(kept) !== JSON.stringify(secrets)) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${JSON.stringify(secrets, null, 2)}\n`, { mode: 0o600 });
    chmodSync(file, 0o600);
  }
  return secrets;
}

function requireProductionSettings(): void {
  const missing = ['DATABASE_URL', 'AUTH_USER', 'AUTH_PASS', 'DBADMIN_SECRET'].filter(
    (name) => !process.env[name],
  );
  if (missing.length > 0) {
    console.error(`dbadmin: cannot start in production: missing settings: ${missing.join(', ')}`);
    process.exit(1);
  }
}

async function main(): Promise<void> {
  if (production) requireProductionSettings();
  const secrets = production ? undefined : localSecrets();
  const env: NodeJS.ProcessEnv = { ...process.env };
  if (secrets && !env.AUTH_USER && !env.AUTH_PASS) {
    env.AUTH_USER = secrets.authUser;
    env.AUTH_PASS = secrets.authPass;
    console.log(`dbadmin: generated credentials (kept in ${join(dataDir, 'secrets.json')}):`);
    console.log(`dbadmin:   user ${secrets.authUser}  password ${secrets.authPass}`);
  } else if (!env.AUTH_USER || !env.AUTH_PASS) {
    console.error('dbadmin: set both AUTH_USER and AUTH_PASS, or neither to use generated ones');
    process.exit(1);
  }

  env.DBADMIN_SECRET ??= secrets?.serviceSecret;

  let database: Awaited<ReturnType<typeof startEmbeddedPostgres>> | undefined;
  if (!env.DATABASE_URL && secrets) {
    const pgDir = join(dataDir, 'postgres');
    console.log(`dbadmin: starting embedded PostgreSQL in ${pgDir}`);
    database = await startEmbeddedPostgres({
      dataDir: pgDir,
      password: secrets.postgresPassword,
      servicePassword: secrets.databasePassword,
      persistent: true,
    });
    env.DATABASE_URL = database.url;
  }

  await activateAtStart(env);
  await runOffline({
    port: env.PORT ?? '3000',
    host: env.HOST ?? '127.0.0.1',
    env,
    cleanup: async () => database?.stop(),
  });
}

/**
 * SPEC.md's startup activation, before the host serves: LICENSE_KEY + LICENSE_EMAIL activate this
 * machine, then leave the environment the functions get. A failure is reported and the service
 * starts anyway, so the API and the CLI can still activate.
 */
async function activateAtStart(env: NodeJS.ProcessEnv): Promise<void> {
  if (!env.LICENSE_KEY || !env.LICENSE_EMAIL) return;
  try {
    const config = await loadConfig(env);
    await withLicensing(config, (licensing) => activateFromEnvironment(licensing, config, env));
  } catch (error) {
    console.warn(`dbadmin: license activation at start failed: ${(error as Error).message}`);
  } finally {
    delete env.LICENSE_KEY;
    delete env.LICENSE_EMAIL;
  }
}

main().catch((error: unknown) => {
  console.error(`dbadmin: failed to start: ${(error as Error).message}`);
  process.exit(1);
});
