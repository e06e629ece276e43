import pg from 'pg';
import { migrate } from '#lib/db/migrations';
import { withClient } from '#lib/db/pool';
import { parseLicenseServerConfig } from './config';
import { STORE_MIGRATIONS, STORE_TARGET } from './store';

let ready: Promise<pg.Pool> | undefined;

/** The license server's pool, its schema migrated once per container. */
export function licenseDatabase(env: Record<string, string | undefined> = process.env): Promise<pg.Pool> {
  ready ??= (async () => {
    const config = parseLicenseServerConfig(env);
    const pool = new pg.Pool({
      connectionString: config.LICENSE_SERVER_DATABASE_URL,
      max: config.LICENSE_SERVER_DB_POOL_MAX,
      connectionTimeoutMillis: 5_000,
      application_name: 'dbadmin-license-server',
    });
    pool.on('error', (error) =>
      console.warn(`license-server: idle database connection lost: ${error.message}`),
    );
    await withClient(pool, (client) => migrate(client, STORE_MIGRATIONS, STORE_TARGET));
    return pool;
  })().catch((error: unknown) => {
    ready = undefined;
    throw error;
  });
  return ready;
}

export async function closeLicenseDatabase(): Promise<void> {
  const closing = ready;
  ready = undefined;
  await (await closing?.catch(() => undefined))?.end();
}
