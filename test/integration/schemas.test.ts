import pg from 'pg';
import { handler } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { roleExists, schemaExists, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

afterAll(closePool);

const create = (schemaName: unknown, password: unknown = 'correct-horse-9') =>
  call(handler, { method: 'POST', path: '/api/schema/create', body: { schemaName, password } });

describe('POST /api/schema/create', () => {
  it('creates the schema and a login role that owns it', async () => {
    const name = uniqueName('shop');

    const reply = await create(name, 'correct-horse-9');

    expect(reply.status).toBe(201);
    expect(reply.body).toEqual({
      success: true,
      message: expect.any(String),
      username: `${name}_user`,
    });
    // The schema belongs to <name>_owner, which cannot log in; its user holds all of its rights.
    const owner = await withAdminClient(async (c) =>
      c.query(
        `SELECT pg_get_userbyid(nspowner) AS owner, pg_has_role($2, nspowner, 'USAGE') AS user_has_rights,
                (SELECT rolcanlogin FROM pg_roles WHERE oid = nspowner) AS owner_can_log_in
           FROM pg_namespace WHERE nspname = $1`,
        [name, `${name}_user`],
      ),
    );
    expect(owner.rows[0]).toEqual({ owner: `${name}_owner`, user_has_rights: true, owner_can_log_in: false });
  });

  it('gives the role the password, so it can log in with it and create tables in its schema', async () => {
    const name = uniqueName('login');
    await create(name, 'pa ss:word-42!');

    const url = new URL(process.env.DATABASE_URL as string);
    url.username = `${name}_user`;
    url.password = 'pa ss:word-42!';
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      await client.query(`CREATE TABLE ${name}.t (id int)`);
      const { rows } = await client.query('SELECT current_user AS who, session_user AS login');
      expect(rows[0]).toEqual({ who: `${name}_owner`, login: `${name}_user` });
    } finally {
      await client.end();
    }
  });

  it('lists the new schema, sorted, without system schemas', async () => {
    const name = uniqueName('listed');
    await create(name);

    const reply = await call(handler, { path: '/api/schemas' });

    expect(reply.status).toBe(200);
    expect(reply.body).toContain(name);
    expect(reply.body).toContain('public');
    // dbadmin's own, the audit log's schema included: never listed, so never offered.
    expect(reply.body.filter((s: string) => s.startsWith('_dbadmin'))).toEqual([]);
    expect(reply.body).not.toContain('information_schema');
    expect(reply.body.some((s: string) => s.startsWith('pg_'))).toBe(false);
    expect([...reply.body].sort()).toEqual(reply.body);
  });

  it('refuses an existing schema with 400', async () => {
    const name = uniqueName('twice');
    await create(name);

    const reply = await create(name);

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'Schema exists',
      message: `schema "${name}" already exists`,
    });
  });

  it('lets exactly one of several concurrent creations of one name succeed, the rest get 400', async () => {
    const name = uniqueName('race');

    const replies = await Promise.all(Array.from({ length: 6 }, () => create(name)));

    const statuses = replies.map((r) => r.status).sort();
    expect(statuses).toEqual([201, 400, 400, 400, 400, 400]);
  });

  it.each([
    ['starts with a digit', '1shop'],
    ['contains a hyphen', 'my-shop'],
    ['contains a quote', 'shop"; DROP SCHEMA public; --'],
    ['is empty', ''],
    ['is too long for its user name', `a${'b'.repeat(58)}`],
    ['starts with pg_', 'pg_shop'],
  ])('refuses a schema name that %s, creating nothing', async (_, schemaName) => {
    const reply = await create(schemaName);

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Invalid schema name');
    expect(reply.body.message).toMatch(/schema name/);
    expect(await schemaExists(schemaName)).toBe(false);
  });

  it.each([
    ['is shorter than 8 characters', 'short', /at least 8/],
    ['contains a quote', "abc'defgh", /quotes/],
    ['contains a semicolon', 'abcdefgh;', /semicolons/],
    ['contains a comment marker', 'abcd--efgh', /comment/],
    ['contains a backslash', 'abcd\\efgh', /backslashes/],
    ['is not a string', 12345678, /must be a string/],
  ])('refuses a password that %s, creating nothing', async (_, password, reason) => {
    const name = uniqueName('pw');

    const reply = await create(name, password);

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Invalid password');
    expect(reply.body.message).toMatch(reason);
    expect(await schemaExists(name)).toBe(false);
    expect(await roleExists(`${name}_user`)).toBe(false);
  });

  it('names missing fields and unknown ones', async () => {
    const missing = await call(handler, { method: 'POST', path: '/api/schema/create', body: {} });
    const unknown = await call(handler, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: uniqueName('x'), password: 'long-enough', owner: 'me' },
    });

    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe('schemaName is required; password is required');
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toBe('unknown field owner');
  });

  it('leaves nothing behind when the user name is already taken', async () => {
    const name = uniqueName('taken');
    await withAdminClient((c) => c.query(`CREATE ROLE "${name}_user"`));

    const reply = await create(name);

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('User exists');
    expect(await schemaExists(name)).toBe(false);
    await withAdminClient((c) => c.query(`DROP ROLE "${name}_user"`));
  });
});

describe('DELETE /api/schema/:schemaName', () => {
  const remove = (schemaName: string, query?: Record<string, string>) =>
    call(handler, {
      method: 'DELETE',
      path: `/api/schema/${encodeURIComponent(schemaName)}`,
      query,
    });

  it('drops an empty schema together with its user', async () => {
    const name = uniqueName('gone');
    await create(name);

    const reply = await remove(name);

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ success: true, message: `Schema "${name}" deleted` });
    expect(await schemaExists(name)).toBe(false);
    expect(await roleExists(`${name}_user`)).toBe(false);
  });

  it('refuses a schema that holds objects unless cascade=true, then drops them all', async () => {
    const name = uniqueName('full');
    await create(name);
    await withAdminClient((c) => c.query(`CREATE TABLE "${name}".items (id int)`));

    const refused = await remove(name);
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('Schema not empty');
    expect(refused.body.message).toMatch(/cascade=true/);
    expect(await schemaExists(name)).toBe(true);
    expect(await roleExists(`${name}_user`)).toBe(true);

    const cascaded = await remove(name, { cascade: 'true' });
    expect(cascaded.status).toBe(200);
    expect(await schemaExists(name)).toBe(false);
    expect(await roleExists(`${name}_user`)).toBe(false);
  });

  it.each(['public', 'information_schema', 'pg_catalog', 'pg_toast'])(
    'refuses to drop the system schema %s',
    async (name) => {
      const reply = await remove(name, { cascade: 'true' });

      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('Protected schema');
      expect(await schemaExists(name)).toBe(true);
    },
  );

  it('refuses the internal schema by its name rule', async () => {
    const reply = await remove('_dbadmin', { cascade: 'true' });

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Invalid schema name');
    expect(await schemaExists('_dbadmin')).toBe(true);
  });

  it('answers 404 for a schema that does not exist', async () => {
    const reply = await remove(uniqueName('never'));

    expect(reply.status).toBe(404);
    expect(reply.body.error).toBe('Schema not found');
  });

  it('refuses a cascade value that is not a boolean', async () => {
    const name = uniqueName('flag');
    await create(name);

    const reply = await remove(name, { cascade: 'yes' });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toBe('cascade: expected true or false');
    expect(await schemaExists(name)).toBe(true);
  });
});
