import { handler as query } from '#functions/query';
import { handler as tenants } from '#functions/tenants';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, sqlAs, tenantSchema } from '#test/security/tenant';
import { call } from '#test/support/http';
import { sessionIdentity } from '#test/support/sessions';

/**
 * Ending sessions from the tenants view, as an attacker would steer it: the service's own sessions
 * are never ended (its pooled session of a tenant's role may only have its statement cancelled,
 * its own role's are not a tenant's at all), another schema's session is not reached through this
 * one's path, and no API key reaches the view.
 */
afterAll(closePool);

let schema: string;
let other: string;
beforeAll(async () => {
  schema = await tenantSchema('tensec');
  other = await tenantSchema('tensec2');
});

/** Stops the session named by its real pid and start: what refuses it is the rule, not a stale name. */
const stop = async (where: string, pid: number, how: 'cancel' | 'terminate', auth = {}) =>
  call(tenants, {
    method: 'POST',
    path: `/api/tenants/${where}/sessions/${pid}/${how}`,
    body: await sessionIdentity(pid, how),
    ...auth,
  });

const pidOf = async (reply: Promise<{ body: { rows: { pid: number }[] } }>) =>
  (await reply).body.rows[0]?.pid as number;

it('never ends the service’s pooled session of a tenant’s role, nor reaches the service’s own role', async () => {
  const exec = await pidOf(
    call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: 'SELECT pg_backend_pid() AS pid' },
    }),
  );
  const own = await pidOf(
    call(query, {
      method: 'POST',
      path: '/api/query',
      body: { runAs: 'admin', sql: 'SELECT pg_backend_pid() AS pid' },
    }),
  );

  const ending = await stop(schema, exec, 'terminate');
  const reaching = await Promise.all([stop(schema, own, 'terminate'), stop(schema, own, 'cancel')]);

  expect(ending.status).toBe(403);
  expect(reaching.map((r) => r.status)).toEqual([404, 404]);
  // The pooled session is still there, and still serves.
  const again = await pidOf(
    call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: 'SELECT pg_backend_pid() AS pid' },
    }),
  );
  expect(again).toBe(exec);
});

it('does not reach another schema’s session through this schema’s path', async () => {
  const key = await createKey(other, 'service_role', 'k');
  const pid = await pidOf(sqlAs(key.key, 'SELECT pg_backend_pid() AS pid') as never);

  expect((await stop(schema, pid, 'cancel')).status).toBe(404);
});

it('is the admin’s alone: no API key reaches it', async () => {
  const key = await createKey(schema, 'service_role', 'svc');

  const replies = await Promise.all([
    call(tenants, { path: '/api/tenants', ...bearer(key.key) }),
    call(tenants, { path: `/api/tenants/${schema}`, ...bearer(key.key) }),
    stop(schema, 1, 'terminate', bearer(key.key)),
  ]);

  expect(replies.map((r) => r.status)).toEqual([403, 403, 403]);
});
