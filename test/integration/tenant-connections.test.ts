import { handler as metrics } from '#functions/metrics';
import type { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { tenantSchema } from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { withSetting } from '#test/support/settings';

/**
 * Many tenants from one process: a schema's roles are prepared once per change of its roles, whatever
 * process asks; every tenant stays usable past any count of pools; the process never holds more
 * connections than its budget, and says Busy (503, Retry-After) when none comes free in time.
 */
/** Each process's pools close with the test file's, so no timer of theirs outlives it. */
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  await Promise.all(closers.map((close) => close()));
  await closePool();
});

type QueryHandler = typeof query;
const sql = (handler: QueryHandler, schema: string, text: string) =>
  call(handler, { method: 'POST', path: '/api/query', body: { sql: text, schema } });

/**
 * Another process: the same modules loaded afresh, with none of this one's pools or caches (the
 * role pools are the process's, kept on its global object: a new process starts without them).
 * `sameProcess`: another function's bundle in this process instead, sharing them.
 */
function anotherProcess(sameProcess = false): { query: QueryHandler; setups: () => number } {
  let loaded: { query: QueryHandler; setups: () => number } | undefined;
  if (!sameProcess) delete (globalThis as Record<symbol, unknown>)[Symbol.for('dbadmin.role-pools')];
  jest.isolateModules(() => {
    const executor = require('#lib/db/executor') as typeof import('#lib/db/executor');
    closers.push((require('#lib/db/pool') as typeof import('#lib/db/pool')).closePool);
    loaded = {
      query: (require('#functions/query') as typeof import('#functions/query')).handler,
      setups: () => Object.values(executor.roleSetups).reduce((a, b) => a + b, 0),
    };
  });
  return loaded as { query: QueryHandler; setups: () => number };
}

describe('role preparation', () => {
  it('runs once per schema and change of its roles, not once per process', async () => {
    const schema = await tenantSchema('gen');
    const processes = [anotherProcess(), anotherProcess(), anotherProcess()];

    for (const each of processes) expect((await sql(each.query, schema, 'SELECT 1 AS one')).status).toBe(200);

    // Schema creation prepared the admin's role: none of them had to.
    expect(processes.map((each) => each.setups())).toEqual([0, 0, 0]);
  });

  it('runs again, once, after the roles changed', async () => {
    const schema = await tenantSchema('genbump');
    await withAdminClient((c) =>
      c.query(`UPDATE _dbadmin.schema_locks SET prepared = '{}' WHERE schema_name = $1`, [schema]),
    );
    const [first, second] = [anotherProcess(), anotherProcess()];

    expect((await sql(first.query, schema, 'SELECT 1 AS one')).status).toBe(200);
    expect((await sql(second.query, schema, 'SELECT 1 AS one')).status).toBe(200);
    expect([first.setups(), second.setups()]).toEqual([1, 0]);
  });

  it('repairs a role whose login is refused, in the process that found it', async () => {
    const schema = await tenantSchema('genrepair');
    const one = anotherProcess();
    expect((await sql(one.query, schema, 'SELECT 1 AS one')).status).toBe(200);
    // The schema's own code changes the password of the role it runs as.
    expect(
      (await sql(one.query, schema, "SET ROLE NONE; ALTER ROLE CURRENT_USER PASSWORD 'changed-by-tenant'"))
        .status,
    ).toBe(200);
    const other = anotherProcess();

    const reply = await sql(other.query, schema, 'SELECT 1 AS one');

    expect(reply.status).toBe(200);
    expect(other.setups()).toBe(1);
  });
});

describe('more tenants than any pool count', () => {
  it('keeps each one warm: the second pass prepares nothing and stays within the budget', async () => {
    const schemas: string[] = [];
    for (let i = 0; i < 40; i++) schemas.push(await tenantSchema('warm'));
    const proc = anotherProcess();
    for (const schema of schemas) expect((await sql(proc.query, schema, 'SELECT 1 AS one')).status).toBe(200);
    const afterFirst = proc.setups();

    for (const schema of schemas) expect((await sql(proc.query, schema, 'SELECT 1 AS one')).status).toBe(200);

    expect(afterFirst).toBe(0);
    expect(proc.setups()).toBe(0);
  });
});

describe('a process out of connections', () => {
  // The service's pool takes 2; the schemas' sessions share the one left.
  withSetting('DB_POOL_MAX', '2');
  withSetting('DB_PROCESS_CONNECTIONS', '3');
  withSetting('DB_CONNECT_TIMEOUT_MS', '500');

  /** Holds the process's one session slot until `release`: a statement waiting on our lock. */
  async function holdTheSlot(schema: string, handler: QueryHandler) {
    const { Client } = await import('pg');
    const locker = new Client({ connectionString: directUrl() });
    await locker.connect();
    const key = Math.floor(Math.random() * 1e9);
    await locker.query('SELECT pg_advisory_lock($1)', [key]);
    const held = sql(handler, schema, `SELECT 1 AS one FROM pg_advisory_lock(${key})`);
    // Until the statement waits on the lock, its session is the one slot's.
    await withAdminClient(async (c) => {
      for (let tries = 0; tries < 2000; tries++) {
        const { rowCount } = await c.query(
          `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
          [`%pg_advisory_lock(${key})%`],
        );
        if (rowCount) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
      throw new Error('the holding statement never started');
    });
    return {
      held,
      release: async () => {
        await locker.query('SELECT pg_advisory_unlock_all()');
        await locker.end();
      },
    };
  }

  it('answers 503 Busy with Retry-After while every connection is in use, and counts it', async () => {
    const [busyOne, other] = [await tenantSchema('busy'), await tenantSchema('busy')];
    const proc = anotherProcess();
    const slot = await holdTheSlot(busyOne, proc.query);
    let refused: Awaited<ReturnType<typeof sql>>;
    try {
      refused = await sql(proc.query, other, 'SELECT 1 AS one');
    } finally {
      await slot.release();
    }
    const scrape = await call(metrics, { path: '/api/metrics' });

    expect((await slot.held).status).toBe(200);
    expect(refused.status).toBe(503);
    expect(refused.body.error).toBe('Service busy');
    expect(refused.body.message).toMatch(/in use.*retry/);
    expect(refused.headers['Retry-After'] ?? refused.headers['retry-after']).toBe('1');
    expect(scrape.text).toMatch(/^dbadmin_busy_total [1-9]/m);
  });

  it('gives an idle session of one tenant to the next tenant that needs it', async () => {
    const tenants = [await tenantSchema('share'), await tenantSchema('share'), await tenantSchema('share')];
    const proc = anotherProcess();

    const statuses = [];
    for (const schema of [...tenants, ...tenants])
      statuses.push((await sql(proc.query, schema, 'SELECT 1 AS one')).status);
    const open = await withAdminClient(async (c) =>
      Number(
        (
          await c.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE usename = ANY($1::text[])`, [
            tenants.map((schema) => `${schema}_exec`),
          ])
        ).rows[0].n,
      ),
    );

    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    expect(open).toBeLessThanOrEqual(1);
  });

  describe('with two sessions a role', () => {
    withSetting('DB_PROCESS_CONNECTIONS', '12');

    /** Statements that wait on our lock until `release`, each in a session of the schema's role. */
    async function holding(schema: string, handlers: QueryHandler[]) {
      const { Client } = await import('pg');
      const locker = new Client({ connectionString: directUrl() });
      await locker.connect();
      const key = Math.floor(Math.random() * 1e9);
      await locker.query('SELECT pg_advisory_lock($1)', [key]);
      const replies = handlers.map((handler) =>
        sql(handler, schema, `SELECT 1 AS one FROM pg_advisory_lock(${key})`),
      );
      return {
        replies,
        waiting: () =>
          withAdminClient(async (c) =>
            Number(
              (
                await c.query(
                  `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1`,
                  [`%pg_advisory_lock(${key})%`],
                )
              ).rows[0].n,
            ),
          ),
        release: async () => {
          await locker.query('SELECT pg_advisory_unlock_all()');
          await locker.end();
        },
      };
    }

    it('holds them across every function of the process, however many ask', async () => {
      const schema = await tenantSchema('cap');
      const bundles = [anotherProcess(), anotherProcess(true), anotherProcess(true)];
      const held = await holding(
        schema,
        [...bundles, ...bundles].map((bundle) => bundle.query),
      );
      let most = 0;
      try {
        for (let tries = 0; tries < 200 && most < 2; tries++) {
          most = Math.max(most, await held.waiting());
          await new Promise((resolve) => setImmediate(resolve));
        }
        // Had each function its own pool, all six would be waiting on the lock by now.
        most = Math.max(most, await held.waiting());
      } finally {
        await held.release();
      }
      const statuses = (await Promise.all(held.replies)).map((reply) => reply.status);

      expect(most).toBe(2);
      expect(statuses.filter((status) => status >= 500 && status !== 503)).toEqual([]);
    });

    it('a pool made again while requests wait for it answers none of them 500', async () => {
      const schema = await tenantSchema('remade');
      const proc = anotherProcess();
      const held = await holding(schema, [proc.query, proc.query, proc.query, proc.query, proc.query]);
      try {
        for (let tries = 0; tries < 2000 && (await held.waiting()) < 2; tries++)
          await new Promise((resolve) => setImmediate(resolve));
        // A key deleted, a quota changed: the process forgets the role's pool under the waiters.
        await (require('#lib/db/executor') as typeof import('#lib/db/executor')).dropRolePool(
          `${schema}_exec`,
        );
      } finally {
        await held.release();
      }
      const statuses = (await Promise.all(held.replies)).map((reply) => reply.status);

      expect(statuses.filter((status) => status === 500)).toEqual([]);
    });
  });
});
