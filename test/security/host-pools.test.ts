import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Host, startHost } from '#test/support/host';
import { ADMIN, basic } from '#test/support/http';
import { licenseTestDatabase } from '#test/support/license-db';
import { buildProduction } from '../../bin/build';

/**
 * The local host (npm start, the container) now runs every request of a function in one process
 * (serverless-offline --useInProcess), so that function's pools serve all requests in flight. Its
 * pools are still sized as if each served one request at a time (lib/config `container` is true
 * under serverless-offline: a schema role's pool and the runAs-admin pool hold ONE connection):
 * one slow statement holds a role's only connection, and every other request of that role waits
 * DB_CONNECT_TIMEOUT_MS, then gets 503. A single caller of a schema's anon key can so take that
 * schema's API down for everyone for as long as the statement timeout allows.
 */

jest.setTimeout(180_000);

const BUILT = resolve('.host-pools-build');

let host: Host;
let database: Awaited<ReturnType<typeof licenseTestDatabase>>;
beforeAll(async () => {
  database = await licenseTestDatabase();
  await buildProduction({ dir: BUILT, functions: {} });
  // The defaults, as `npm start` and the container run: no DB_POOL_MAX.
  const { DB_POOL_MAX: _unset, ...env } = process.env;
  host = await startHost({ ...env, DATABASE_URL: database.url }, BUILT);
});
afterAll(async () => {
  await host?.stop();
  await database?.drop();
  rmSync(BUILT, { recursive: true, force: true });
});

async function post(path: string, body: unknown, authorization = basic(ADMIN)) {
  const started = Date.now();
  const response = await fetch(`${host.base}${path}`, {
    method: 'POST',
    headers: { authorization, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
    ms: Date.now() - started,
  };
}

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

describe('one slow request on the local host', () => {
  beforeAll(async () => {
    expect(
      (await post('/api/schema/create', { schemaName: 'starved', password: 'long-enough-1' })).status,
    ).toBe(201);
  });

  it('does not make an anon key’s other callers wait for its one connection and fail', async () => {
    const key = await post('/api/project/starved/keys', { keyName: 'public-reader' });
    expect(key.status).toBe(201);
    const bearer = `Bearer ${key.body.key}`;
    // The role's pool exists and is warm before the slow statement takes its connection.
    expect((await post('/api/query', { sql: 'SELECT 1' }, bearer)).status).toBe(200);

    const slow = post('/api/query', { sql: 'SELECT pg_catalog.pg_sleep(9)' }, bearer);
    await pause(1_000);
    const other = await post('/api/query', { sql: 'SELECT 1 AS one' }, bearer);

    expect({ status: other.status, body: other.body }).toMatchObject({
      status: 200,
      body: { rows: [{ one: 1 }] },
    });
    expect((await slow).status).toBe(200);
  });

  it('does not make the admin’s other requests in the schema wait and fail', async () => {
    expect((await post('/api/query', { sql: 'SELECT 1', schema: 'starved' })).status).toBe(200);

    const slow = post('/api/query', { sql: 'SELECT pg_catalog.pg_sleep(9)', schema: 'starved' });
    await pause(1_000);
    const other = await post('/api/query', { sql: 'SELECT 1 AS one', schema: 'starved' });

    expect({ status: other.status, body: other.body }).toMatchObject({
      status: 200,
      body: { rows: [{ one: 1 }] },
    });
    expect((await slow).status).toBe(200);
  });
});
