import { startTemporaryPostgres } from '../../bin/embedded-postgres';

/**
 * A real PostgreSQL for the whole run: DATABASE_URL when set, otherwise an embedded one in a
 * temporary directory. Workers inherit the URL through the environment.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) return;
  const database = await startTemporaryPostgres('test');
  process.env.DATABASE_URL = database.url;
  (globalThis as { __dbadminStopDatabase?: () => Promise<void> }).__dbadminStopDatabase = database.stop;
}
