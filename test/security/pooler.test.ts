import pg from 'pg';
import { handler as query } from '#functions/query';
import { handler as schemas } from '#functions/schemas';
import { closePool, getDatabase, getQueryPool, stopBackend } from '#lib/db/pool';
import { tenantSchema } from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { PGBOUNCER_AUTH_USER, pgbouncerAuthProvisioning } from '../../bin/pgbouncer-auth';

/**
 * Through a pooler in transaction mode (the security suite's run through PgBouncer,
 * DBADMIN_TEST_POOLER=pgbouncer): the process id a connection is given is the pooler's own
 * number, which may be any backend's. Stopping a statement must never signal a backend by it: the
 * service may end any tenant's session (pg_signal_backend), so a wrong number would end a
 * stranger's. And the pooler's view of the logins, _dbadmin_pgbouncer.get_auth, is no tenant's to read.
 */

const pooled = process.env.DATABASE_POOL_MODE === 'transaction';
const throughPooler = pooled ? describe : describe.skip;

afterAll(closePool);

/** A session of a schema's own login, directly on the server: the stranger, and its backend's pid. */
async function stranger(schema: string): Promise<{ client: pg.Client; pid: number }> {
  const url = new URL(directUrl());
  url.username = `${schema}_user`;
  url.password = 'schema-pass-1';
  const client = new pg.Client({ connectionString: url.toString() });
  client.on('error', () => undefined);
  await client.connect();
  const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return { client, pid: rows[0]?.pid as number };
}

throughPooler('stopping a statement through a transaction pooler', () => {
  it.each(['cancel', 'terminate'] as const)(
    'a %s never reaches the backend whose pid the pooler gave',
    async (how) => {
      const schema = await tenantSchema('poolpid');
      const victim = await stranger(schema);
      const mark = `/* ${schema} */`;
      // The stranger is busy: a cancel would end its statement, a termination its session.
      const victimRuns = victim.client
        .query(`SELECT pg_catalog.pg_sleep(30) ${mark}`)
        .catch((error: Error) => error);
      const [catalog, sessions] = [await getDatabase(), await getQueryPool()];
      const session = await sessions.connect();
      const ours = `SELECT pg_catalog.pg_sleep(30) ${mark} AS ours`;
      try {
        const running = session.query(ours).catch((error: Error) => error);
        // The pooler's number for our connection happens to be the stranger's pid.
        (session as unknown as { processID: number }).processID = victim.pid;
        await stopBackend(catalog, session, how);
        // Whatever stopBackend left running ends now, by our hand, and by the other signal.
        const [signal, code] =
          how === 'cancel' ? ['pg_terminate_backend', '57P01'] : ['pg_cancel_backend', '57014'];
        await withAdminClient((c) =>
          c.query(`SELECT ${signal}(pid) FROM pg_stat_activity WHERE query LIKE $1`, [`%${mark}%`]),
        );

        expect(await running).toBeInstanceOf(Error);
        expect(await victimRuns).toMatchObject({ code });
      } finally {
        session.release(true);
        await victim.client.end().catch(() => undefined);
      }
    },
  );
});

throughPooler("the pooler's view of the logins", () => {
  it("is no tenant's to read", async () => {
    const schema = await tenantSchema('poolauth');
    const tenant = await stranger(schema);
    try {
      await expect(
        tenant.client.query(`SELECT * FROM _dbadmin_pgbouncer.get_auth('${schema}_exec')`),
      ).rejects.toMatchObject({
        code: '42501',
      });
    } finally {
      await tenant.client.end();
    }
  });

  it('answers no superuser, and not for itself', async () => {
    const answers = await withAdminClient(async (c) => {
      await c.query(`SET ROLE ${PGBOUNCER_AUTH_USER}`);
      const { rows } = await c.query(
        `SELECT (SELECT count(*) FROM _dbadmin_pgbouncer.get_auth(current_setting('is_superuser') || '')) AS junk,
                (SELECT count(*) FROM pg_roles r, _dbadmin_pgbouncer.get_auth(r.rolname) WHERE r.rolsuper) AS superusers,
                (SELECT count(*) FROM _dbadmin_pgbouncer.get_auth('${PGBOUNCER_AUTH_USER}')) AS itself`,
      );
      return rows[0];
    });

    expect(answers).toEqual({ junk: 0, superusers: 0, itself: 0 });
  });
});

throughPooler('provisioning the lookup', () => {
  it('refuses a _dbadmin_pgbouncer schema another role owns, whose owner could replace the function', async () => {
    const schema = await tenantSchema('poolown');
    await withAdminClient((c) => c.query(`ALTER SCHEMA _dbadmin_pgbouncer OWNER TO "${schema}_owner"`));
    try {
      await expect(withAdminClient((c) => c.query(pgbouncerAuthProvisioning()))).rejects.toMatchObject({
        message: expect.stringMatching(/belongs to another role/),
      });
    } finally {
      await withAdminClient((c) => c.query('ALTER SCHEMA _dbadmin_pgbouncer OWNER TO CURRENT_USER'));
    }
  });
});

throughPooler("a schema's settings in each transaction", () => {
  it('hold for a schema named like a reserved word', async () => {
    const made = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: 'window', password: 'schema-pass-1' },
    });
    expect(made.status).toBe(201);

    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema: 'window', sql: "SELECT current_setting('search_path') AS path, current_user AS who" },
    });

    expect(reply.status).toBe(200);
    expect(reply.body.rows).toEqual([{ path: '"window"', who: 'window_owner' }]);
  });
});
