import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rotateSecret } from '#lib/admin/rotate-secret';
import { resetConfig } from '#lib/config';
import { closePool, getDatabase } from '#lib/db/pool';
import { rolePassword } from '#lib/db/role-names';
import { backendsStillRunning, createKey, loginAs, sqlAs, tenantSchema } from '#test/security/tenant';
import { schemaExists, withAdminClient } from '#test/support/db';
import { licenseTestDatabase } from '#test/support/license-db';
import { reportLines } from '../../bin/rotate-secret';

/**
 * Rotating DBADMIN_SECRET is for when the old one may be known to someone: afterwards nothing
 * derived from it may log in, no session opened with it may go on, and no role may gain a login
 * its keys do not give it. A database of its own: rotation touches every schema in it.
 */
const OLD = process.env.DBADMIN_SECRET as string;
const NEW = 'rotated-secret-0123456789abcdef0123456789abcdef';
const sharedUrl = process.env.DATABASE_URL;
let database: Awaited<ReturnType<typeof licenseTestDatabase>>;

beforeAll(async () => {
  database = await licenseTestDatabase();
  // `public_exec` and its kin are the cluster's, shared with other test files: not rotated here.
  await database.db.query('DROP SCHEMA public CASCADE');
  process.env.DATABASE_URL = database.url;
  resetConfig();
});
afterAll(async () => {
  await closePool();
  process.env.DATABASE_URL = sharedUrl;
  resetConfig();
  await database.drop();
});

const rotate = async (secret = NEW, previousSecret = OLD) =>
  rotateSecret(await getDatabase(), {
    secret,
    previousSecret,
    licenseDataDir: mkdtempSync(join(tmpdir(), 'dbadmin-rotate-')),
  });

/** 'logged in', or 'refused <SQLSTATE>'. */
async function tryLogin(role: string, password: string): Promise<string> {
  const client = loginAs(role, password);
  return client.connect().then(
    async () => {
      await client.end();
      return 'logged in';
    },
    (error: { code?: string }) => `refused ${error.code}`,
  );
}

const canLogin = (role: string) =>
  withAdminClient(
    async (c) =>
      (await c.query('SELECT rolcanlogin FROM pg_roles WHERE rolname = $1', [role])).rows[0]?.rolcanlogin,
  );

/** `work` with the service pointed at the shared test database, then back at this file's own. */
async function inSharedDatabase<T>(work: () => Promise<T>): Promise<T> {
  await closePool();
  process.env.DATABASE_URL = sharedUrl;
  resetConfig();
  try {
    return await work();
  } finally {
    await closePool();
    process.env.DATABASE_URL = database.url;
    resetConfig();
  }
}

/** A schema whose exec, svc and anon roles can all log in. */
async function keyedSchema(prefix: string): Promise<string> {
  const schema = await tenantSchema(prefix);
  await createKey(schema, 'service_role');
  await createKey(schema, 'anon');
  return schema;
}

describe('rotating DBADMIN_SECRET', () => {
  it('leaves no role logging in with a password derived from the old secret', async () => {
    const schema = await keyedSchema('rotold');
    const roles = ['exec', 'svc', 'anon'].map((kind) => `${schema}_${kind}`);
    for (const role of roles) expect(await tryLogin(role, rolePassword(OLD, role))).toBe('logged in');

    await rotate();

    for (const role of roles) {
      expect(await tryLogin(role, rolePassword(OLD, role))).toBe('refused 28P01');
      expect(await tryLogin(role, rolePassword(NEW, role))).toBe('logged in');
    }
  });

  it('ends a tenant’s session opened with the old password', async () => {
    const schema = await keyedSchema('rotsession');
    const role = `${schema}_svc`;
    const session = loginAs(role, rolePassword(OLD, role));
    session.on('error', () => undefined);
    await session.connect();
    expect((await session.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);

    await rotate();

    expect(await backendsStillRunning(`usename = '${role}'`)).toBe(0);
    await expect(session.query('SELECT 1')).rejects.toThrow();
    await session.end().catch(() => undefined);
  });

  it('gives no login to a key role whose schema has no active key of its type', async () => {
    const schema = await tenantSchema('rotnokey');
    const anon = await createKey(schema, 'anon');
    await createKey(schema, 'service_role');
    const { handler: keys } = await import('#functions/keys');
    const { call } = await import('#test/support/http');
    await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${anon.id}` });
    // Disabled by another container: the role still has its login until something resets it.
    await withAdminClient((c) =>
      c.query(`UPDATE _dbadmin.api_keys SET is_active = false WHERE schema_name = $1`, [schema]),
    );

    await rotate();

    for (const kind of ['anon', 'svc']) {
      const role = `${schema}_${kind}`;
      expect(await canLogin(role)).toBe(false);
      expect(await tryLogin(role, rolePassword(NEW, role))).toMatch(/^refused 28/);
    }
    expect(await tryLogin(`${schema}_exec`, rolePassword(NEW, `${schema}_exec`))).toBe('logged in');
  });

  it('gives no login back to the roles of a schema being deleted', async () => {
    const schema = await keyedSchema('rotclosing');
    const roles = ['exec', 'svc', 'anon'].map((kind) => `${schema}_${kind}`);
    // The first, committed half of a deletion whose drop then failed (see deleteSchema).
    await withAdminClient(async (c) => {
      await c.query('UPDATE _dbadmin.schema_locks SET closing = true WHERE schema_name = $1', [schema]);
      for (const role of roles) await c.query(`ALTER ROLE "${role}" NOLOGIN`);
    });

    const report = await rotate();

    expect(report.closing).toContain(schema);
    for (const role of roles) {
      expect(await canLogin(role)).toBe(false);
      expect(await tryLogin(role, rolePassword(NEW, role))).toMatch(/^refused 28/);
    }
  });
});

describe('rotating DBADMIN_SECRET after a tenant dropped its own schema', () => {
  /**
   * A service_role key's SQL: back to the login role, a password of the tenant's own for it, then
   * as the schema's owner (which may drop what it owns) the schema itself, so that nothing in the
   * database names the schema its roles were made for.
   */
  const dropOwnSchema = (schema: string, password: string) =>
    `DO $$ BEGIN
       EXECUTE 'SET ROLE NONE';
       EXECUTE 'ALTER ROLE ${schema}_svc PASSWORD ''${password}''';
       EXECUTE 'SET ROLE ${schema}_owner';
       EXECUTE 'DROP SCHEMA ${schema} CASCADE';
     END $$`;

  it('shuts out every role of the schema, with a password of the new secret, and ends their sessions', async () => {
    const schema = await tenantSchema('rotgone');
    const { key } = await createKey(schema, 'service_role');
    await createKey(schema, 'anon');
    const roles = ['exec', 'svc', 'anon'].map((kind) => `${schema}_${kind}`);
    const [exec, svc] = [`${schema}_exec`, `${schema}_svc`];
    expect((await sqlAs(key, dropOwnSchema(schema, 'tenant-chosen-1'))).status).toBe(200);
    // The attack is live: the schema is gone, its roles log in with the tenant's password and the old secret's.
    expect(await schemaExists(schema)).toBe(false);
    expect(await tryLogin(svc, 'tenant-chosen-1')).toBe('logged in');
    expect(await tryLogin(exec, rolePassword(OLD, exec))).toBe('logged in');
    const session = loginAs(svc, 'tenant-chosen-1');
    session.on('error', () => undefined);
    await session.connect();

    const report = await rotate();

    for (const role of roles) {
      expect(await canLogin(role)).toBe(false);
      expect(await tryLogin(role, rolePassword(OLD, role))).toBe('refused 28P01');
      // The right password and still no login (28000): the password is the new secret's.
      expect(await tryLogin(role, rolePassword(NEW, role))).toBe('refused 28000');
    }
    expect(await tryLogin(svc, 'tenant-chosen-1')).toBe('refused 28P01');
    expect(await backendsStillRunning(`usename = '${svc}'`)).toBe(0);
    await expect(session.query('SELECT 1')).rejects.toThrow();
    await session.end().catch(() => undefined);
    expect(report.gone).toEqual([schema]);
    expect(report.roles).toEqual(expect.arrayContaining(roles));
    expect(reportLines(report, '.').out).toContain(
      `Shut the roles of schema "${schema}", which no longer exists: they cannot log in`,
    );
  });

  it('gives no login back when the schema’s key is used afterwards', async () => {
    const schema = await tenantSchema('rotgonekey');
    const { key } = await createKey(schema, 'service_role');
    expect((await sqlAs(key, dropOwnSchema(schema, 'tenant-chosen-2'))).status).toBe(200);
    await rotate();

    const reply = await sqlAs(key, 'SELECT 1');

    // The key is still on record; its schema is not, and nothing gives its roles a login again.
    expect(reply.status).toBe(404);
    for (const kind of ['exec', 'svc']) expect(await canLogin(`${schema}_${kind}`)).toBe(false);
  });

  it('leaves alone the roles of a schema in another database of the cluster', async () => {
    // Roles are the cluster's: the shared test database's schemas have theirs, granted to the same
    // service role, and none of those schemas is in this database.
    const other = await inSharedDatabase(async () => {
      const schema = await tenantSchema('rotelsewhere');
      await createKey(schema, 'service_role');
      return schema;
    });
    const roles = ['exec', 'svc'].map((kind) => `${other}_${kind}`);

    const report = await rotate();

    for (const role of roles) {
      expect(report.roles).not.toContain(role);
      expect(await canLogin(role)).toBe(true);
      expect(await tryLogin(role, rolePassword(OLD, role))).toBe('logged in');
    }
  });
});
