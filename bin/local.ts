/**
 * Local mode (`npm start` without DATABASE_URL, and the CLIs beside it): the generated secrets in
 * DBADMIN_DATA_DIR (.data/secrets.json, mode 600) and the embedded PostgreSQL they protect. The
 * running host writes its database URL to .data/runtime.json, so `npx activate-license` uses the
 * same database and DBADMIN_SECRET as the service, or starts the embedded PostgreSQL itself when
 * the service is not running.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from './embedded-postgres';
import { serverDataDir } from './postgres-reach';
import type { Restarts } from './postgres-restart';
import { alive } from './processes';

export const localDataDir = (env: NodeJS.ProcessEnv) => resolve(env.DBADMIN_DATA_DIR ?? '.data');

export interface LocalSecrets {
  authUser: string;
  authPass: string;
  postgresPassword: string;
  serviceSecret: string;
  databasePassword: string;
}

function writePrivate(file: string, value: unknown): void {
  mkdirSync(join(file, '..'), { recursive: true });
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
}

/** Generated once and kept in secrets.json (mode 600), so restarts and the CLIs share them. */
export function localSecrets(dataDir: string): LocalSecrets {
  const file = join(dataDir, 'secrets.json');
  const kept = existsSync(file)
    ? (JSON.parse(readFileSync(file, 'utf8')) as Partial<LocalSecrets>)
    : undefined;
  const secrets: LocalSecrets = {
    authUser: kept?.authUser ?? 'admin',
    authPass: kept?.authPass ?? randomBytes(24).toString('base64url'),
    postgresPassword: kept?.postgresPassword ?? randomBytes(24).toString('base64url'),
    // Added after the first release: files written before it gain it on the next start.
    serviceSecret: kept?.serviceSecret ?? randomBytes(32).toString('hex'),
    // The service's own database login (not the superuser's), also added after the first release.
    databasePassword: kept?.databasePassword ?? randomBytes(24).toString('base64url'),
  };
  if (JSON.stringify(kept) !== JSON.stringify(secrets)) writePrivate(file, secrets);
  return secrets;
}

const runtimeFile = (dataDir: string) => join(dataDir, 'runtime.json');

/** The running host's database, for the CLIs beside it; forgotten when the host stops. */
export function recordRuntime(dataDir: string, databaseUrl: string): () => void {
  writePrivate(runtimeFile(dataDir), { databaseUrl, pid: process.pid });
  return () => rmSync(runtimeFile(dataDir), { force: true });
}

async function answers(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => undefined);
  }
}

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** The pid of the host runtime.json records (0: none, or a file cut short). */
function recordedHost(dataDir: string): number {
  try {
    return Number((JSON.parse(readFileSync(runtimeFile(dataDir), 'utf8')) as { pid?: unknown }).pid) || 0;
  } catch {
    return 0;
  }
}

/** The number on a file's first line, postmaster.pid's pid (0: no file, or none we can read). */
function firstNumber(file: string): number {
  try {
    return Number(readFileSync(file, 'utf8').split('\n')[0]) || 0;
  } catch {
    return 0;
  }
}

/** Whether `pid` is a PostgreSQL serving `serverDir` (Linux's /proc; elsewhere never assumed). */
function servesDirectory(pid: number, serverDir: string): boolean {
  try {
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return basename(args[0] ?? '') === 'postgres' && args.includes(serverDir);
  } catch {
    return false;
  }
}

/**
 * The embedded PostgreSQL a host killed outright (SIGKILL, the kernel's OOM killer) left running:
 * runtime.json still names that host, now gone, and postmaster.pid a live PostgreSQL serving this
 * very data directory. It holds the directory, so no new host could start; it is stopped first (a
 * fast shutdown, as Ctrl-C gives it). Anything else is left alone, for PostgreSQL's own refusal
 * to speak for it: a server whose host runs, a CLI's (it records no host), a pid now someone else's.
 */
async function stopOrphanedPostgres(dataDir: string): Promise<void> {
  const host = recordedHost(dataDir);
  if (!host || host === process.pid || alive(host)) return;
  const serverDir = serverDataDir(join(dataDir, 'postgres'), () => undefined);
  const pidFile = join(serverDir, 'postmaster.pid');
  const postmaster = firstNumber(pidFile);
  if (!postmaster || !servesDirectory(postmaster, serverDir)) return;
  console.log(`dbadmin: stopping the embedded PostgreSQL (pid ${postmaster}) a stopped host left running`);
  try {
    process.kill(postmaster, 'SIGINT');
  } catch {
    return; // not ours to signal
  }
  for (let waited = 0; existsSync(pidFile) && waited < 30_000; waited += 50) await pause(50);
}

/**
 * The embedded PostgreSQL of this checkout, started with the local secrets; started again when it
 * dies if `restarts` says how (the host's: a CLI's run is short).
 */
export async function startLocalPostgres(dataDir: string, secrets: LocalSecrets, restarts?: Restarts) {
  await stopOrphanedPostgres(dataDir);
  return startEmbeddedPostgres({
    dataDir: join(dataDir, 'postgres'),
    password: secrets.postgresPassword,
    servicePassword: secrets.databasePassword,
    persistent: true,
    restarts,
  });
}

/**
 * For a CLI: `env` completed with the local credentials, DBADMIN_SECRET and DATABASE_URL (the running host's
 * database, else the embedded one started for the CLI's run). Nothing changes in production, on
 * Lambda, or where the settings are given.
 */
export async function localEnvironment(
  env: NodeJS.ProcessEnv,
): Promise<{ env: NodeJS.ProcessEnv; stop: () => Promise<void> }> {
  const local = env.NODE_ENV !== 'production' && !env.AWS_LAMBDA_FUNCTION_NAME;
  const dataDir = localDataDir(env);
  if (!local || !existsSync(join(dataDir, 'secrets.json'))) return { env, stop: async () => undefined };
  const secrets = localSecrets(dataDir);
  // The service's settings as `npm start` completes them (bin/start): the CLIs check the whole
  // set, though none of them signs in.
  const generatedCredentials = !env.AUTH_USER && !env.AUTH_PASS;
  const completed: NodeJS.ProcessEnv = {
    ...env,
    ...(generatedCredentials ? { AUTH_USER: secrets.authUser, AUTH_PASS: secrets.authPass } : {}),
    DBADMIN_SECRET: env.DBADMIN_SECRET ?? secrets.serviceSecret,
  };
  if (completed.DATABASE_URL) return { env: completed, stop: async () => undefined };
  const running = existsSync(runtimeFile(dataDir))
    ? (JSON.parse(readFileSync(runtimeFile(dataDir), 'utf8')) as { databaseUrl?: string }).databaseUrl
    : undefined;
  if (running && (await answers(running)))
    return { env: { ...completed, DATABASE_URL: running }, stop: async () => undefined };
  const database = await startLocalPostgres(dataDir, secrets);
  return { env: { ...completed, DATABASE_URL: database.url }, stop: database.stop };
}
