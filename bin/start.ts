/**
 * Local host: `npm start`. Serves the Lambda functions through serverless-offline on PORT/HOST,
 * backed by DATABASE_URL or, when it is unset, an embedded PostgreSQL whose data lives in .data/.
 */
import { extname, join, resolve } from 'node:path';
import { checkHealth } from '#lib/admin/health';
import { type Config, loadConfig } from '#lib/config';
import { withServicePool } from '#lib/db/pool';
import { activateFromEnvironment } from '#lib/license/activation';
import { withLicensing } from './activate-license';
import { localDataDir, localSecrets, recordRuntime, startLocalPostgres } from './local';
import { serveFromChild, serveInThisProcess } from './offline';

const dataDir = localDataDir(process.env);
/** Whether this runs as the prebuilt dist/bin/start.js (npm run build), not as the sources under tsx. */
const prebuilt = extname(__filename) === '.js';
/** dist/ for the prebuilt host; the working directory's serverless.yml otherwise. */
const serviceDir = prebuilt ? join(__dirname, '..') : undefined;
const production = process.env.NODE_ENV === 'production';

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
  const secrets = production ? undefined : localSecrets(dataDir);
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

  let database: Awaited<ReturnType<typeof startLocalPostgres>> | undefined;
  let forgetRuntime: () => void = () => undefined;
  if (!env.DATABASE_URL && secrets) {
    console.log(`dbadmin: starting embedded PostgreSQL in ${join(dataDir, 'postgres')}`);
    database = await startLocalPostgres(dataDir, secrets, { log: console.log, giveUp: endForRestart });
    env.DATABASE_URL = database.url;
    forgetRuntime = recordRuntime(dataDir, database.url);
  }

  const config = await checkedSettings(env, async () => {
    forgetRuntime();
    await database?.stop();
  });
  await activateAtStart(config, env);
  await reportDatabase(config);
  absolutePaths(config, env);
  const serve = prebuilt ? serveInThisProcess : serveFromChild;
  serve({
    port: env.PORT ?? '3000',
    host: env.HOST ?? '127.0.0.1',
    env,
    cwd: serviceDir,
    cleanup: () => {
      forgetRuntime();
      database?.stopNow();
    },
  });
}

/**
 * The status of a host whose embedded PostgreSQL kept dying: bin/supervise.sh starts it again, and
 * its start either brings PostgreSQL up (on a port of its own: another process may hold the old
 * one) or stops, with PostgreSQL's own words, as a start that fails does.
 */
const POSTGRES_KEPT_DYING = 75;

/**
 * Ends the host as SIGTERM does (serverless-offline's shutdown, or serveFromChild's, which ends the
 * child serving too), with POSTGRES_KEPT_DYING for its status.
 */
function endForRestart(why: string): void {
  console.error(`${why}; the host ends, to be started again`);
  process.on('exit', () => {
    process.exitCode = POSTGRES_KEPT_DYING;
  });
  process.kill(process.pid, 'SIGTERM');
}

/**
 * The path settings the functions read, made absolute where the host was started: the prebuilt
 * host serves from dist/ (serverless-offline's service directory is its working directory), where
 * a relative path would land, and `npm start` rebuilds dist/ on every start.
 */
function absolutePaths(config: Config, env: NodeJS.ProcessEnv): void {
  env.LICENSE_DATA_DIR = resolve(config.LICENSE_DATA_DIR);
  if (config.LICENSE_SERVER_CA_FILE) env.LICENSE_SERVER_CA_FILE = resolve(config.LICENSE_SERVER_CA_FILE);
}

/** Every setting checked before the host starts: a malformed one stops the start, named in one line. */
async function checkedSettings(env: NodeJS.ProcessEnv, stop: () => Promise<void>): Promise<Config> {
  try {
    return await loadConfig(env);
  } catch (error) {
    console.error(`dbadmin: cannot start: ${(error as Error).message}`);
    await stop();
    process.exit(1);
  }
}

/** What /api/health warns about (a database that does not keep text as UTF-8), in the log before serving. */
async function reportDatabase(config: Config): Promise<void> {
  await withServicePool(config, 'dbadmin-start', checkHealth).catch(() => {
    // Not reachable now: the host starts anyway and /api/health answers 503 until it is.
  });
}

/**
 * SPEC.md's startup activation, before the host serves: LICENSE_KEY + LICENSE_EMAIL activate this
 * machine, then leave the environment the functions get. A failure is reported and the service
 * starts anyway, so the API and the CLI can still activate.
 */
async function activateAtStart(config: Config, env: NodeJS.ProcessEnv): Promise<void> {
  try {
    if (env.LICENSE_KEY && env.LICENSE_EMAIL)
      await withLicensing(config, (licensing) => activateFromEnvironment(licensing, config, env));
    else if (env.LICENSE_KEY || env.LICENSE_EMAIL)
      console.warn('dbadmin: license activation at start needs both LICENSE_KEY and LICENSE_EMAIL');
  } catch (error) {
    console.warn(`dbadmin: license activation at start failed: ${(error as Error).message}`);
  } finally {
    // Never passed on: the functions share this environment (serverless-offline restores it on
    // every invocation), and a key has no business there.
    delete env.LICENSE_KEY;
    delete env.LICENSE_EMAIL;
  }
}

main().catch((error: unknown) => {
  console.error(`dbadmin: failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
