import pg from 'pg';
import { migrate } from '#lib/db/migrations';
import { logLostConnections, withClient } from '#lib/db/pool';
import { type LicenseServerConfig, loadLicenseServerConfig } from './config';
import { STORE_MIGRATIONS, STORE_TARGET } from './store';

let ready: Promise<pg.Pool> | undefined;
let counters: pg.Pool | undefined;

/** The license server's pool, its schema migrated once per container; settings read when not given. */
export function licenseDatabase(given?: LicenseServerConfig): Promise<pg.Pool> {
  ready ??= (async () => {
    const config = given ?? (await loadLicenseServerConfig());
    const pool = new pg.Pool({
      connectionString: config.LICENSE_SERVER_DATABASE_URL,
      max: config.LICENSE_SERVER_DB_POOL_MAX,
      connectionTimeoutMillis: 5_000,
      application_name: 'dbadmin-license-server',
    });
    logLostConnections(pool);
    await withClient(pool, (client) => migrate(client, STORE_MIGRATIONS, STORE_TARGET));
    return pool;
  })().catch((error: unknown) => {
    ready = undefined;
    throw error;
  });
  return ready;
}

/**
 * A second, small pool for the rate-limit counters, whose commits do not wait for the disk
 * (`synchronous_commit = off`): a crash may forget the last fraction of a second of counts, which
 * costs nothing, and each request no longer pays two WAL flushes. Licenses and activations stay on
 * the durable pool. Used after licenseDatabase(), which made the table.
 */
export function licenseCounters(config: LicenseServerConfig): pg.Pool {
  if (!counters) {
    counters = new pg.Pool({
      connectionString: config.LICENSE_SERVER_DATABASE_URL,
      max: 2,
      connectionTimeoutMillis: 5_000,
      application_name: 'dbadmin-license-server-limits',
      options: '-c synchronous_commit=off',
    });
    logLostConnections(counters);
  }
  return counters;
}

export async function closeLicenseDatabase(): Promise<void> {
  const closing = ready;
  const closingCounters = counters;
  ready = undefined;
  counters = undefined;
  await Promise.all([(await closing?.catch(() => undefined))?.end(), closingCounters?.end()]);
}
