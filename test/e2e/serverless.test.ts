import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { routes as auditRoutes } from '#functions/audit';
import { routes as consoleRoutes } from '#functions/console';
import { routes as constraintRoutes } from '#functions/constraints';
import { routes as healthRoutes } from '#functions/health';
import { routes as importRoutes } from '#functions/imports';
import { routes as indexRoutes } from '#functions/indexes';
import { routes as keyRoutes } from '#functions/keys';
import { routes as licenseRoutes } from '#functions/license';
import { routes as metaRoutes } from '#functions/meta';
import { routes as metricsRoutes } from '#functions/metrics';
import { routes as peopleRoutes } from '#functions/people';
import { routes as queryRoutes } from '#functions/query';
import { routes as rowRoutes } from '#functions/rows';
import { routes as schemaRoutes } from '#functions/schemas';
import { routes as tableRoutes } from '#functions/tables';
import { routes as tenantRoutes } from '#functions/tenants';
import { OPTIONAL_SECRET_SETTINGS, SECRET_SETTINGS, SETTING_NAMES } from '#lib/config';
import { type Host, startHost } from '#test/support/host';
import { basic } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { buildProduction } from '../../bin/build';
import { serverDataDir } from '../../bin/postgres-reach';

// One file, run in order: packaging and serverless-offline both build into .esbuild/.
jest.setTimeout(180_000);

const SERVERLESS = require.resolve('serverless/bin/serverless.js');
const byFunction = {
  console: consoleRoutes,
  health: healthRoutes,
  schemas: schemaRoutes,
  tables: tableRoutes,
  constraints: constraintRoutes,
  indexes: indexRoutes,
  rows: rowRoutes,
  imports: importRoutes,
  query: queryRoutes,
  keys: keyRoutes,
  tenants: tenantRoutes,
  audit: auditRoutes,
  people: peopleRoutes,
  metrics: metricsRoutes,
  license: licenseRoutes,
  meta: metaRoutes,
};

describe('serverless package', () => {
  const out = mkdtempSync(join(tmpdir(), 'dbadmin-package-'));
  let template: { Resources: Record<string, { Type: string; Properties: any }> };

  beforeAll(async () => {
    await promisify(execFile)(process.execPath, [SERVERLESS, 'package', '--package', out], {
      env: { ...process.env, AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '', AWS_PROFILE: 'none' },
    });
    template = JSON.parse(readFileSync(join(out, 'cloudformation-template-update-stack.json'), 'utf8'));
  });

  it('builds one bundled artifact under 1 MB per function, with no node_modules beside it', () => {
    const zips = readdirSync(out).filter((f) => f.endsWith('.zip'));

    // activateLicense and rotateSecret are invoked directly, with no HTTP route.
    expect(zips.sort()).toEqual(
      [...Object.keys(byFunction), 'activateLicense', 'rotateSecret'].map((name) => `${name}.zip`).sort(),
    );
    for (const zip of zips) expect(statSync(join(out, zip)).size).toBeLessThan(1024 * 1024);
  });

  it('wires exactly the routes each function serves, plus the 404/405 catch-all', () => {
    const routes = Object.values(template.Resources)
      .filter((r) => r.Type === 'AWS::ApiGatewayV2::Route')
      .map((r) => `${r.Properties.RouteKey} -> ${r.Properties.Target['Fn::Join'][1][1].Ref}`)
      .sort();

    const expected = Object.entries(byFunction).flatMap(([fn, list]) =>
      list.map(
        (route) => `${route.method} ${route.path} -> HttpApiIntegration${fn[0]?.toUpperCase()}${fn.slice(1)}`,
      ),
    );
    expect(routes).toEqual([...expected, '$default -> HttpApiIntegrationMeta'].sort());
  });

  it('targets the nodejs22.x runtime', () => {
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');

    expect(functions.map((f) => f.Properties.Runtime)).toEqual(functions.map(() => 'nodejs22.x'));
  });

  it('passes every setting but the secrets and the container’s own from the deploying shell', () => {
    const notOnLambda = new Set([
      ...SECRET_SETTINGS,
      ...OPTIONAL_SECRET_SETTINGS,
      'DATABASE_PASSWORD',
      'NODE_ENV',
      'LICENSE_DATA_DIR',
      'LICENSE_SERVER_CA_FILE',
      'OIDC_CA_FILE',
      'TRUSTED_PROXIES',
      'LICENSE_KEY',
      'LICENSE_EMAIL',
    ]);
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');

    for (const f of functions)
      expect(Object.keys(f.Properties.Environment.Variables)).toEqual(
        expect.arrayContaining(SETTING_NAMES.filter((name) => !notOnLambda.has(name))),
      );
  });

  it('logs in JSON on Lambda', () => {
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');

    for (const f of functions) expect(f.Properties.LoggingConfig).toMatchObject({ LogFormat: 'JSON' });
  });
});

const printedCredentials = (output: string) => {
  const match = /user (\S+) {2}password (\S+)/.exec(output);
  if (!match?.[1] || !match[2]) throw new Error(`no credentials printed:\n${output}`);
  return { user: match[1], pass: match[2] };
};

describe('npm start with no DATABASE_URL: embedded PostgreSQL under .data/', () => {
  const dataRoot = mkdtempSync(join(tmpdir(), 'dbadmin-start-'));
  // As root the embedded server runs as another user, which must reach the data directory.
  chmodSync(dataRoot, 0o755);
  const dataDir = join(dataRoot, '.data');
  const env: NodeJS.ProcessEnv = { ...process.env, DBADMIN_DATA_DIR: dataDir, LOG_LEVEL: 'INFO' };
  for (const name of ['DATABASE_URL', 'AUTH_USER', 'AUTH_PASS', 'DBADMIN_SECRET', 'NODE_ENV'] as const)
    delete env[name];

  let host: Host;
  let admin: { user: string; pass: string };
  const request = (path: string, init: RequestInit = {}) =>
    fetch(`${host.base}${path}`, { ...init, headers: { authorization: basic(admin), ...init.headers } });

  // What `npm start` runs: `npm run build`'s bundles, served by dist/bin/start.js in one process.
  const built = resolve('.e2e-build');
  beforeAll(() => buildProduction({ dir: built, functions: {} }));
  afterAll(async () => {
    await host?.stop();
    rmSync(built, { recursive: true, force: true });
  });

  it('generates credentials once, prints them, and keeps data across a restart', async () => {
    const name = uniqueName('kept');
    host = await startHost(env, built);
    admin = printedCredentials(host.output());
    const created = await request('/api/schema/create', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ schemaName: name, password: 'offline-pass-1' }),
    });
    expect(created.status).toBe(201);
    await host.stop();
    // Stopped with the host, cleanly: PostgreSQL removes postmaster.pid as its shutdown ends.
    expect(
      existsSync(
        join(
          serverDataDir(join(dataDir, 'postgres'), () => undefined),
          'postmaster.pid',
        ),
      ),
    ).toBe(false);

    host = await startHost(env, built);

    expect(printedCredentials(host.output())).toEqual(admin);
    expect(admin.pass.length).toBeGreaterThanOrEqual(32);
    expect(statSync(join(dataDir, 'secrets.json')).mode & 0o777).toBe(0o600);
    expect(await (await request('/api/schemas')).json()).toContain(name);
  });

  it('creates a table, inserts a row and exports it as a CSV download through the host', async () => {
    const post = (path: string, body: unknown) =>
      request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    const created = await post('/api/table/create', {
      tableName: 'notes',
      columns: [
        { name: 'id', type: 'SERIAL', primaryKey: true },
        { name: 'body', type: 'TEXT' },
      ],
    });
    const inserted = await post('/api/table/notes/row', { data: { body: 'hello, "world"' } });
    const csv = await request('/api/table/notes/export?format=csv');

    expect(created.status).toBe(201);
    expect(inserted.status).toBe(201);
    expect(csv.status).toBe(200);
    expect(csv.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(csv.headers.get('content-disposition')).toBe('attachment; filename="notes.csv"');
    expect(await csv.text()).toBe('id,body\n1,"hello, ""world"""\n');
  });

  it('runs the admin’s SQL in the one schema it names: the parser works inside the prebuilt bundle', async () => {
    const name = uniqueName('parsed');
    const post = (path: string, body: unknown) =>
      request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await post('/api/schema/create', { schemaName: name, password: 'offline-pass-1' })).status).toBe(
      201,
    );

    const reply = await post('/api/query', {
      sql: `CREATE TABLE ${name}.parsed (a int); SELECT count(*)::int AS n FROM ${name}.parsed`,
    });

    expect(reply.status).toBe(200);
    expect(await reply.json()).toMatchObject({ rows: [{ n: 0 }], schema: name });
  });

  it('serves health without credentials', async () => {
    const response = await fetch(`${host.base}/api/health`);

    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'ok', database: 'up' });
  });

  it('answers unknown paths and methods in the error format', async () => {
    const missing = await request('/api/nowhere');
    const wrongMethod = await request('/api/schemas', { method: 'PUT' });

    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: 'Not found' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET');
  });

  it('writes a JSON log line per request that the answer’s x-request-id finds', async () => {
    const response = await request('/api/tables');
    const requestId = response.headers.get('x-request-id');

    expect(response.status).toBe(200);
    expect(requestId).toMatch(/./);
    const lines = host
      .output()
      .split('\n')
      .filter((line) => line.includes(`"function_request_id":"${requestId}"`))
      .map((line) => JSON.parse(line.slice(line.indexOf('{'))));
    expect(lines).toEqual([
      expect.objectContaining({
        message: 'request',
        route: 'GET /api/tables',
        status: 200,
        principal: 'admin',
      }),
    ]);
  });

  it('answers 401 in the error format', async () => {
    const response = await fetch(`${host.base}/api/schemas`);

    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ error: 'Unauthorized', message: 'Authentication required' });
  });
});

/** `npm start`'s entry point run to its end: its exit code and what it printed on stderr. */
const startFailing = (env: NodeJS.ProcessEnv) =>
  promisify(execFile)(process.execPath, [require.resolve('tsx/cli'), 'bin/start.ts'], { env }).then(
    () => ({ code: 0, stderr: '' }),
    (error: { code: number; stderr: string }) => error,
  );

describe('npm start in production mode', () => {
  it('refuses to start without its settings, naming them in one line', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: 'production' };
    for (const name of ['DATABASE_URL', 'AUTH_USER', 'AUTH_PASS', 'DBADMIN_SECRET'] as const)
      delete env[name];

    const result = await startFailing(env);

    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toBe(
      'dbadmin: cannot start in production: missing settings: DATABASE_URL, AUTH_USER, AUTH_PASS, DBADMIN_SECRET',
    );
  });

  it('refuses to start with a malformed setting, naming it and not its value', async () => {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'production',
      DATABASE_URL: 'postgres://dbadmin:hunter2-secret@127.0.0.1:1/dbadmin?sslmode=prefer',
      AUTH_USER: 'admin',
      AUTH_PASS: 'admin-password',
      DBADMIN_SECRET: 'a'.repeat(32),
      QUERY_TIMEOUT_MS: 'soon',
    };

    const result = await startFailing(env);

    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toMatch(
      /^dbadmin: cannot start: invalid settings: DATABASE_URL \(sslmode=prefer/,
    );
    expect(result.stderr).toMatch(/QUERY_TIMEOUT_MS/);
    expect(result.stderr).not.toMatch(/hunter2/);
  });
});
