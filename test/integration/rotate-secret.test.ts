import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { handler as query } from '#functions/query';
import { handler as rotateFunction } from '#functions/rotate-secret';
import { handler as tables } from '#functions/tables';
import { rotateSecret } from '#lib/admin/rotate-secret';
import { resetConfig } from '#lib/config';
import { closePool, getDatabase } from '#lib/db/pool';
import { rolePassword } from '#lib/db/role-names';
import { fileKeys, loadLicenseFile, saveLicenseFile } from '#lib/license/license-file';
import { HOUR } from '#lib/license/state';
import { bearer, createKey, loginAs, tenantSchema } from '#test/security/tenant';
import { call, lambdaContext } from '#test/support/http';
import { licenseTestDatabase } from '#test/support/license-db';
import { paidLicenseFile } from '#test/support/license-file';
import { LicensingHarness, randomMachineId } from '#test/support/licensing';
import { localSecrets, recordRuntime } from '../../bin/local';

/**
 * Rotating DBADMIN_SECRET through the library, the CLI and the invoked function, against a
 * database of its own (rotation touches every schema in it) and the real license server.
 */
jest.setTimeout(60_000);

const OLD = process.env.DBADMIN_SECRET as string;
const secretNo = (n: number) => `rotation-${n}-secret-0123456789abcdef0123456789abcdef`;
const sharedUrl = process.env.DATABASE_URL;
const h = new LicensingHarness();
let database: Awaited<ReturnType<typeof licenseTestDatabase>>;
/** The secret this process runs with, and that every role's password was last derived from. */
let current = OLD;

beforeAll(async () => {
  database = await licenseTestDatabase();
  // Roles are the cluster's: `public_exec` and its kin serve every database's public schema, and
  // other test files use them. This database's public goes, so rotations here touch only its own.
  await database.db.query('DROP SCHEMA public CASCADE');
  process.env.DATABASE_URL = database.url;
  resetConfig();
  await h.start();
});
afterAll(async () => {
  await h.close();
  await closePool();
  process.env.DATABASE_URL = sharedUrl;
  process.env.DBADMIN_SECRET = OLD;
  resetConfig();
  await database.drop();
});

/** This process now runs with `secret`, as a service restarted with it would: nothing kept. */
async function runWith(secret: string): Promise<void> {
  process.env.DBADMIN_SECRET = secret;
  resetConfig();
  await closePool();
  current = secret;
}

const emptyDir = () => mkdtempSync(join(tmpdir(), 'dbadmin-rotate-'));

async function logsIn(role: string, secret: string): Promise<boolean> {
  const client = loginAs(role, rolePassword(secret, role));
  return client.connect().then(
    async () => {
      await client.end();
      return true;
    },
    () => false,
  );
}

/** A schema with a table `items`, whose exec, svc and anon roles can all log in. */
async function keyedSchema(prefix: string) {
  const schema = await tenantSchema(prefix);
  const service = await createKey(schema, 'service_role');
  const anon = await createKey(schema, 'anon');
  const roles = ['exec', 'svc', 'anon'].map((kind) => `${schema}_${kind}`);
  return { schema, service: service.key, anon: anon.key, roles };
}

/** A license file for a fresh machine id, written under `secret`; answers its directory. */
async function licenseFileUnder(secret: string): Promise<string> {
  const dir = emptyDir();
  const machineId = randomMachineId();
  writeFileSync(
    join(dir, 'machine-id.json'),
    JSON.stringify({ machineId, createdAt: new Date().toISOString(), recovered: false }),
  );
  await saveLicenseFile(dir, fileKeys(secret, machineId), paidLicenseFile('DBA-ROTATION-TEST'));
  return dir;
}

const readItems = (key: string) => call(tables, { path: '/api/table/items', ...bearer(key) });

describe('rotateSecret', () => {
  it('derives every role anew: a process with the new secret logs in as each, keys keep working', async () => {
    const { schema, service, anon, roles } = await keyedSchema('rotkeys');
    const next = secretNo(1);

    const report = await rotateSecret(await getDatabase(), {
      secret: next,
      previousSecret: current,
      licenseDataDir: emptyDir(),
    });
    await runWith(next);

    expect(report.roles).toEqual(expect.arrayContaining(roles));
    expect(report).toMatchObject({ busy: [], closing: [], gone: [], licenseFile: 'absent' });
    // Straight after the rotation, before the service's code has run: no repair on a refused login.
    for (const role of roles) expect(await logsIn(role, next)).toBe(true);
    expect((await readItems(service)).status).toBe(200);
    expect((await readItems(anon)).status).toBe(200);
    const inserted = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: "INSERT INTO items (name) VALUES ('after rotation') RETURNING name" },
      ...bearer(service),
    });
    expect(inserted.body.rows).toEqual([{ name: 'after rotation' }]);
    expect((await call(tables, { path: '/api/table/items', query: { schema } })).status).toBe(200);
  });

  it('is harmless run twice: the same passwords, the license file left as the first run wrote it', async () => {
    const { service, roles } = await keyedSchema('rottwice');
    const dir = await licenseFileUnder(current);
    const next = secretNo(2);
    const rotate = () =>
      rotateSecret(database.db, { secret: next, previousSecret: current, licenseDataDir: dir });

    const first = await rotate();
    const second = await rotate();
    await runWith(next);

    expect(first.licenseFile).toBe('resealed');
    expect(second.licenseFile).toBe('current');
    expect(second.roles).toEqual(first.roles);
    for (const role of roles) expect(await logsIn(role, next)).toBe(true);
    expect((await readItems(service)).status).toBe(200);
  });

  it('changes nothing when the license file opens under neither secret', async () => {
    const { roles } = await keyedSchema('rotwrong');
    const dir = await licenseFileUnder(current);

    const attempt = rotateSecret(database.db, {
      secret: secretNo(3),
      previousSecret: secretNo(99),
      licenseDataDir: dir,
    });

    await expect(attempt).rejects.toMatchObject({ status: 400, message: expect.stringMatching(/neither/) });
    for (const role of roles) expect(await logsIn(role, current)).toBe(true);
  });

  it('reports a schema whose lock stays held as busy, rotates the others, and completes when run again', async () => {
    const held = await keyedSchema('rotheld');
    const free = await keyedSchema('rotfree');
    const next = secretNo(4);
    const rotate = () => rotateSecret(database.db, { secret: next, licenseDataDir: emptyDir() });
    const blocker = await database.db.connect();
    let first: Awaited<ReturnType<typeof rotate>>;
    try {
      // A change to the schema in flight elsewhere, longer than the rotation waits and retries.
      await blocker.query('BEGIN');
      await blocker.query('SELECT 1 FROM _dbadmin.schema_locks WHERE schema_name = $1 FOR UPDATE', [
        held.schema,
      ]);
      first = await rotate();
    } finally {
      await blocker.query('ROLLBACK');
      blocker.release();
    }
    const second = await rotate();
    await runWith(next);

    expect(first.busy).toEqual([held.schema]);
    expect(first.roles).toEqual(expect.arrayContaining(free.roles));
    expect(first.roles).not.toContain(held.roles[0]);
    expect(second.busy).toEqual([]);
    for (const role of [...held.roles, ...free.roles]) expect(await logsIn(role, next)).toBe(true);
  });

  it('refuses a previous secret that is the new one, or too short to have been one', async () => {
    const given = (previousSecret: string) =>
      rotateSecret(database.db, { secret: current, previousSecret, licenseDataDir: emptyDir() });

    await expect(given(current)).rejects.toMatchObject({
      status: 400,
      message: expect.stringMatching(/itself/),
    });
    await expect(given('short')).rejects.toMatchObject({ status: 400 });
  });
});

describe('the license across a rotation', () => {
  // The harness's deployments run with the process's secret, `current`, until told otherwise.
  const NEW = secretNo(10);

  it('without rotation: the file no longer opens, and the license lives on the cache row until grace ends', async () => {
    await h.activated();
    const dir = h.dataDir;

    await h.deploy({ dir, env: { DBADMIN_SECRET: NEW } });
    h.at(13 * HOUR);

    expect(await h.status()).toMatchObject({
      status: 'grace_period',
      warning: expect.stringMatching(/license file is gone/),
    });
  });

  it('stays active under the new secret, its key still decrypts, and it validates again later', async () => {
    const key = await h.activated();
    const dir = h.dataDir;
    const before = await h.status();

    const report = await rotateSecret(h.db, { secret: NEW, previousSecret: current, licenseDataDir: dir });
    const machineId = await (await h.deploy({ dir, env: { DBADMIN_SECRET: NEW } })).machineId();

    expect(report.licenseFile).toBe('resealed');
    expect((await loadLicenseFile(dir, fileKeys(NEW, machineId)))?.licenseKey).toBe(key);
    expect(await loadLicenseFile(dir, fileKeys(current, machineId))).toBeUndefined();
    expect(await h.status()).toEqual(before);
    h.at(13 * HOUR);
    expect(await h.status()).toMatchObject({ status: 'active', lastValidatedAt: h.now.toISOString() });
  });

  it('keeps a trial recorded in the file', async () => {
    await h.deploy();
    const dir = h.dataDir;
    await h.post('/api/trial/start', { email: 'trial@example.com' });
    const before = await h.status();

    const report = await rotateSecret(h.db, { secret: NEW, previousSecret: current, licenseDataDir: dir });
    await h.deploy({ dir, env: { DBADMIN_SECRET: NEW } });

    expect(report.licenseFile).toBe('resealed');
    expect(await h.status()).toEqual(before);
  });
});

describe('rotate-secret (CLI, in a child process)', () => {
  /** This process's settings, changed by `env` (undefined: left out). */
  const cli = (args: string[], env: NodeJS.ProcessEnv) => {
    const given = {
      ...process.env,
      DBADMIN_PREVIOUS_SECRET: undefined,
      DBADMIN_DATA_DIR: emptyDir(),
      ...env,
    };
    return promisify(execFile)(process.execPath, ['bin/rotate-secret.cjs', ...args], {
      env: Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined)),
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );
  };

  it('prints its usage with --help', async () => {
    const result = await cli(['--help'], {});

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^Usage: rotate-secret \[--previous-secret SECRET\]/);
  });

  it('refuses an unknown option with one line and its usage', async () => {
    const result = await cli(['--secret', 'x'], {});

    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')[0]).toMatch(/^rotate-secret: Unknown option '--secret'/);
  });

  it('says what to give when the license file needs the previous secret, and changes nothing', async () => {
    const { roles } = await keyedSchema('rotcli');
    const dir = await licenseFileUnder(current);

    const result = await cli([], { DBADMIN_SECRET: secretNo(20), LICENSE_DATA_DIR: dir });

    expect(result.code).toBe(2);
    expect(result.stderr.trim()).toMatch(
      /^rotate-secret: .*license\.json verifies under neither .* previous secret/,
    );
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    for (const role of roles) expect(await logsIn(role, current)).toBe(true);
  });

  it('rotates, re-signs the license file and says so in plain lines', async () => {
    const { roles } = await keyedSchema('rotclidone');
    const dir = await licenseFileUnder(current);
    const next = secretNo(21);

    const result = await cli([], {
      DBADMIN_SECRET: next,
      DBADMIN_PREVIOUS_SECRET: current,
      LICENSE_DATA_DIR: dir,
    });
    await runWith(next);

    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toMatch(
      /^Re-derived \d+ role passwords in \d+ schemas from the new DBADMIN_SECRET/,
    );
    expect(result.stdout).toMatch(/\nLicense file re-signed under the new secret/);
    for (const role of roles) expect(await logsIn(role, next)).toBe(true);
  });

  it('beside a local npm start, uses its generated secret and its running database', async () => {
    const dataDir = emptyDir();
    const local = localSecrets(dataDir);
    const forget = recordRuntime(dataDir, database.url);
    const { roles } = await keyedSchema('rotlocal');
    try {
      const result = await cli(['--previous-secret', current], {
        DATABASE_URL: undefined,
        DBADMIN_SECRET: undefined,
        NODE_ENV: 'development',
        DBADMIN_DATA_DIR: dataDir,
        LICENSE_DATA_DIR: emptyDir(),
      });
      await runWith(local.serviceSecret);

      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      for (const role of roles) expect(await logsIn(role, local.serviceSecret)).toBe(true);
    } finally {
      forget();
    }
  });
});

describe('functions/rotate-secret (invoked)', () => {
  it('rotates with the secret it reads at invocation, and reports what it did', async () => {
    const { roles } = await keyedSchema('rotfn');
    const next = secretNo(30);
    // Changed after this process read its settings, as in SSM before the invoke.
    process.env.DBADMIN_SECRET = next;

    const result = await rotateFunction({ previousSecret: current }, lambdaContext(), {} as never);
    await runWith(next);

    expect(result).toMatchObject({
      success: true,
      busy: [],
      licenseFile: 'absent',
      roles: expect.arrayContaining(roles),
    });
    for (const role of roles) expect(await logsIn(role, next)).toBe(true);
  });

  it('answers what is wrong with its input', async () => {
    const invoke = (event: unknown) => rotateFunction(event, lambdaContext(), {} as never);

    expect(await invoke({ previousSecret: 5 })).toMatchObject({
      success: false,
      message: expect.any(String),
    });
    expect(await invoke({ secret: 'x' })).toMatchObject({ success: false, message: expect.any(String) });
    expect(await invoke({ previousSecret: current })).toMatchObject({
      success: false,
      message: expect.stringMatching(/itself/),
    });
  });
});
