import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type Host, startHost } from '#test/support/host';
import { ADMIN, basic } from '#test/support/http';
import { licenseTestDatabase } from '#test/support/license-db';
import { buildProduction } from '../../bin/build';

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
let host: Host | undefined;

beforeAll(async () => {
  database = await licenseTestDatabase();
  await buildProduction({ dir: BUILT, functions: {} });
  workDir = mkdtempSync(join(tmpdir(), 'dbadmin-start-here-'));
  const { LICENSE_DATA_DIR: _default, ...env } = process.env;
  host = await startHost(
    { ...env, DATABASE_URL: database.url, DBADMIN_DATA_DIR: join(workDir, '.data') },
    BUILT,
    { cwd: workDir },
  );
});

afterAll(async () => {
  await host?.stop();
  await database?.drop();
  rmSync(BUILT, { recursive: true, force: true });
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

it('keeps the license data under the directory the host was started in, as the CLI and the startup activation do', async () => {
  const status = await fetch(`${host?.base}/api/license/status`, {
    headers: { authorization: basic(ADMIN) },
  });
  expect(status.status).toBe(200);

  const where = {
    startedIn: existsSync(join(workDir, 'license-data', 'machine-id.json')),
    insideTheBuild: existsSync(join(BUILT, 'license-data', 'machine-id.json')),
  };

  expect(where).toEqual({ startedIn: true, insideTheBuild: false });
});
