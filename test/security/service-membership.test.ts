import { handler as keys } from '#functions/keys';
import { handler as query } from '#functions/query';
import { handler as schemas } from '#functions/schemas';
import { handler as tenants } from '#functions/tenants';
import { getConfig } from '#lib/config';
import { closePool, getDatabase, withTransaction } from '#lib/db/pool';
import { shutLogins } from '#lib/db/role-revocation';
import { lockSchema } from '#lib/db/schema-locks';
import { asTenant, createKey, loginAs, serviceRole, sqlAs, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * The service's role is a member of no tenant's role (lib/db/role-admin): their rights are never
 * the service's, so nothing a tenant planted can run with the service's rights by way of them,
 * and what PostgreSQL walks on every role statement of the service stays the same size however
 * many tenants there are. The roles' administrators are reachable by the service alone.
 */
afterAll(closePool);

const serviceIsSuperuser = () =>
  withAdminClient(
    async (c) =>
      (await c.query('SELECT rolsuper FROM pg_roles WHERE rolname = $1', [serviceRole()])).rows[0].rolsuper,
  );

/** The schema's roles the service is a member of, now, however granted. */
const membershipsIn = (schema: string) =>
  withAdminClient(async (c) =>
    (
      await c.query(
        `SELECT r.rolname FROM pg_auth_members m
             JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles s ON s.oid = m.member
            WHERE s.rolname = $1 AND r.rolname LIKE $2 ESCAPE '!'`,
        [serviceRole(), `${schema.replaceAll('_', '!_')}!_%`],
      )
    ).rows.map((row) => row.rolname),
  );

describe('the service and its tenants’ roles', () => {
  it('is a member of none of them, through a schema’s whole life', async () => {
    if (await serviceIsSuperuser()) return;
    const schema = await tenantSchema('member');
    expect(await membershipsIn(schema)).toEqual([]);

    const anon = await createKey(schema, 'anon');
    const svc = await createKey(schema, 'service_role');
    expect((await sqlAs(anon.key, 'SELECT count(*) AS n FROM items')).status).toBe(200);
    expect((await sqlAs(svc.key, "INSERT INTO items (name) VALUES ('svc')")).status).toBe(200);
    const adminSql = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: "INSERT INTO items (name) VALUES ('admin')", schema },
    });
    expect(adminSql.status).toBe(200);
    const quota = await call(tenants, {
      method: 'PUT',
      path: `/api/tenants/${schema}/quota`,
      body: { statementTimeoutMs: 5000, connectionLimit: 4, storageBytes: null },
    });
    expect(quota.status).toBe(200);
    const deleted = await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${anon.id}` });
    expect(deleted.status).toBe(200);

    expect(await membershipsIn(schema)).toEqual([]);

    const dropped = await call(schemas, {
      method: 'DELETE',
      path: `/api/schema/${schema}`,
      query: { cascade: 'true' },
    });
    expect(dropped.status).toBe(200);
  });

  it('shuts the logins of a schema its tenant dropped, whatever memberships the tenant changed', async () => {
    if (await serviceIsSuperuser()) return;
    const schema = await tenantSchema('memberforge');
    const svc = await createKey(schema, 'service_role');
    const { rows } = await withAdminClient((c) => c.query('SELECT shard FROM _dbadmin.role_shards'));
    // A login of the tenant's own choosing for the key's role; and, before PostgreSQL 16 (a
    // session may grant and revoke membership in its own login role), no sign of who made it.
    const revokes = rows.map(({ shard }) => `EXECUTE 'REVOKE "${schema}_svc" FROM "${shard}"';`).join(' ');
    const planted = await sqlAs(
      svc.key,
      `DO $$ BEGIN SET ROLE "${schema}_svc"; ALTER ROLE "${schema}_svc" PASSWORD 'kept-by-tenant';
         BEGIN ${revokes} EXCEPTION WHEN insufficient_privilege THEN NULL; END; END $$`,
    );
    expect(planted.status).toBe(200);
    await asTenant(schema, `DROP SCHEMA "${schema}" CASCADE`);

    const shut = await withTransaction(await getDatabase(), async (client) => {
      await lockSchema(client, schema);
      return shutLogins(client, (await getConfig()).DBADMIN_SECRET, schema);
    });

    expect(shut).toContain(`${schema}_svc`);
    const kept = loginAs(`${schema}_svc`, 'kept-by-tenant');
    await expect(kept.connect()).rejects.toMatchObject({ code: expect.stringMatching(/^28/) });
  });

  it('reads no tenant’s table with the admin’s own rights: runAs admin is not a way into a schema', async () => {
    if (await serviceIsSuperuser()) return;
    const schema = await tenantSchema('memberread');

    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: `SELECT name FROM "${schema}".items`, runAs: 'admin' },
    });

    expect(reply.status).toBe(403);
    expect(reply.body.message).toMatch(/permission denied/);
  });

  it('lets no tenant reach what administers the roles', async () => {
    const schema = await tenantSchema('memberhub');
    const { rows } = await withAdminClient((c) =>
      c.query(
        `SELECT p.oid::regprocedure::text AS fn FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname = '_dbadmin_roles'`,
      ),
    );
    const attempts = [
      `SELECT '_dbadmin_roles' IS NOT NULL FROM pg_catalog.pg_namespace WHERE has_schema_privilege(oid, 'USAGE') AND nspname = '_dbadmin_roles'`,
      ...rows.map(({ fn }) => `SELECT ${fn.replace('(text)', '')}('ALTER ROLE "${schema}_user" SUPERUSER')`),
    ];
    const outcomes: string[] = [];
    for (const sql of attempts.slice(1)) {
      outcomes.push(
        await asTenant(schema, sql).then(
          () => 'done',
          (error: { code?: string }) => error.code ?? 'failed',
        ),
      );
    }
    const tenant = loginAs(`${schema}_user`, 'schema-pass-1');
    await tenant.connect();
    try {
      const visible = await tenant.query(attempts[0] as string);
      expect(visible.rowCount).toBe(0);
    } finally {
      await tenant.end();
    }

    expect(outcomes.every((outcome) => outcome === '42501')).toBe(true);
    const { rows: after } = await withAdminClient((c) =>
      c.query('SELECT rolsuper FROM pg_roles WHERE rolname = $1', [`${schema}_user`]),
    );
    expect(after[0].rolsuper).toBe(false);
  });
});
