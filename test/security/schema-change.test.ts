import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { asTenant, bearer, createKey, loginAs, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { withSetting } from '#test/support/settings';

/**
 * Schema changes run as the schema's role, with a bounded wait for their locks. A tenant may hold
 * its own table locked on purpose, and may write the USING expression of a type change: neither
 * may reach past the schema, stall the service, or read what the admin is running.
 */
afterAll(closePool);
withSetting('SCHEMA_LOCK_TIMEOUT_MS', '300');

let schema: string;
beforeAll(async () => {
  schema = await tenantSchema('ddlsec');
});

const change = (body: Record<string, unknown>, auth: object = {}) =>
  call(tables, { method: 'PATCH', path: '/api/table/items/column/name', body: { schema, ...body }, ...auth });

describe('a hostile tenant and a schema change', () => {
  it('a USING expression runs with the schema’s rights only, and changes nothing when refused', async () => {
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".peek() RETURNS text LANGUAGE plpgsql AS $$
         BEGIN RETURN (SELECT count(*) FROM _dbadmin.api_keys)::text; END $$`,
    );

    const reply = await change({ type: 'VARCHAR', length: 50, using: `"${schema}".peek()` });

    expect(reply.status).toBe(403);
    expect(reply.body.message).toMatch(/permission denied for schema _dbadmin/);
    const type = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'name'`,
            [`"${schema}".items`],
          )
        ).rows[0].t,
    );
    expect(type).toBe('text');
  });

  it('holding its table locked stalls neither the service’s reads nor a change past the lock timeout', async () => {
    const holder = loginAs(`${schema}_user`, 'schema-pass-1');
    await holder.connect();
    await holder.query(`BEGIN; LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`);
    try {
      const started = Date.now();
      const preview = await change({ nullable: true, dryRun: true });
      const previewed = Date.now() - started;
      const run = await change({ nullable: true });

      expect(preview.status).toBe(200);
      expect(previewed).toBeLessThan(2000);
      expect(run.status).toBe(409);
      expect(Date.now() - started).toBeLessThan(4000);
    } finally {
      await holder.end();
    }
  });

  it('a key sees who blocks it, never the statement the admin’s session is running', async () => {
    const { key } = await createKey(schema, 'service_role', 'ddl');
    await withAdminClient(async (admin) => {
      await admin.query(`BEGIN; SELECT 'the admin''s secret statement' FROM "${schema}".items`);
      try {
        const asKey = await change({ nullable: true, dryRun: true }, bearer(key));
        const asAdmin = await change({ nullable: true, dryRun: true });

        expect(asKey.body.blockers).toHaveLength(1);
        expect(JSON.stringify(asKey.body)).not.toContain('secret statement');
        expect(asAdmin.body.blockers[0].query).toContain('secret statement');
      } finally {
        await admin.query('ROLLBACK');
      }
    });
  });

  it('an anon key changes nothing', async () => {
    const { key } = await createKey(schema, 'anon', 'ddl-anon');

    expect((await change({ rename: 'x' }, bearer(key))).status).toBe(403);
  });
});
