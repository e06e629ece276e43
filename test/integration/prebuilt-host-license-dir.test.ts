import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ADMIN, basic } from '#test/support/http';
import { licenseTestDatabase } from '#test/support/license-db';
import { buildProduction } from '../../bin/build';
import { freePort } from '../../bin/free-port';

/**
 * `npm start` now runs the prebuilt host (dist/bin/start.js), which loads serverless-offline in
 * its own process and, to do so, changes the process's working directory to dist/. LICENSE_DATA_DIR
 * defaults to the relative `license-data` ("./license-data locally"): the startup activation
 * (LICENSE_KEY, before the chdir) and `npx activate-license` use <where you started>/license-data,
 * the functions <dist>/license-data, which the next `npm start` (npm run build) deletes.
 */

jest.setTimeout(180_000);

const BUILT = resolve('.license-dir-build');

let database: Awaited<ReturnType<typeof licenseTestDatabase>>;
let workDir: string;
let stop: (() => Promise<void>) | undefined;
let base: string;

beforeAll(async () => {
  database = await licenseTestDatabase();
  await buildProduction({ dir: BUILT, functions: {} });
  workDir = mkdtempSync(join(tmpdir(), 'dbadmin-start-here-'));
  const { LICENSE_DATA_DIR: _default, ...env } = process.env;
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [join(BUILT, 'bin', 'start.js')], {
    cwd: workDir,
    env: {
      ...env,
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: database.url,
      DBADMIN_DATA_DIR: join(workDir, '.data'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const exited = new Promise<void>((done) => child.on('exit', () => done()));
  stop = async () => {
    if (child.pid) process.kill(child.pid, 'SIGTERM');
    await exited;
  };
  let output = '';
  await new Promise<void>((ready, fail) => {
    const watch = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Server ready')) ready();
    };
    child.stdout?.on('data', watch);
    child.stderr?.on('data', watch);
    child.on('exit', (code) => fail(new Error(`host exited with ${code}:\n${output}`)));
  });
});

afterAll(async () => {
  await stop?.();
  await database?.drop();
  rmSync(BUILT, { recursive: true, force: true });
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

it('keeps the license data under the directory the host was started in, as the CLI and the startup activation do', async () => {
  const status = await fetch(`${base}/api/license/status`, { headers: { authorization: basic(ADMIN) } });
  expect(status.status).toBe(200);

  const where = {
    startedIn: existsSync(join(workDir, 'license-data', 'machine-id.json')),
    insideTheBuild: existsSync(join(BUILT, 'license-data', 'machine-id.json')),
  };

  expect(where).toEqual({ startedIn: true, insideTheBuild: false });
});
