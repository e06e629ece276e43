import { handler as keys } from '#functions/keys';
import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { handler as schemas } from '#functions/schemas';
import { handler as tables } from '#functions/tables';
import { settleKeyTouches } from '#lib/admin/keys';
import { closePool } from '#lib/db/pool';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

afterAll(closePool);

let mine: string;
let other: string;
let service: string;
let anon: string;

const createKey = (schema: string, body: Record<string, unknown>) =>
  call(keys, { method: 'POST', path: `/api/project/${schema}/keys`, body });
const bearer = (key: string) => ({ auth: null, headers: { authorization: `Bearer ${key}` } });
const sqlAs = (key: string, sql: string, extra: Record<string, unknown> = {}) =>
  call(query, { method: 'POST', path: '/api/query', body: { sql, ...extra }, ...bearer(key) });

beforeAll(async () => {
  mine = await freshSchema('keyed');
  other = await freshSchema('other');
  await withAdminClient((c) =>
    c.query(`
      CREATE TABLE "${other}".secret (id int PRIMARY KEY, v text); INSERT INTO "${other}".secret VALUES (1, 'top secret');`),
  );
  await call(tables, {
    method: 'POST',
    path: '/api/table/create',
    body: {
      tableName: 'items',
      schema: mine,
      columns: [
        { name: 'id', type: 'SERIAL', primaryKey: true },
        { name: 'name', type: 'TEXT' },
      ],
    },
  });
  await call(rows, {
    method: 'POST',
    path: '/api/table/items/row',
    body: { data: { name: 'first' }, schema: mine },
  });
  service = (await createKey(mine, { keyName: 'server', keyType: 'service_role' })).body.key;
  anon = (await createKey(mine, { keyName: 'browser' })).body.key;
});

describe('key management', () => {
  it('creates a key shown once: 64 hex characters, stored only as a hash', async () => {
    const reply = await createKey(mine, { keyName: 'ci', keyType: 'service_role' });

    expect(reply.status).toBe(201);
    expect(reply.body).toEqual({
      id: expect.any(Number),
      key: expect.stringMatching(/^[0-9a-f]{64}$/),
      keyPrefix: reply.body.key.slice(0, 8),
      keyName: 'ci',
      keyType: 'service_role',
      schemaName: mine,
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    const stored = await withAdminClient((c) =>
      c.query('SELECT * FROM _dbadmin.api_keys WHERE id = $1', [reply.body.id]),
    );
    expect(JSON.stringify(stored.rows[0])).not.toContain(reply.body.key);
  });

  it('defaults to anon and refuses other types, empty and repeated names', async () => {
    expect((await createKey(mine, { keyName: 'default-type' })).body.keyType).toBe('anon');
    const wrongType = await createKey(mine, { keyName: 'x', keyType: 'admin' });
    const empty = await createKey(mine, { keyName: '  ' });
    const repeated = await createKey(mine, { keyName: 'server' });

    expect(wrongType.status).toBe(400);
    expect(wrongType.body.message).toMatch(/anon or service_role/);
    expect(empty.status).toBe(400);
    expect(repeated.status).toBe(400);
    expect(repeated.body.error).toBe('Key name exists');
  });

  it('answers 404 for a schema that does not exist', async () => {
    expect((await createKey('no_such_schema', { keyName: 'x' })).status).toBe(404);
  });

  it('lists keys in snake_case without the key or its hash', async () => {
    const reply = await call(keys, { path: `/api/project/${mine}/keys` });

    expect(reply.status).toBe(200);
    const server = reply.body.find((k: { key_name: string }) => k.key_name === 'server');
    expect(Object.keys(server).sort()).toEqual(
      ['created_at', 'id', 'is_active', 'key_name', 'key_prefix', 'key_type', 'last_used_at'].sort(),
    );
    expect(server.key_prefix).toBe(service.slice(0, 8));
    expect(JSON.stringify(reply.body)).not.toContain(service);
  });

  it('deletes a key, which stops working at once; a second delete is 404', async () => {
    const created = await createKey(mine, { keyName: 'short-lived', keyType: 'service_role' });
    expect((await call(tables, { path: '/api/tables', ...bearer(created.body.key) })).status).toBe(200);

    const deleted = await call(keys, {
      method: 'DELETE',
      path: `/api/project/${mine}/keys/${created.body.id}`,
    });
    const again = await call(keys, {
      method: 'DELETE',
      path: `/api/project/${mine}/keys/${created.body.id}`,
    });
    const used = await call(tables, { path: '/api/tables', ...bearer(created.body.key) });

    expect(deleted.status).toBe(200);
    expect(again.status).toBe(404);
    expect(used.status).toBe(401);
    expect(used.body).toEqual({ error: 'Unauthorized', message: 'Invalid API key' });
  });
});

describe('bearer authentication', () => {
  it.each([
    ['an unknown key', 'f'.repeat(64)],
    ['a key of the wrong shape', 'not-a-key'],
    ['an empty bearer', ''],
  ])('answers 401 Invalid API key for %s', async (_, key) => {
    const reply = await call(tables, { path: '/api/tables', ...bearer(key) });

    expect(reply.status).toBe(401);
    expect(reply.body).toEqual({ error: 'Unauthorized', message: 'Invalid API key' });
  });

  it('answers 401 for an inactive key', async () => {
    const created = await createKey(mine, { keyName: 'inactive' });
    await withAdminClient((c) =>
      c.query('UPDATE _dbadmin.api_keys SET is_active = false WHERE id = $1', [created.body.id]),
    );

    expect((await call(tables, { path: '/api/tables', ...bearer(created.body.key) })).status).toBe(401);
  });

  it('records when a key was last used, in the background', async () => {
    await call(tables, { path: '/api/tables', ...bearer(anon) });
    await settleKeyTouches();

    const { rows: found } = await withAdminClient((c) =>
      c.query(`SELECT last_used_at FROM _dbadmin.api_keys WHERE key_name = 'browser' AND schema_name = $1`, [
        mine,
      ]),
    );
    expect(found[0].last_used_at).toBeInstanceOf(Date);
  });
});

describe('scope', () => {
  it('works in its own schema without naming it, and with it named', async () => {
    const implicit = await call(tables, { path: '/api/tables', ...bearer(anon) });
    const named = await call(tables, { path: '/api/table/items', query: { schema: mine }, ...bearer(anon) });

    expect(implicit.body).toEqual(['items']);
    expect(named.status).toBe(200);
    expect(named.body.data).toEqual([{ id: 1, name: 'first' }]);
  });

  it.each([
    [
      'a query-string schema',
      () => call(tables, { path: '/api/table/secret', query: { schema: other }, ...bearer(service) }),
    ],
    ['a body schema', () => sqlAs(service, 'SELECT 1', { schema: other })],
    [
      'a schema in a write',
      () =>
        call(rows, {
          method: 'POST',
          path: '/api/table/secret/row',
          body: { data: { id: 2 }, schema: other },
          ...bearer(service),
        }),
    ],
  ])('answers 403 Forbidden for %s naming another schema', async (_, send) => {
    const reply = await send();

    expect(reply.status).toBe(403);
    expect(reply.body.error).toBe('Forbidden');
  });

  it.each([
    ['list schemas', { path: '/api/schemas' }, schemas],
    [
      'create a schema',
      {
        method: 'POST',
        path: '/api/schema/create',
        body: { schemaName: 'keymade', password: 'long-enough' },
      },
      schemas,
    ],
    ['delete its schema', { method: 'DELETE', path: `/api/schema/MINE` }, schemas],
    ['list keys', { path: '/api/project/MINE/keys' }, keys],
    ['create keys', { method: 'POST', path: '/api/project/MINE/keys', body: { keyName: 'escalate' } }, keys],
  ] as const)('refuses a service_role key that tries to %s', async (_, request, handler) => {
    const reply = await call(handler, {
      ...request,
      path: request.path.replace('MINE', mine),
      ...bearer(service),
    });

    expect(reply.status).toBe(403);
    expect(reply.body.error).toBe('Forbidden');
  });
});

describe('anon keys', () => {
  it('read tables and run read-only SQL', async () => {
    expect((await call(tables, { path: '/api/schema', ...bearer(anon) })).status).toBe(200);
    const reply = await sqlAs(anon, 'SELECT name FROM items');
    expect(reply.body.rows).toEqual([{ name: 'first' }]);
  });

  it.each([
    [
      'insert a row',
      () =>
        call(rows, {
          method: 'POST',
          path: '/api/table/items/row',
          body: { data: { name: 'x' } },
          ...bearer(anon),
        }),
    ],
    [
      'create a table',
      () =>
        call(tables, {
          method: 'POST',
          path: '/api/table/create',
          body: { tableName: 't', columns: [{ name: 'a', type: 'TEXT' }] },
          ...bearer(anon),
        }),
    ],
    ['write through SQL', () => sqlAs(anon, "INSERT INTO items (name) VALUES ('sneaky')")],
    ['take a sequence value', () => sqlAs(anon, "SELECT nextval('items_id_seq')")],
    [
      'switch the transaction to read-write and write',
      () => sqlAs(anon, "WITH x AS (INSERT INTO items (name) VALUES ('rw') RETURNING 1) SELECT * FROM x"),
    ],
  ])('cannot %s (403)', async (_, send) => {
    const reply = await send();

    expect(reply.status).toBe(403);
  });

  it('run in read-only transactions, in their schema', async () => {
    const reply = await sqlAs(
      anon,
      "SELECT current_setting('transaction_read_only') AS ro, current_schema() AS s",
    );

    expect(reply.body.rows).toEqual([{ ro: 'on', s: mine }]);
  });

  it('gains nothing from SET TRANSACTION READ WRITE', async () => {
    const set = await sqlAs(anon, 'SET TRANSACTION READ WRITE');
    const write = await sqlAs(anon, "INSERT INTO items (name) VALUES ('after')");

    expect(set.status).toBeLessThan(500);
    expect(write.status).toBe(403);
  });
});

describe('service_role keys', () => {
  it('change data and structure in their own schema', async () => {
    const created = await call(tables, {
      method: 'POST',
      path: '/api/table/create',
      body: {
        tableName: 'made_by_key',
        columns: [
          { name: 'id', type: 'SERIAL', primaryKey: true },
          { name: 'v', type: 'TEXT' },
        ],
      },
      ...bearer(service),
    });
    const inserted = await call(rows, {
      method: 'POST',
      path: '/api/table/made_by_key/row',
      body: { data: { v: 'a' } },
      ...bearer(service),
    });
    const viaSql = await sqlAs(service, "INSERT INTO made_by_key (v) VALUES ('b') RETURNING v");
    const readByAnon = await sqlAs(anon, 'SELECT count(*)::int AS n FROM made_by_key');

    expect(created.status).toBe(201);
    expect(inserted.status).toBe(201);
    expect(viaSql.body.rows).toEqual([{ v: 'b' }]);
    expect(readByAnon.body.rows).toEqual([{ n: 2 }]);
  });
});

describe('escape attempts through SQL', () => {
  const attempts: [string, string][] = [
    ['read another schema', `SELECT * FROM "OTHER".secret`],
    ['write another schema', `INSERT INTO "OTHER".secret VALUES (9, 'x')`],
    ['SET ROLE to the admin', 'SET ROLE postgres'],
    ['SET SESSION AUTHORIZATION', 'SET SESSION AUTHORIZATION postgres'],
    ['set_config role', "SELECT set_config('role', 'postgres', false)"],
    [
      'a DO block',
      `DO $$ BEGIN PERFORM set_config('role', 'postgres', false); INSERT INTO "OTHER".secret VALUES (8, 'x'); END $$`,
    ],
    ['COMMIT then more SQL', `COMMIT; SELECT * FROM "OTHER".secret`],
    ['read _dbadmin', 'SELECT key_hash FROM _dbadmin.api_keys'],
    ['read a server file', "SELECT pg_read_file('/etc/passwd')"],
    ['COPY to a server file', "COPY (SELECT 1) TO '/tmp/dbadmin-escape'"],
    ['grant itself the admin role', 'GRANT postgres TO CURRENT_USER'],
  ];

  it.each(attempts)(
    'fails to %s, leaks nothing, and leaves the next request unaffected',
    async (_, template) => {
      for (const key of [service, anon]) {
        const reply = await sqlAs(key, template.replaceAll('OTHER', other));

        expect([400, 403]).toContain(reply.status);
        expect(JSON.stringify(reply.body)).not.toMatch(/top secret|root:|\\\\x/);
        const after = await sqlAs(key, 'SELECT current_user AS who, session_user AS login');
        // svc logs in as itself and works as the schema's owner; anon is itself.
        expect(after.body.rows[0]).toEqual(
          key === anon
            ? { who: `${mine}_anon`, login: `${mine}_anon` }
            : { who: `${mine}_owner`, login: `${mine}_svc` },
        );
      }
      const secret = await withAdminClient((c) =>
        c.query(`SELECT count(*)::int AS n FROM "${other}".secret`),
      );
      expect(secret.rows[0].n).toBe(1);
    },
  );

  it('cannot keep a role it RESETs or SETs for the next request', async () => {
    await sqlAs(service, 'RESET ROLE');
    await sqlAs(service, `SET ROLE "${mine}_svc"`);

    const after = await sqlAs(service, 'SELECT current_user AS who');
    expect(after.body.rows[0].who).toBe(`${mine}_owner`);
  });
});
