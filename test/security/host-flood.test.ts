import { rmSync } from 'node:fs';
import { type Host, startHost } from '#test/support/host';
import { ADMIN, basic } from '#test/support/http';
import { licenseTestDatabase } from '#test/support/license-db';

/**
 * A flood of parallel requests against the local host (npm start, the container). Anyone who can
 * reach the port can send one, credentials or not. It must be served by the pools the settings
 * size (DB_POOL_MAX per function), never by a new set of pools per request in flight, which
 * exhausts PostgreSQL's connections and the host's memory.
 */

jest.setTimeout(180_000);

const POOL_MAX = 3;
const PARALLEL = 60;
const BUILD_DIR = '.esbuild-flood';

let host: Host;
let database: Awaited<ReturnType<typeof licenseTestDatabase>>;
beforeAll(async () => {
  database = await licenseTestDatabase();
  host = await startHost({
    ...process.env,
    DATABASE_URL: database.url,
    DB_POOL_MAX: String(POOL_MAX),
    DBADMIN_BUILD_DIR: BUILD_DIR,
  });
});
afterAll(async () => {
  await host?.stop();
  await database?.drop();
  rmSync(BUILD_DIR, { recursive: true, force: true });
});

/** The host's connections to its database under one application name, counted by the server. */
async function hostConnections(applicationName: string): Promise<number> {
  const { rows } = await database.db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM pg_catalog.pg_stat_activity
      WHERE datname = pg_catalog.current_database() AND application_name = $1`,
    [applicationName],
  );
  return rows[0]?.count ?? 0;
}

/** The most connections seen under that name while `work` runs, sampled back to back. */
async function peakConnections(applicationName: string, work: Promise<number[]>) {
  let done = false;
  let peak = 0;
  const sampling = (async () => {
    while (!done) peak = Math.max(peak, await hostConnections(applicationName));
  })();
  const statuses = await work.finally(() => {
    done = true;
  });
  await sampling;
  return { statuses, peak: Math.max(peak, await hostConnections(applicationName)) };
}

async function post(path: string, body: unknown) {
  const response = await fetch(`${host.base}${path}`, {
    method: 'POST',
    headers: { authorization: basic(ADMIN), 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const flood = (path: string, authorization: string) =>
  Promise.all(
    Array.from({ length: PARALLEL }, () =>
      fetch(`${host.base}${path}`, { headers: { authorization } }).then((response) => response.status),
    ),
  );

describe('a flood of parallel requests', () => {
  it('is served by one bounded pool per function, whatever the number in flight', async () => {
    const signedIn = await peakConnections('dbadmin', flood('/api/tables', basic(ADMIN)));
    const guessing = await peakConnections(
      'dbadmin',
      flood('/api/tables', basic({ ...ADMIN, pass: 'a guess' })),
    );
    const statuses = [...signedIn.statuses, ...guessing.statuses];

    expect(new Set(statuses.slice(0, PARALLEL))).toEqual(new Set([200]));
    expect(statuses.slice(PARALLEL).every((status) => status === 401 || status === 429)).toBe(true);
    // One function was called: its one pool, at most POOL_MAX connections.
    expect(Math.max(signedIn.peak, guessing.peak)).toBeLessThanOrEqual(POOL_MAX);
  });

  it('with a key, is served by one pool of the schema’s role, made once', async () => {
    expect(
      (await post('/api/schema/create', { schemaName: 'flooded', password: 'long-enough-1' })).status,
    ).toBe(201);
    const key = await post('/api/project/flooded/keys', { keyName: 'reader' });
    expect(key.status).toBe(201);

    const { statuses, peak } = await peakConnections(
      'dbadmin-anon',
      flood('/api/tables', `Bearer ${key.body.key}`),
    );

    expect(new Set(statuses)).toEqual(new Set([200]));
    expect(peak).toBeLessThanOrEqual(POOL_MAX);
  });
});
