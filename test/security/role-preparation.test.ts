import { handler as keys } from '#functions/keys';
import { handler as query } from '#functions/query';
import { dropRolePool } from '#lib/db/executor';
import { closePool } from '#lib/db/pool';
import { asTenant, createKey, loginAs, sqlAs, tenantSchema } from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * A process that finds a schema's role prepared logs in as it directly, without the setup that
 * used to run at every new pool (lib/db/schema-roles roleReady). What that setup undid must still
 * be undone, and nothing recorded in dbadmin's own tables may be a tenant's to forge. Forgetting
 * the process's pool (dropRolePool) is what a fresh process, or another container, sees.
 */
afterAll(closePool);

const adminSql = (schema: string, sql: string) =>
  call(query, { method: 'POST', path: '/api/query', body: { sql, schema } });

/** The sessions open now as the role, other than the test's. */
const sessionsOf = (role: string) =>
  withAdminClient(async (c) =>
    Number(
      (
        await c.query(
          'SELECT count(*) AS n FROM pg_stat_activity WHERE usename = $1 AND pid <> pg_backend_pid()',
          [role],
        )
      ).rows[0].n,
    ),
  );

describe('a role logged in as without being prepared again', () => {
  it('does not keep settings the role gave itself', async () => {
    const schema = await tenantSchema('prepset');
    expect((await adminSql(schema, 'SELECT 1 AS one')).status).toBe(200);
    // As a tenant could on PostgreSQL 15 (a role may set its own defaults there): planted directly.
    await withAdminClient((c) => c.query(`ALTER ROLE "${schema}_exec" SET work_mem = '77kB'`));
    await dropRolePool(`${schema}_exec`);

    const reply = await adminSql(schema, "SELECT current_setting('work_mem') AS work_mem");

    expect(reply.status).toBe(200);
    expect(reply.body.rows[0].work_mem).not.toBe('77kB');
  });

  it('does not keep settings the role gave itself for this database alone', async () => {
    const schema = await tenantSchema('prepdbset');
    expect((await adminSql(schema, 'SELECT 1 AS one')).status).toBe(200);
    // Any role may: ALTER ROLE CURRENT_USER IN DATABASE ... SET, which outranks its other defaults.
    const database = new URL(directUrl()).pathname.slice(1);
    await withAdminClient((c) =>
      c.query(`ALTER ROLE "${schema}_exec" IN DATABASE "${database}" SET work_mem = '77kB'`),
    );
    await dropRolePool(`${schema}_exec`);

    const reply = await adminSql(schema, "SELECT current_setting('work_mem') AS work_mem");

    expect(reply.status).toBe(200);
    expect(reply.body.rows[0].work_mem).not.toBe('77kB');
  });

  it('never logs in as a role of a schema that is being deleted', async () => {
    const schema = await tenantSchema('prepclose');
    expect((await adminSql(schema, 'SELECT 1 AS one')).status).toBe(200);
    await dropRolePool(`${schema}_exec`);
    // None directly; a transaction pooler keeps its server connection of the role from the read above.
    const before = await sessionsOf(`${schema}_exec`);
    // Deletion under way in another process: the roles still have their login for a moment.
    await withAdminClient((c) =>
      c.query('UPDATE _dbadmin.schema_locks SET closing = true WHERE schema_name = $1', [schema]),
    );
    try {
      const reply = await adminSql(schema, 'SELECT 1 AS one');

      expect(reply.status).toBe(404);
      expect(await sessionsOf(`${schema}_exec`)).toBe(before);
    } finally {
      await withAdminClient((c) =>
        c.query('UPDATE _dbadmin.schema_locks SET closing = false WHERE schema_name = $1', [schema]),
      );
    }
  });

  it('cannot be marked ready by the tenant', async () => {
    const schema = await tenantSchema('prepforge');
    const attempts = [
      `UPDATE _dbadmin.schema_locks SET prepared = '{exec,svc,anon}' WHERE schema_name = '${schema}'`,
      `INSERT INTO _dbadmin.schema_locks (schema_name, prepared) VALUES ('${schema}x', '{exec}')`,
      'SELECT * FROM _dbadmin.schema_locks',
    ];
    const outcomes = [];
    for (const sql of attempts) {
      outcomes.push(
        await asTenant(schema, sql).then(
          () => 'done',
          (error: { code?: string }) => error.code,
        ),
      );
    }

    expect(outcomes).toEqual(['42501', '42501', '42501']);
  });

  it('a password the tenant set for the role is reset by the next login’s repair', async () => {
    const schema = await tenantSchema('prepwd');
    const changed = await adminSql(
      schema,
      "SET ROLE NONE; ALTER ROLE CURRENT_USER PASSWORD 'tenant-chose-this'",
    );
    expect(changed.status).toBe(200);
    await dropRolePool(`${schema}_exec`);

    const reply = await adminSql(schema, 'SELECT current_user AS role');
    const { Client } = await import('pg');
    const url = new URL(directUrl());
    url.username = `${schema}_exec`;
    url.password = 'tenant-chose-this';
    const tenant = new Client({ connectionString: url.toString() });
    const tenantLogin = await tenant.connect().then(
      () => 'logged in',
      (error: { code?: string }) => error.code,
    );
    await tenant.end().catch(() => undefined);

    expect(reply.status).toBe(200);
    expect(tenantLogin).toBe('28P01');
  });

  it('a password a key’s planted code gave the admin’s role ends with the key', async () => {
    const schema = await tenantSchema('prepkey');
    const { key, id } = await createKey(schema, 'service_role');
    // Planted by the key: runs in the admin's session as `_exec`, and gives that role a password.
    const planted = [
      await sqlAs(
        key,
        `CREATE FUNCTION "${schema}".grab() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN SET ROLE NONE; ALTER ROLE CURRENT_USER PASSWORD 'kept-after-key'; RETURN NEW; END $$`,
      ),
      await sqlAs(
        key,
        `CREATE TRIGGER grab BEFORE INSERT ON "${schema}".items FOR EACH ROW EXECUTE FUNCTION "${schema}".grab()`,
      ),
    ].map((reply) => reply.status);
    expect(planted).toEqual([200, 200]);
    expect(
      (await adminSql(schema, `INSERT INTO "${schema}".items (name) VALUES ('by the admin')`)).status,
    ).toBe(200);
    const session = loginAs(`${schema}_exec`, 'kept-after-key');
    session.on('error', () => undefined);
    const before = await session.connect().then(
      () => 'logged in',
      (error: { code?: string }) => error.code,
    );

    await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${id}` });
    const sessionAlive = await session.query('SELECT 1').then(
      () => true,
      () => false,
    );
    await session.end().catch(() => undefined);
    const again = loginAs(`${schema}_exec`, 'kept-after-key');
    const after = await again.connect().then(
      () => 'logged in',
      (error: { code?: string }) => error.code,
    );
    await again.end().catch(() => undefined);
    const admins = await adminSql(schema, 'SELECT 1 AS one');

    expect(before).toBe('logged in');
    expect(sessionAlive).toBe(false);
    expect(after).toBe('28P01');
    expect(admins.status).toBe(200);
  });

  it('a schema dropped and made again under its name is prepared again, not trusted', async () => {
    const schema = await tenantSchema('prepremade');
    expect((await adminSql(schema, 'SELECT 1 AS one')).status).toBe(200);
    // The tenant drops its schema (it owns it), and the admin's own SQL makes one of the name.
    await asTenant(schema, `DROP SCHEMA "${schema}" CASCADE`);
    const remade = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: `CREATE SCHEMA "${schema}"`, runAs: 'admin' },
    });
    expect(remade.status).toBe(200);
    await dropRolePool(`${schema}_exec`);

    const reply = await adminSql(
      schema,
      `CREATE TABLE "${schema}".again (id int) ; SELECT current_user AS who`,
    );

    expect(reply.status).toBe(200);
    expect(reply.body.rows[0].who).toBe(`${schema}_owner`);
  });
});
