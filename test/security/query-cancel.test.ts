import { randomUUID } from 'node:crypto';
import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call, type Reply } from '#test/support/http';

/**
 * POST /api/query/cancel cancels the caller's own running statement, found by the queryId it was
 * sent with: nobody else's, even with the same id, and through any instance of the service.
 */

afterAll(closePool);

let schema: string;
let service: string;
beforeAll(async () => {
  schema = await tenantSchema('qcancel');
  service = (await createKey(schema, 'service_role')).key;
});

const cancel = (queryId: string, as: object = {}) =>
  call(query, { method: 'POST', path: '/api/query/cancel', body: { queryId }, ...as });

/** Backends running pg_sleep for the schema's roles: the statement is on. */
const sleeping = () =>
  withAdminClient(async (c) => {
    const { rows } = await c.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE state = 'active' AND query LIKE '%pg_sleep(60)%' AND usename LIKE $1`,
      [`${schema}%`],
    );
    return rows[0].n as number;
  });

async function untilSleeping(): Promise<void> {
  for (let i = 0; i < 200 && (await sleeping()) === 0; i++) await new Promise((r) => setTimeout(r, 50));
  expect(await sleeping()).toBe(1);
}

describe('POST /api/query/cancel', () => {
  it('cancels only its sender’s statement: a key with the same queryId cancels nothing', async () => {
    const queryId = randomUUID();
    const running: Promise<Reply> = call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT pg_sleep(60)', schema, queryId, maxRows: 10 },
    });
    await untilSleeping();

    const byKey = await cancel(queryId, bearer(service));
    expect(byKey.status).toBe(200);
    expect(byKey.body.cancelled).toBe(false);
    expect(await sleeping()).toBe(1);

    const byAdmin = await cancel(queryId);
    expect(byAdmin.body).toMatchObject({ cancelled: true });
    const answer = await running;
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ error: 'Query cancelled' });
    expect(await sleeping()).toBe(0);
  }, 60_000);

  it('cancels a key’s own statement for that key, and its session serves the next one', async () => {
    const queryId = randomUUID();
    const running = call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT pg_sleep(60)', queryId },
      ...bearer(service),
    });
    await untilSleeping();

    expect((await cancel(queryId)).body.cancelled).toBe(false);
    expect((await cancel(queryId, bearer(service))).body.cancelled).toBe(true);
    expect((await running).body).toMatchObject({ error: 'Query cancelled' });
    const next = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT 2 AS two' },
      ...bearer(service),
    });
    expect(next.body.rows).toEqual([{ two: 2 }]);
  }, 60_000);

  it('answers cancelled: false for an id under which nothing runs', async () => {
    const reply = await cancel(randomUUID());

    expect(reply.status).toBe(200);
    expect(reply.body.cancelled).toBe(false);
    expect(reply.body.message).toMatch(/no statement of yours/);
  });
});
