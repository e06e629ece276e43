import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmbeddedPostgres } from '../../bin/embedded-postgres';

/**
 * A real PostgreSQL for the whole run: DATABASE_URL when set, otherwise an embedded one in a
 * temporary directory. Workers inherit the URL through the environment.
 */
export default async function globalSetup(): Promise<void> {
  if (process.env.DATABASE_URL) return;
  const dir = mkdtempSync(join(tmpdir(), 'dbadmin-test-'));
  // As root the server runs as another user, which must be able to reach its data directory.
  chmodSync(dir, 0o755);
  const database = await startEmbeddedPostgres({
    dataDir: join(dir, 'pg'),
    password: 'test-superuser-password',
    persistent: false,
  });
  process.env.DATABASE_URL = database.url;
  (globalThis as { __dbadminStopDatabase?: () => Promise<void> }).__dbadminStopDatabase = database.stop;
}
