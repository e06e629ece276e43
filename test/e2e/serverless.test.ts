import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { routes as healthRoutes } from '#functions/health';
import { routes as metaRoutes } from '#functions/meta';
import { routes as schemaRoutes } from '#functions/schemas';
import { ADMIN, basic } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freePort } from '../../bin/free-port';

// One file, run in order: packaging and serverless-offline both build into .esbuild/.
jest.setTimeout(180_000);

const SERVERLESS = require.resolve('serverless/bin/serverless.js');
const byFunction = { health: healthRoutes, schemas: schemaRoutes, meta: metaRoutes };

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

    expect(zips.sort()).toEqual(
      Object.keys(byFunction)
        .map((name) => `${name}.zip`)
        .sort(),
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
});

describe('npm start (serverless-offline) against the test database', () => {
  let host: ChildProcess;
  let base: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    host = spawn(process.execPath, [require.resolve('tsx/cli'), 'bin/start.ts'], {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        ...{ AUTH_USER: ADMIN.user, AUTH_PASS: ADMIN.pass },
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let output = '';
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`offline did not start:\n${output}`)), 120_000);
      const watch = (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('Server ready')) {
          clearTimeout(timer);
          resolve();
        }
      };
      host.stdout?.on('data', watch);
      host.stderr?.on('data', watch);
      host.on('exit', (code) => reject(new Error(`offline exited with ${code}:\n${output}`)));
    });
  });

  afterAll(() => {
    if (host.pid) process.kill(-host.pid, 'SIGTERM');
  });

  const request = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, { ...init, headers: { authorization: basic(ADMIN), ...init.headers } });

  it('serves health without credentials', async () => {
    const response = await fetch(`${base}/api/health`);

    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'ok', database: 'up' });
  });

  it('creates, lists and deletes a schema through the HTTP host', async () => {
    const name = uniqueName('offline');

    const created = await request('/api/schema/create', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ schemaName: name, password: 'offline-pass-1' }),
    });
    const listed = await (await request('/api/schemas')).json();
    const deleted = await request(`/api/schema/${name}`, { method: 'DELETE' });

    expect(created.status).toBe(201);
    expect(listed).toContain(name);
    expect(deleted.status).toBe(200);
  });

  it('answers unknown paths and methods in the error format', async () => {
    const missing = await request('/api/nowhere');
    const wrongMethod = await request('/api/schemas', { method: 'PUT' });

    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: 'Not found' });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET');
  });

  it('answers 401 in the error format', async () => {
    const response = await fetch(`${base}/api/schemas`);

    expect(response.status).toBe(401);
    expect(await response.json()).toEqual({ error: 'Unauthorized', message: 'Authentication required' });
  });
});
