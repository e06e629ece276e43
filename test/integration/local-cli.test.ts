import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { TestLicenseServer } from '#test/support/license-server';
import { localSecrets, recordRuntime } from '../../bin/local';

/**
 * `npx activate-license` beside a local `npm start`: no DATABASE_URL or DBADMIN_SECRET in its
 * environment, only the generated secrets in DBADMIN_DATA_DIR, as a newcomer has.
 */
jest.setTimeout(120_000);

const server = new TestLicenseServer();
beforeAll(async () => {
  server.sign(false); // the CLI trusts only the compiled-in keys
  await server.start();
});
afterAll(() => server.close());

function cli(args: string[], dataDir: string) {
  const { DATABASE_URL: _url, DBADMIN_SECRET: _secret, ...env } = process.env;
  return promisify(execFile)(process.execPath, ['bin/activate-license.cjs', ...args, '-s', server.url], {
    env: {
      ...env,
      NODE_ENV: 'development',
      DBADMIN_DATA_DIR: dataDir,
      LICENSE_DATA_DIR: join(dataDir, 'license'),
      LICENSE_SERVER_CA_FILE: server.tls.caFile,
    },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
}

describe('activate-license beside a local npm start', () => {
  it('uses the running service’s database and the generated secret', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'dbadmin-local-'));
    localSecrets(dataDir);
    const forget = recordRuntime(dataDir, process.env.DATABASE_URL as string);
    try {
      const key = await server.issue('owner@example.com');
      const result = await cli(['-k', key, '-e', 'owner@example.com'], dataDir);

      expect(result.stderr).not.toMatch(/missing settings/);
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/License activated/);
    } finally {
      forget();
    }
  });

  it('starts the embedded PostgreSQL itself when the service is not running', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'dbadmin-local-'));
    localSecrets(dataDir);
    const key = await server.issue('owner@example.com');

    const result = await cli(['-k', key, '-e', 'owner@example.com'], dataDir);

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/License activated/);
  });
});
