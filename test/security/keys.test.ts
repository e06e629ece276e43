import { handler as keys } from '#functions/keys';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, loginAs, sqlAs, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

afterAll(closePool);

const tablesWith = (key: string) => call(tables, { path: '/api/tables', ...bearer(key) });

describe('keys for schemas that are not a tenant’s', () => {
  it.each(['information_schema', 'pg_catalog', 'pg_toast', '_dbadmin'])(
    'refuses a key for %s',
    async (schema) => {
      const reply = await call(keys, {
        method: 'POST',
        path: `/api/project/${schema}/keys`,
        body: { keyName: uniqueName('sys'), keyType: 'anon' },
      });

      expect(reply.status).toBe(400);
      expect(reply.body.error).toMatch(/schema/i);
    },
  );
});

describe('a key stops working everywhere at once', () => {
  let schema: string;
  beforeAll(async () => {
    schema = await tenantSchema('revoke');
  });

  it('a key deleted by another container fails on this one’s very next request', async () => {
    const { key, id } = await createKey(schema, 'service_role', uniqueName('gone'));
    expect((await tablesWith(key)).status).toBe(200);

    // Another container's DELETE /api/project/:schema/keys/:id: this process is not told.
    await withAdminClient((c) => c.query('DELETE FROM _dbadmin.api_keys WHERE id = $1', [id]));

    expect((await tablesWith(key)).status).toBe(401);
  });

  it('a key made inactive fails on the very next request', async () => {
    const { key, id } = await createKey(schema, 'anon', uniqueName('off'));
    expect((await tablesWith(key)).status).toBe(200);

    await withAdminClient((c) =>
      c.query('UPDATE _dbadmin.api_keys SET is_active = false WHERE id = $1', [id]),
    );

    expect((await tablesWith(key)).status).toBe(401);
  });

  it('a password the key role set for itself is no database login once its key is deleted', async () => {
    const { key, id } = await createKey(schema, 'service_role', uniqueName('pw'));
    const changed = await sqlAs(key, "ALTER ROLE CURRENT_USER PASSWORD 'tenant-chose-this'");
    const role = `${schema}_svc`;

    await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${id}` });
    const login = loginAs(role, 'tenant-chose-this');
    const outcome = await login.connect().then(
      async () => {
        await login.end();
        return 'logged in';
      },
      (error: { code?: string }) => `refused ${error.code}`,
    );

    expect(changed.status === 200 || changed.status >= 400).toBe(true);
    expect(outcome).toMatch(/^refused 28/);
  });

  it('the schema’s other keys keep working after one is deleted', async () => {
    const kept = await createKey(schema, 'service_role', uniqueName('kept'));
    const dropped = await createKey(schema, 'service_role', uniqueName('dropped'));

    await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${dropped.id}` });

    expect((await tablesWith(kept.key)).status).toBe(200);
    expect((await sqlAs(kept.key, 'SELECT 1 AS one')).body.rows).toEqual([{ one: 1 }]);
    expect((await tablesWith(dropped.key)).status).toBe(401);
  });
});
