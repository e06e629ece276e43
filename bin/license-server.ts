/**
 * Local license server: `npm run license-server`. HTTPS on LICENSE_SERVER_PORT (default 3443) with a
 * development CA and certificate made on first start in LICENSE_SERVER_TLS_DIR (existing files are
 * used as they are), on LICENSE_SERVER_DATABASE_URL or an embedded PostgreSQL under .data/.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { makeDevelopmentTls } from '../license-server/lib/dev-tls';
import { startEmbeddedPostgres } from './embedded-postgres';
import { serveFromChild } from './offline';

const dataDir = resolve(process.env.DBADMIN_DATA_DIR ?? '.data');
const tlsDir = resolve(process.env.LICENSE_SERVER_TLS_DIR ?? join(dataDir, 'license-server-tls'));
const port = process.env.LICENSE_SERVER_PORT ?? '3443';

/** A CA and a localhost certificate it signs, made once; kept files win. */
async function developmentTls(): Promise<void> {
  const [ca, cert, key] = ['ca.pem', 'cert.pem', 'key.pem'].map((name) => join(tlsDir, name)) as [
    string,
    string,
    string,
  ];
  if (existsSync(cert) && existsSync(key)) return;
  mkdirSync(tlsDir, { recursive: true });
  const tls = await makeDevelopmentTls();
  writeFileSync(ca, tls.ca);
  writeFileSync(cert, tls.cert);
  writeFileSync(key, tls.key, { mode: 0o600 });
}

async function database(): Promise<{ url: string; stopNow?: () => void }> {
  if (process.env.LICENSE_SERVER_DATABASE_URL) return { url: process.env.LICENSE_SERVER_DATABASE_URL };
  const secretFile = join(dataDir, 'license-server-postgres.secret');
  if (!existsSync(secretFile)) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(secretFile, randomBytes(24).toString('base64url'), { mode: 0o600 });
  }
  return startEmbeddedPostgres({
    dataDir: join(dataDir, 'license-server-postgres'),
    password: readFileSync(secretFile, 'utf8').trim(),
    persistent: true,
  });
}

async function main(): Promise<void> {
  await developmentTls();
  const db = await database();
  console.log(`license-server: https://localhost:${port}`);
  console.log(`license-server: give the service its CA: LICENSE_SERVER_CA_FILE=${join(tlsDir, 'ca.pem')}`);
  if (db.stopNow)
    console.log(
      `license-server: issue keys with: LICENSE_SERVER_DATABASE_URL='${db.url}' npx license-admin issue --email ...`,
    );
  serveFromChild({
    port,
    host: process.env.HOST ?? '127.0.0.1',
    env: { ...process.env, LICENSE_SERVER_DATABASE_URL: db.url },
    cwd: resolve('license-server'),
    options: ['--httpsProtocol', tlsDir],
    cleanup: () => db.stopNow?.(),
  });
}

main().catch((error: unknown) => {
  console.error(`license-server: failed to start: ${(error as Error).message}`);
  process.exit(1);
});
