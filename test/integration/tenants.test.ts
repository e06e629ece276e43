import type pg from 'pg';
import { handler as query } from '#functions/query';
import { handler as tenants } from '#functions/tenants';
import { flushKeyUse } from '#lib/admin/keys';
import { closePool, getDatabase, RESET_SESSION } from '#lib/db/pool';
import { asTenant, createKey, loginAs, sqlAs, tenantSchema } from '#test/security/tenant';
import { call } from '#test/support/http';
import { sessionIdentity } from '#test/support/sessions';

/**
 * The operator's view of the tenants, with several of them at work at once: the list side by side,
 * one tenant's sessions (statement, wait, locks, who it blocks), cancelling a statement and ending
 * a login, and what may never be ended.
 */
afterAll(closePool);

let busy: string;
let quiet: string;
const clients: pg.Client[] = [];
beforeAll(async () => {
  busy = await tenantSchema('busy');
  quiet = await tenantSchema('quiet');
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
});

/** A login of the tenant's own (`<schema>_user`), as the tenant would open one from psql. */
async function login(schema: string): Promise<pg.Client> {
  const client = loginAs(`${schema}_user`, 'schema-pass-1');
  client.on('error', () => undefined);
  await client.connect();
  clients.push(client);
  return client;
}

const list = async (sort = 'size') =>
  (await call(tenants, { path: '/api/tenants', query: { sort } })).body.tenants as {
    schema: string;
    tables: number;
    connections: number;
    active: number;
  }[];
const describe_ = (schema: string) => call(tenants, { path: `/api/tenants/${schema}` });
/** Stops the session as the page would: named by pid and its start (and its statement's, to cancel). */
const stop = async (schema: string, pid: number, how: 'cancel' | 'terminate') =>
  call(tenants, {
    method: 'POST',
    path: `/api/tenants/${schema}/sessions/${pid}/${how}`,
    body: await sessionIdentity(pid, how),
  });

/** Polls until `check` holds (a backend's state lands a moment after its statement starts). */
async function until<T>(read: () => Promise<T>, check: (value: T) => boolean): Promise<T> {
  for (let tries = 0; tries < 500; tries++) {
    const value = await read();
    if (check(value)) return value;
    await new Promise((r) => setImmediate(r));
  }
  return read();
}

interface Session {
  pid: number;
  role: string;
  state: string;
  query: string | null;
  poolReset: boolean;
  querySeconds: number | null;
  wait: string | null;
  blockedBy: number[];
  locks: { mode: string; relation: string }[];
}

describe('tenants at work', () => {
  it('lists every tenant side by side, and shows one’s statements, locks, waits and who it blocks', async () => {
    const holder = await login(busy);
    await holder.query('BEGIN');
    await holder.query(`LOCK TABLE "${busy}".items IN ACCESS EXCLUSIVE MODE`);
    const waiter = await login(busy);
    const waiting = waiter.query(`SELECT count(*) FROM "${busy}".items`).catch((e: Error) => e);
    const sleeper = await login(busy);
    const sleeping = sleeper.query('SELECT pg_sleep(30) AS slept').catch((e: Error) => e);

    const shown = await until(
      async () => (await describe_(busy)).body,
      (b) => (b.sessions as Session[]).some((s) => s.query?.includes('pg_sleep') && s.state === 'active'),
    );
    const sessions = shown.sessions as Session[];
    const sleeps = sessions.find((s) => s.query?.includes('pg_sleep')) as Session;
    const holds = sessions.find((s) => s.locks.some((l) => l.mode === 'AccessExclusiveLock')) as Session;
    const waits = sessions.find((s) => s.query?.includes('count(*)')) as Session;
    const all = await list('connections');
    const mine = all.filter((t) => t.schema === busy || t.schema === quiet);

    // Its three logins; the service's own pooled session of the schema's exec role may be there too.
    expect(shown).toMatchObject({ schema: busy, tables: 2 });
    expect(sessions.filter((s) => s.role === `${busy}_user`)).toHaveLength(3);
    expect(sleeps).toMatchObject({ role: `${busy}_user`, state: 'active', wait: 'Timeout: PgSleep' });
    expect(holds.locks).toContainEqual({ mode: 'AccessExclusiveLock', relation: `${busy}.items` });
    expect(holds.state).toBe('idle in transaction');
    expect(waits.blockedBy).toEqual([holds.pid]);
    expect(mine.map((t) => t.schema)).toEqual([busy, quiet]);
    expect(mine[0]?.connections).toBeGreaterThanOrEqual(3);
    expect(mine[0]?.active).toBe(2);
    expect(mine[1]).toMatchObject({ active: 0, tables: 2 });

    const cancelled = await stop(busy, sleeps.pid, 'cancel');
    const ended = await stop(busy, holds.pid, 'terminate');

    expect(cancelled.body).toEqual({
      success: true,
      message: `cancelled the statement of session ${sleeps.pid} (${busy}_user)`,
    });
    expect(String(await sleeping)).toMatch(/canceling statement due to user request/);
    expect(ended.status).toBe(200);
    expect(await waiting).toMatchObject({ rows: [{ count: 1 }] });
    await until(
      async () => ((await describe_(busy)).body.sessions as Session[]).map((s) => s.pid),
      (pids) => !pids.includes(holds.pid),
    );
  });

  it('cancels a key’s statement run by the service, but never ends the service’s own session', async () => {
    const key = await createKey(quiet, 'service_role', 'slow');
    const slow = sqlAs(key.key, 'SELECT pg_sleep(30)');
    const running = await until(
      async () =>
        ((await describe_(quiet)).body.sessions as Session[]).find((s) => s.query?.includes('pg_sleep')),
      (s) => s !== undefined && s.state === 'active',
    );
    const session = running as Session;

    const terminate = await stop(quiet, session.pid, 'terminate');
    const cancel = await stop(quiet, session.pid, 'cancel');

    expect(session.role).toBe(`${quiet}_svc`);
    expect(terminate.status).toBe(403);
    expect(terminate.body.message).toMatch(/is the service's own .*cancel its statement instead/);
    expect(cancel.status).toBe(200);
    const answered = await slow;
    expect(answered.status).toBe(400);
    expect(answered.body.message).toMatch(/cancel/i);
    await sqlAs(key.key, 'SELECT 1');
    await sqlAs(key.key, 'SELECT 2');
    await flushKeyUse(await getDatabase());
    const keys = (await describe_(quiet)).body.keys as {
      name: string;
      lastUsedAt: string | null;
      requests: number;
    }[];
    // The slow statement and the two after it.
    expect(keys.find((k) => k.name === 'slow')).toMatchObject({
      lastUsedAt: expect.any(String),
      requests: 3,
    });
  });

  it('shows the service’s pooled session at rest as the pool’s reset, not as a statement of the tenant', async () => {
    const key = await createKey(quiet, 'service_role', 'resting');
    expect((await sqlAs(key.key, 'SELECT 41 + 1 AS answer')).status).toBe(200);

    const sessions = (await describe_(quiet)).body.sessions as Session[];

    // The session that answered went back to the pool after the reset (CLOSE ALL; ...).
    const resting = sessions.filter((s) => s.role === `${quiet}_svc` && s.state === 'idle');
    expect(resting.length).toBeGreaterThan(0);
    for (const session of resting) expect([session.query, session.poolReset]).toEqual([null, true]);
    expect(sessions.some((s) => s.query?.includes('CLOSE ALL'))).toBe(false);
  });

  it('shows a tenant’s own login’s last statement, even one that reads like the pool’s reset', async () => {
    const own = await login(quiet);
    const pid = (await own.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    await own.query(RESET_SESSION);

    const session = ((await describe_(quiet)).body.sessions as Session[]).find((s) => s.pid === pid);

    expect(session).toMatchObject({ role: `${quiet}_user`, state: 'idle', poolReset: false });
    expect(session?.query).toMatch(/^CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT/);
  });

  it('names a session by its start: a stale statement is not cancelled in place of the one running', async () => {
    const sleeper = await login(quiet);
    const sleeping = sleeper.query('SELECT pg_sleep(30)').catch((e: Error) => e);
    const pid = (
      await until(
        async () =>
          ((await describe_(quiet)).body.sessions as Session[]).find((s) =>
            s.query?.includes('pg_sleep(30)'),
          ),
        (s) => s?.state === 'active',
      )
    )?.pid as number;
    const shown = await sessionIdentity(pid, 'cancel');
    const path = `/api/tenants/${quiet}/sessions/${pid}/cancel`;

    const stale = await call(tenants, {
      method: 'POST',
      path,
      body: { ...shown, queryStart: '2000-01-01 00:00:00+00' },
    });
    const reused = await call(tenants, {
      method: 'POST',
      path,
      body: { backendStart: '2000-01-01 00:00:00+00' },
    });
    const current = await call(tenants, { method: 'POST', path, body: shown });

    expect([stale.status, reused.status, current.status]).toEqual([404, 404, 200]);
    expect(String(await sleeping)).toMatch(/canceling statement/);
  });

  it('counts a partitioned table once and its rows once, and lists only schemas the API can name', async () => {
    await asTenant(
      quiet,
      `CREATE TABLE "${quiet}".parts (id int, at date) PARTITION BY RANGE (at);
       CREATE TABLE "${quiet}".parts_a PARTITION OF "${quiet}".parts FOR VALUES FROM ('2000-01-01') TO ('2010-01-01');
       CREATE TABLE "${quiet}".parts_b PARTITION OF "${quiet}".parts FOR VALUES FROM ('2010-01-01') TO ('2030-01-01');
       INSERT INTO "${quiet}".parts SELECT g, DATE '2000-01-01' + g FROM generate_series(1, 1000) g;
       ANALYZE "${quiet}".parts;`,
    );
    await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { runAs: 'admin', sql: 'CREATE SCHEMA IF NOT EXISTS "Odd-Name"' },
    });

    const figures = (await describe_(quiet)).body;
    const schemas = (await list('name')).map((t) => t.schema);

    expect(figures).toMatchObject({ tables: 3 });
    expect(figures.estimatedRows).toBeGreaterThanOrEqual(1000);
    expect(figures.estimatedRows).toBeLessThan(1010);
    expect(schemas).not.toContain('Odd-Name');
  });

  it('answers 404 for a session not of the schema’s roles, and for a schema that is not there', async () => {
    const other = await login(busy);
    const pid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid as number;
    const service = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { runAs: 'admin', sql: 'SELECT pg_backend_pid() AS pid' },
    });

    expect((await stop(quiet, pid, 'terminate')).status).toBe(404);
    expect((await stop(quiet, service.body.rows[0].pid, 'cancel')).status).toBe(404);
    expect((await stop(quiet, 999_999, 'cancel')).status).toBe(404);
    expect((await describe_('no_such_schema')).status).toBe(404);
    expect((await describe_('_dbadmin')).status).toBe(400);
    await asTenant(busy, 'SELECT 1');
  });
});
