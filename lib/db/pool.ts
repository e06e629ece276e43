import pg from 'pg';
import { type Config, getConfig } from '#lib/config';
import { migrate } from '#lib/db/migrations';
import { fromDatabaseError } from '#lib/db/pg-errors';
import { ApiError } from '#lib/errors';

/**
 * How values leave PostgreSQL for JSON: bigints as numbers while exact (else the exact string);
 * dates, timestamps without zone, intervals and bytea as PostgreSQL prints them, since a JS Date
 * would shift a zoneless value by the server's offset and a Buffer serialises as a byte list.
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
let queryPool: pg.Pool | undefined;
let migrated: Promise<void> | undefined;

/**
 * A pool. `secondary` pools (ad-hoc SQL, key roles) get one connection in a container, which runs
 * one request at a time: many containers must share the server's max_connections.
 */
export function createPool(config: Config, applicationName = 'dbadmin', secondary = false): pg.Pool {
  const created = new pg.Pool({
    connectionString: config.DATABASE_URL,
    max: secondary && config.container ? 1 : config.DB_POOL_MAX,
    connectionTimeoutMillis: config.DB_CONNECT_TIMEOUT_MS,
    // Lambda freezes idle containers; short idle times avoid handing out sockets the server closed.
    idleTimeoutMillis: config.lambda ? 60_000 : 30_000,
    statement_timeout: config.QUERY_TIMEOUT_MS,
    application_name: applicationName,
    keepAlive: true,
  });
  // An idle client losing its connection (server restart, frozen container) must not crash us.
  created.on('error', (error) => console.warn(`dbadmin: idle database connection lost: ${error.message}`));
  return created;
}

/** The container's pool, created on first use and reused across invocations. */
export async function getPool(): Promise<pg.Pool> {
  pool ??= createPool(await getConfig());
  return pool;
}

/**
 * Connections that run callers' ad-hoc SQL, and nothing else: such SQL may change session state,
 * so these connections are reset after every use, which would discard the prepared statements
 * the main pool relies on.
 */
export async function getQueryPool(): Promise<pg.Pool> {
  queryPool ??= createPool(await getConfig(), 'dbadmin-query', true);
  return queryPool;
}

/**
 * The pool with `_dbadmin` migrated: applied once per container (cold start), retried on the
 * next request if the database was not reachable.
 */
export async function getDatabase(): Promise<pg.Pool> {
  const db = await getPool();
  migrated ??= withClient(db, async (client) => {
    await migrate(client);
  }).catch((error: unknown) => {
    migrated = undefined;
    throw error;
  });
  await migrated;
  return db;
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
  const client = await db.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => {
    broken = error;
  };
  client.on('error', onError);
  try {
    return await work(client);
  } catch (error) {
    if (connectionLost(error)) broken = error as Error;
    throw error;
  } finally {
    client.removeListener('error', onError);
    client.release(broken);
  }
}

/** Runs `work` in one transaction: all of it commits, or none of it. */
export function withTransaction<T>(db: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  return withClient(db, async (client) => {
    await client.query('BEGIN');
    try {
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/** Closes the pool (tests, local shutdown). The next getPool() builds a new one. */
export async function closePool(): Promise<void> {
  const closing = [pool, queryPool];
  pool = undefined;
  queryPool = undefined;
  migrated = undefined;
  await Promise.all(closing.map((p) => p?.end()));
}
