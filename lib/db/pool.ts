import pg from 'pg';
import { type Config, getConfig } from '#lib/config';
import { sessionBudget } from '#lib/db/connection-budget';
import { TEXT_OUTPUT_SETTINGS } from '#lib/db/json-rows';
import { migrate } from '#lib/db/migrations';
import { fromDatabaseError } from '#lib/db/pg-errors';
import { isPooled, type PooledClient, pooledClient, setLocal } from '#lib/db/pooler';
import { SessionPool } from '#lib/db/session-pool';
import { inTransaction, type TransactionOptions } from '#lib/db/transaction';
import { ApiError, QueryTimeout } from '#lib/errors';
import { logger } from '#lib/log';

/**
 * How dbadmin's own reads parse values (sizes, counts, ids, its own timestamps as Dates): bigints
 * as numbers while exact (else the exact string); dates, timestamps without zone, intervals and
 * bytea as PostgreSQL prints them. A tenant's values leave by lib/db/json-rows instead.
 */
const { builtins } = pg.types;
pg.types.setTypeParser(builtins.INT8, (value) => {
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : value;
});
for (const oid of [builtins.DATE, builtins.TIMESTAMP, builtins.INTERVAL, builtins.BYTEA, builtins.TIME]) {
  pg.types.setTypeParser(oid, (value) => value);
}

let pool: pg.Pool | undefined;
let queryPool: SessionPool | undefined;
let migrated: Promise<void> | undefined;
const closers = new Set<() => Promise<void>>();

export interface PoolOptions {
  applicationName: string;
  /** Another login than DATABASE_URL's (a schema's role), with its password. */
  login?: { user: string; password: string };
  /**
   * Settings fixed at connection start (`-c name=value`), which outrank a role's own defaults;
   * through a transaction pooler, sent with each BEGIN instead (lib/db/pooler).
   */
  settings?: Record<string, string>;
  /** The sessions' statement timeout; QUERY_TIMEOUT_MS unless a tenant's quota is lower. */
  statementTimeoutMs?: number;
}

/** `-c name=value` pairs for the startup packet; values are our own (identifiers, numbers). */
const startupOptions = (settings: Record<string, string>) =>
  Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value.replace(/[\\ ]/g, '\\$&')}`)
    .join(' ');

/** DATABASE_URL, or the same server and database with another login (pg lets the URL win over fields). */
function connectionString(config: Config, login: PoolOptions['login']): string {
  if (!login) return config.DATABASE_URL;
  const url = new URL(config.DATABASE_URL);
  url.username = encodeURIComponent(login.user);
  url.password = encodeURIComponent(login.password);
  return url.toString();
}

/**
 * How connections start their sessions: with startup settings (`-c`) and statement_timeout; or,
 * through a transaction pooler (lib/db/pooler), with the same settings sent again at the start of
 * each transaction, by a client class that knows them.
 */
function sessionStart(config: Config, options: PoolOptions) {
  const statementTimeout = options.statementTimeoutMs ?? config.QUERY_TIMEOUT_MS;
  if (config.DATABASE_POOL_MODE === 'transaction') {
    const settings = { ...options.settings, statement_timeout: String(statementTimeout) };
    return { Client: pooledClient(setLocal(settings)) };
  }
  return {
    statement_timeout: statementTimeout,
    ...(options.settings ? { options: startupOptions(options.settings) } : {}),
  };
}

export function createPool(config: Config, options: PoolOptions): pg.Pool {
  const created = new pg.Pool({
    connectionString: connectionString(config, options.login),
    max: config.DB_POOL_MAX,
    connectionTimeoutMillis: config.DB_CONNECT_TIMEOUT_MS,
    // Lambda freezes idle containers; short idle times avoid handing out sockets the server closed.
    idleTimeoutMillis: config.lambda ? 60_000 : 30_000,
    application_name: options.applicationName,
    keepAlive: true,
    ...sessionStart(config, options),
  });
  return logLostConnections(created);
}

/** An idle client losing its connection (server restart, frozen container) must not crash us. */
export function logLostConnections(pool: pg.Pool): pg.Pool {
  pool.on('error', (error) => logger.warn('idle database connection lost', { reason: error.message }));
  return pool;
}

/**
 * A pool for the command-line tools: the service's own login and pg_catalog-only search path,
 * `_dbadmin` migrated, for one piece of work, then closed.
 */
export async function withServicePool<T>(
  config: Config,
  applicationName: string,
  work: (db: pg.Pool) => Promise<T>,
): Promise<T> {
  const db = createPool(config, { applicationName, settings: { search_path: 'pg_catalog, pg_temp' } });
  try {
    await withClient(db, (client) => migrate(client));
    return await work(db);
  } finally {
    await db.end();
  }
}

/**
 * The process's pool for dbadmin's own SQL, created on first use and reused across invocations
 * and by every function's bundle in the process (the local host runs them all in one): its
 * DB_POOL_MAX connections are the service's share of the process's budget (DB_PROCESS_CONNECTIONS),
 * set apart from the sessions' (sessionBudget), so a request that holds a session can always
 * still read the catalog. Its search path is pg_catalog alone, fixed at connection start, and
 * every name in our SQL is schema-qualified: no operator or function a tenant creates can be
 * picked by it.
 */
export async function getPool(): Promise<pg.Pool> {
  if (pool && !pool.ending) return pool;
  const config = await getConfig();
  // Checked again after the wait: requests in flight together must share one pool.
  if (!pool || pool.ending) pool = adoptServicePool(config);
  return pool;
}

const SERVICE_POOL = Symbol.for('dbadmin.service-pool');
/** The process's service pool, and how many bundles (module copies) use it: the last to close ends it. */
const processGlobal = globalThis as { [SERVICE_POOL]?: { key: string; pool: pg.Pool; users: number } };

function adoptServicePool(config: Config): pg.Pool {
  const key = `${config.DATABASE_URL} ${config.DB_POOL_MAX}`;
  const shared = processGlobal[SERVICE_POOL];
  if (shared && shared.key === key && !shared.pool.ending) {
    shared.users++;
    return shared.pool;
  }
  const created = createPool(config, {
    applicationName: 'dbadmin',
    settings: { search_path: 'pg_catalog, pg_temp' },
  });
  processGlobal[SERVICE_POOL] = { key, pool: created, users: 1 };
  return created;
}

/** This bundle no longer uses the service pool: ended once no bundle does. */
async function leaveServicePool(used: pg.Pool | undefined): Promise<void> {
  const shared = processGlobal[SERVICE_POOL];
  if (!used || used.ending) return;
  if (shared?.pool === used && --shared.users > 0) return;
  if (shared?.pool === used) processGlobal[SERVICE_POOL] = undefined;
  await used.end();
}

/** What the process's sessions (schema roles, the admin's SQL) may open together: the rest of the budget. */
const sessionLimit = (config: Config) => config.DB_PROCESS_CONNECTIONS - config.DB_POOL_MAX;

/** The pg.Client settings of a session pool's connections (see createPool). */
export function sessionPool(config: Config, options: PoolOptions): SessionPool {
  const { Client, ...start } = { Client: undefined, ...sessionStart(config, options) };
  return new SessionPool(sessionBudget(sessionLimit(config)), {
    client: {
      connectionString: connectionString(config, options.login),
      application_name: options.applicationName,
      keepAlive: true,
      ...start,
    },
    Client,
    // One session a login per Lambda container: it serves one request at a time.
    max: config.lambda ? 1 : config.DB_POOL_MAX,
    waitMs: config.DB_CONNECT_TIMEOUT_MS,
    loginMs: config.DB_CONNECT_TIMEOUT_MS,
    idleMs: config.lambda ? 60_000 : 30_000,
  });
}

/**
 * Connections that run the admin's own ad-hoc SQL with the admin's rights (an explicit opt-in):
 * such SQL may change session state, so they are reset after every use.
 */
export async function getQueryPool(): Promise<SessionPool> {
  if (queryPool) return queryPool;
  const config = await getConfig();
  queryPool ??= sessionPool(config, {
    applicationName: 'dbadmin-query',
    settings: { ...TEXT_OUTPUT_SETTINGS },
  });
  return queryPool;
}

export interface PoolUse {
  pool: string;
  total: number;
  idle: number;
  waiting: number;
}

const useOf = (name: string, p: pg.Pool): PoolUse => ({
  pool: name,
  total: p.totalCount,
  idle: p.idleCount,
  waiting: p.waitingCount,
});

/** This bundle's own query pool, as it is now (for the metrics). */
export const bundlePoolUse = (): PoolUse[] => (queryPool ? [{ pool: 'query', ...queryPool.use }] : []);

/** The service's pool, shared by the process's bundles, as it is now (for the metrics). */
export function processServicePoolUse(): PoolUse | undefined {
  const shared = processGlobal[SERVICE_POOL]?.pool;
  return shared && useOf('service', shared);
}

/** A set of session pools counted as one (the schema roles'). */
export const poolsUse = (name: string, pools: Iterable<SessionPool>): PoolUse => {
  const use = { pool: name, total: 0, idle: 0, waiting: 0 };
  for (const p of pools) {
    use.total += p.use.total;
    use.idle += p.use.idle;
    use.waiting += p.use.waiting;
  }
  return use;
};

/**
 * The pool with `_dbadmin` migrated: applied once per container (cold start), retried on the
 * next request if the database was not reachable.
 */
export async function getDatabase(): Promise<pg.Pool> {
  const db = await getPool();
  migrated ??= withClient(db, async (client) => {
    await migrate(client);
    if (isPooled(client)) await pinSearchPath(client);
  }).catch((error: unknown) => {
    migrated = undefined;
    throw error;
  });
  await migrated;
  return db;
}

/**
 * Through a transaction pooler a statement outside a transaction runs without the pool's startup
 * settings: the service's login gets pg_catalog alone as its own default search path in this
 * database, as every session of ours starts with it.
 */
async function pinSearchPath(client: pg.ClientBase): Promise<void> {
  const { rows } = await client.query<{ database: string; pinned: boolean }>(
    `SELECT pg_catalog.current_database() AS database,
            EXISTS (SELECT 1 FROM pg_catalog.pg_db_role_setting s JOIN pg_catalog.pg_database d ON d.oid = s.setdatabase
                     WHERE s.setrole = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER)
                       AND d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database()
                       AND s.setconfig OPERATOR(pg_catalog.@>) ARRAY['search_path=pg_catalog, pg_temp']) AS pinned`,
  );
  if (rows[0]?.pinned) return;
  const database = pg.escapeIdentifier(rows[0]?.database ?? '');
  // Another process pinning it at the same moment ("tuple concurrently updated") did the same.
  await client
    .query(`ALTER ROLE CURRENT_USER IN DATABASE ${database} SET search_path = pg_catalog, pg_temp`)
    .catch((error: unknown) => logger.warn('search path not pinned', { reason: String(error) }));
}

/** The connection cannot be trusted again: the server went away (raw, or already mapped to a 503). */
const connectionLost = (error: unknown) =>
  (error instanceof ApiError ? error.status : fromDatabaseError(error)?.status) === 503;

/**
 * Runs `work` on one pooled connection; a connection that failed is discarded, not reused. While
 * checked out the client has no listener of pg-pool's, so a socket that dies between two queries
 * would throw an unhandled 'error' and take the process down: we listen for it ourselves.
 */
export async function withClient<T>(db: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return useClient(await db.connect(), work, async () => undefined);
}

/**
 * DISCARD ALL but its DISCARD PLANS (as PostgreSQL's documentation spells it out), in one round
 * trip: settings, roles, advisory locks, LISTEN, temporary objects, sequences' state, prepared
 * statements, cursors. Cached plans stay: they are the plans of functions' statements (ours,
 * and those of the tenant's functions, which run with its rights whoever calls them), each made
 * for its own search path and re-made by PostgreSQL when a table or type it uses changes; a pool
 * serves one role (a schema's, lib/db/executor) or the admin (runAs admin). Re-planning every
 * function's statements on every request would cost as much as the audit log's own write
 * (bench/audit.ts).
 */
export const RESET_SESSION = [
  'CLOSE ALL',
  'SET SESSION AUTHORIZATION DEFAULT',
  'RESET ALL',
  'DEALLOCATE ALL',
  'UNLISTEN *',
  'SELECT pg_catalog.pg_advisory_unlock_all()',
  'DISCARD TEMP',
  'DISCARD SEQUENCES',
].join('; ');

/**
 * Like withClient, for connections on which code we did not write may have run (a tenant's
 * triggers, defaults, policies; ad-hoc SQL): the connection goes back to its pool only idle and
 * reset to how it logged in (RESET_SESSION); otherwise it is destroyed.
 */
export async function withSession<T>(
  client: pg.PoolClient,
  work: (client: pg.PoolClient) => Promise<T>,
  deadline?: { afterMs: number; terminate: () => void },
): Promise<T> {
  // Planted code can switch statement_timeout off for the session's later statements: past the
  // deadline the session is terminated from outside, whatever it set.
  let expired = false;
  const timer =
    deadline &&
    setTimeout(() => {
      expired = true;
      discardAfterUse(client);
      deadline.terminate();
    }, deadline.afterMs);
  try {
    return await useClient(client, work, async () => {
      if (client.getTransactionStatus() !== 'I') throw new Error('session left inside a transaction');
      // Through a transaction pooler too: PgBouncer keeps a client's client_encoding, DateStyle,
      // TimeZone... as the server last reported them and sets them again on the next server it
      // gives that client; the reset's reports put them back.
      await client.query(RESET_SESSION);
    });
  } catch (error) {
    if (expired) throw new QueryTimeout('ran longer than the query timeout allows', error);
    throw error;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Connections whose statement was cancelled or which were cut off: destroyed after use, never
 * reused, so a cancel that lands late can never hit the next borrower's statement.
 */
const doomed = new WeakSet<pg.ClientBase>();
export function discardAfterUse(client: pg.ClientBase): void {
  doomed.add(client);
}

/**
 * Cancels the statement of a checked-out session, or ends the session, from another pool (`via`);
 * either way the session is destroyed after use, so a late cancel never hits a later statement.
 * Never rejects; its caller need not wait for it.
 */
export async function stopBackend(
  via: pg.Pool,
  client: pg.ClientBase,
  how: 'cancel' | 'terminate',
): Promise<void> {
  discardAfterUse(client);
  if (isPooled(client)) return stopPooledBackend(via, client, how);
  const pid = (client as unknown as { processID: number }).processID;
  const sql = how === 'cancel' ? 'SELECT pg_cancel_backend($1)' : 'SELECT pg_terminate_backend($1)';
  await via.query(sql, [pid]).catch(() => undefined);
}

/**
 * The condition on pg_stat_activity `a` of a backend of this database that runs, now, the
 * statement `$2` for the login `$1` (its text as shown: at most track_activity_query_size, 1024
 * by default, less one bytes, so a long one by its prefix): how a backend is found through a
 * transaction pooler, whose process ids are its own.
 */
export const RUNNING_STATEMENT = `a.usename = $1 AND a.datname = pg_catalog.current_database() AND a.state = 'active'
  AND (a.query = $2 OR (pg_catalog.octet_length(a.query) >= 1000 AND pg_catalog.starts_with($2, a.query)))`;

/**
 * Through a transaction pooler the connection's process id is the pooler's, which may be any
 * backend's: a cancel goes by the protocol, which the pooler forwards to the backend running the
 * statement; a termination finds the backend by its login and the statement it runs (ours, or
 * the caller's SQL), so at worst it also ends the same login's same statement elsewhere.
 */
async function stopPooledBackend(
  via: pg.Pool,
  client: PooledClient,
  how: 'cancel' | 'terminate',
): Promise<void> {
  client.cancelOnWire();
  if (how === 'cancel' || !client.lastStatement) return;
  await via
    .query(
      `SELECT pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a WHERE ${RUNNING_STATEMENT}`,
      [client.user, client.lastStatement],
    )
    .catch(() => undefined);
}

async function useClient<T>(
  client: pg.PoolClient,
  work: (client: pg.PoolClient) => Promise<T>,
  clean: () => Promise<void>,
): Promise<T> {
  let broken: Error | undefined;
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    const result = await work(client);
    await clean().catch((error: Error) => {
      broken ??= error;
    });
    return result;
  } catch (error) {
    if (connectionLost(error)) broken = error as Error;
    else
      await clean().catch((failure: Error) => {
        broken ??= failure;
      });
    throw error;
  } finally {
    client.removeListener('error', onError);
    client.release(broken ?? (doomed.has(client) ? new Error('statement cancelled') : undefined));
  }
}

/** Runs `work` in one transaction on the service's pool: all of it commits, or none of it. */
export function withTransaction<T>(
  db: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  options?: TransactionOptions<T>,
): Promise<T> {
  return withClient(db, (client) => inTransaction(client, () => work(client), options));
}

/** Pools made elsewhere (per role) close with the service's own. */
export function onClose(close: () => Promise<void>): void {
  closers.add(close);
}

/** Closes every pool of this bundle (tests, local shutdown). The next getPool() builds a new one. */
export async function closePool(): Promise<void> {
  const [service, sessions] = [pool, queryPool];
  pool = undefined;
  queryPool = undefined;
  migrated = undefined;
  await Promise.all([leaveServicePool(service), sessions?.close(), ...[...closers].map((close) => close())]);
}
