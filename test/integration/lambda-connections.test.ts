import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * `serverless package` itself, offline and without credentials, refusing a deployment whose
 * functions could hold more database connections than DATABASE_MAX_CONNECTIONS: the check is a
 * hook of packaging (deploy/lambda-connections-plugin.cjs), so however packaging is started it runs.
 * It stops before anything is bundled, so each case takes seconds. The shipped configuration
 * packaging through is test/e2e/serverless.test.ts's.
 */
jest.setTimeout(60_000);

const SERVERLESS = require.resolve('serverless/bin/serverless.js');

interface Packaging {
  code: number;
  output: string;
}

/** `serverless package` into a directory of its own, with `settings` in its environment. */
function serverlessPackage(settings: Record<string, string>): Promise<Packaging> {
  const out = mkdtempSync(join(tmpdir(), 'dbadmin-connections-package-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    AWS_ACCESS_KEY_ID: '',
    AWS_SECRET_ACCESS_KEY: '',
    AWS_PROFILE: 'none',
  };
  for (const name of ['DB_PROCESS_CONNECTIONS', 'DATABASE_MAX_CONNECTIONS', 'DBADMIN_RESERVED_CONCURRENCY'])
    delete env[name];
  return new Promise((done) => {
    execFile(
      process.execPath,
      [SERVERLESS, 'package', '--package', out],
      { env: { ...env, ...settings } },
      (error, stdout, stderr) => {
        rmSync(out, { recursive: true, force: true });
        done({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}` });
      },
    );
  });
}

describe('serverless package', () => {
  it('stops when the shipped functions would pass DATABASE_MAX_CONNECTIONS, saying why in one line', async () => {
    const { code, output } = await serverlessPackage({ DATABASE_MAX_CONNECTIONS: '100' });

    expect(code).not.toBe(0);
    expect(output).toMatch(/^ {2}query +8 +4 +32$/m);
    expect(output).toMatch(
      /dbadmin: the functions may hold \d+ database connections, more than DATABASE_MAX_CONNECTIONS 100: lower reservedConcurrency .* or DB_PROCESS_CONNECTIONS, or move to a larger instance class/,
    );
    expect(output).not.toMatch(/Packaging .* done|Service packaged/i);
  });

  it('counts DB_PROCESS_CONNECTIONS from the packaging shell', async () => {
    const { code, output } = await serverlessPackage({
      DATABASE_MAX_CONNECTIONS: '395',
      DB_PROCESS_CONNECTIONS: '8',
    });

    expect(code).not.toBe(0);
    expect(output).toMatch(/^ {2}query +8 +8 +64$/m);
    expect(output).toMatch(/more than DATABASE_MAX_CONNECTIONS 395/);
  });

  it('counts the concurrency DBADMIN_RESERVED_CONCURRENCY sets, not the one serverless.yml gave', async () => {
    const { code, output } = await serverlessPackage({
      DATABASE_MAX_CONNECTIONS: '395',
      DBADMIN_RESERVED_CONCURRENCY: 'query=100',
    });

    expect(code).not.toBe(0);
    expect(output).toMatch(/^ {2}query +100 +4 +400$/m);
    expect(output).toMatch(/more than DATABASE_MAX_CONNECTIONS 395/);
  });
});
