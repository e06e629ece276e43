import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../../bin/free-port';
import { PGBOUNCER_AUTH_USER, pgbouncerAuthProvisioning } from '../../bin/pgbouncer-auth';
import { scramVerifier } from '../../lib/db/scram';

/**
 * The real PgBouncer (Debian's `pgbouncer` package, /usr/sbin/pgbouncer) in front of a test
 * database, as the container's `pgbouncer` profile runs it (deploy/pgbouncer):
 *
 * - transaction pooling, one pool per (database, login): every tenant role keeps logging in as
 *   itself, never a shared login that switches roles;
 * - a global cap on server connections (`max_db_connections`) whatever the logins;
 * - no file of tenants' passwords: a login is looked up with `auth_query` through
 *   `_dbadmin_pgbouncer.get_auth(name)` (bin/pgbouncer-auth), and PgBouncer logs in to PostgreSQL with
 *   the client's own SCRAM proof. The auth file holds the auth user's credentials only.
 */

export interface PgBouncerOptions {
  /** The database URL dbadmin would use directly (the service's login); its host, port, database. */
  databaseUrl: string;
  /** A login that may create the auth schema and read pg_authid (the embedded superuser). */
  superuserUrl: string;
  /** Server connections for the database, all logins together. Default 50. */
  maxDbConnections?: number;
  /** Server connections per login (per pool). Default 20. */
  poolSize?: number;
  /** Any other [pgbouncer] settings. */
  settings?: Record<string, string | number>;
}

export interface PgBouncer {
  /** `databaseUrl` with PgBouncer's host and port: DATABASE_URL through the pooler. */
  url: string;
  port: number;
  /** PgBouncer's admin console (SHOW POOLS, SHOW SERVERS...) as the auth user (a stats user). */
  adminUrl: string;
  version: string;
  /** Rows of an admin console command (`SHOW POOLS`, `SHOW SERVERS`, `SHOW CLIENTS`...). */
  show(what: string): Promise<Record<string, unknown>[]>;
  /** Server connections PgBouncer holds to the database now, all pools together. */
  serverConnections(): Promise<number>;
  /** The log so far (for a failing test's message). */
  log(): string;
  /** Stops PgBouncer (SIGINT: immediate shutdown), removes its directory. */
  stop(): Promise<void>;
}

const PGBOUNCER = '/usr/sbin/pgbouncer';

export function pgbouncerVersion(): string {
  const out = execFileSync(PGBOUNCER, ['--version'], { encoding: 'utf8' });
  return /PgBouncer (\S+)/.exec(out)?.[1] ?? out.trim();
}

export const pgbouncerInstalled = () => existsSync(PGBOUNCER);

/** `"` doubled, as PgBouncer's auth file reads it. */
const authField = (value: string) => `"${value.replace(/"/g, '""')}"`;

/**
 * The auth user and `_dbadmin_pgbouncer.get_auth` in the database PgBouncer serves (1.18 has no
 * auth_dbname: auth_query runs in the client's database), as the container's init makes them;
 * the auth user gets a new random password each time.
 */
export async function installAuthFunction(superuserUrl: string, database: string): Promise<string> {
  const url = new URL(superuserUrl);
  url.pathname = `/${database}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  const password = randomBytes(24).toString('base64url');
  try {
    await client.query(pgbouncerAuthProvisioning());
    const verifier = pg.escapeLiteral(await scramVerifier(password));
    await client.query(`ALTER ROLE ${PGBOUNCER_AUTH_USER} PASSWORD ${verifier}`);
  } finally {
    await client.end();
  }
  return password;
}

/** As root, PgBouncer runs as the `postgres` user the embedded server runs as (it will not run as root). */
function runAs(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

async function waitForListen(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const until = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`pgbouncer exited (${child.exitCode ?? child.signalCode}):\n${log()}`);
    }
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`pgbouncer did not listen on ${port}:\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The [pgbouncer] section of the container's configuration, as `name = value` pairs. */
export function shippedSettings(): Record<string, string> {
  const text = readFileSync(join(__dirname, '../../deploy/pgbouncer/pgbouncer.ini'), 'utf8');
  const section = text.slice(text.indexOf('[pgbouncer]') + '[pgbouncer]'.length);
  const settings: Record<string, string> = {};
  for (const line of section.split('\n')) {
    const setting = /^([a-z_]+)\s*=\s*(.*)$/.exec(line.trim());
    if (setting) settings[setting[1] as string] = setting[2] as string;
  }
  return settings;
}

/** Starts PgBouncer in front of `databaseUrl`'s server and database; see PgBouncerOptions. */
export async function startPgBouncer(options: PgBouncerOptions): Promise<PgBouncer> {
  const target = new URL(options.databaseUrl);
  const database = decodeURIComponent(target.pathname.slice(1)) || 'postgres';
  const authPassword = await installAuthFunction(options.superuserUrl, database);
  const dir = mkdtempSync(join(tmpdir(), 'dbadmin-pgbouncer-'));
  const account = runAs();
  const port = await freePort();
  const logFile = join(dir, 'pgbouncer.log');
  const ini = join(dir, 'pgbouncer.ini');
  const authFile = join(dir, 'userlist.txt');
  // The auth user's credentials only: PgBouncer logs in as it without a client, so it needs the
  // password itself (a SCRAM secret works only for pass-through).
  writeFileSync(authFile, `${authField(PGBOUNCER_AUTH_USER)} ${authField(authPassword)}\n`, { mode: 0o600 });
  // The container's own settings (deploy/pgbouncer/pgbouncer.ini), here only listening, its
  // files and its caps changed.
  const settings: Record<string, string | number> = {
    ...shippedSettings(),
    listen_addr: '127.0.0.1',
    listen_port: port,
    logfile: logFile,
    pidfile: join(dir, 'pgbouncer.pid'),
    auth_file: authFile,
    default_pool_size: options.poolSize ?? 20,
    max_db_connections: options.maxDbConnections ?? 50,
    ...options.settings,
  };
  const lines = [
    '[databases]',
    `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database}`,
    '',
    '[pgbouncer]',
    ...Object.entries(settings).map(([key, value]) => `${key} = ${value}`),
    '',
  ];
  writeFileSync(ini, lines.join('\n'), { mode: 0o600 });
  if (account) {
    chmodSync(dir, 0o700);
    for (const file of [dir, ini, authFile]) chownSync(file, account.uid, account.gid);
  }
  const child = spawn(PGBOUNCER, [ini], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(account ? { uid: account.uid, gid: account.gid } : {}),
  });
  let said = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    said += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    said += chunk.toString();
  });
  const log = () => {
    const file = existsSync(logFile) ? readFileSync(logFile, 'utf8') : '';
    return `${said}${file}`;
  };
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  try {
    await waitForListen(port, child, log);
  } catch (error) {
    child.kill('SIGKILL');
    removeDir();
    throw error;
  }
  const url = new URL(options.databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  const admin = new URL(url);
  admin.pathname = '/pgbouncer';
  admin.username = PGBOUNCER_AUTH_USER;
  admin.password = encodeURIComponent(authPassword);
  const adminUrl = admin.toString();
  const show = async (what: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      return (await client.query(`SHOW ${what}`)).rows as Record<string, unknown>[];
    } finally {
      await client.end();
    }
  };
  return {
    url: url.toString(),
    port,
    adminUrl,
    version: pgbouncerVersion(),
    show,
    serverConnections: async () => {
      const servers = await show('SERVERS');
      return servers.filter((row) => row.database === database).length;
    },
    log,
    stop: async () => {
      // Ended before its time: what it said is the only account of why.
      if (child.exitCode !== null || child.signalCode !== null) {
        console.error(`pgbouncer had exited (${child.exitCode ?? child.signalCode}):\n${log().slice(-4000)}`);
      }
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGINT');
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5000))]);
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      }
      removeDir();
    },
  };
}
