import { handler as imports } from '#functions/imports';
import { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { handler as tenants } from '#functions/tenants';
import { closePool, getDatabase } from '#lib/db/pool';
import { measureDue, refreshQuotas } from '#lib/db/quotas';
import { asTenant, bearer, createKey, loginAs, sqlAs, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * Tenants' quotas through the real handlers, with other tenants at work beside them: the storage
 * quota refusing what adds data (507, naming it) while reads, deletes and drops go on, measured in
 * the background; the statement timeout on the schema's roles; the connection limit of its login.
 */
afterAll(closePool);

let full: string;
let neighbour: string;
let key: string;
beforeAll(async () => {
  full = await tenantSchema('quota');
  neighbour = await tenantSchema('quotanb');
  key = (await createKey(full, 'service_role')).key;
});

const setQuota = (schema: string, quota: Record<string, number | null>) =>
  call(tenants, {
    method: 'PUT',
    path: `/api/tenants/${schema}/quota`,
    body: { statementTimeoutMs: null, connectionLimit: null, storageBytes: null, ...quota },
  });

const insert = (schema: string, name: string, auth = {}) =>
  call(rows, { method: 'POST', path: '/api/table/items/row', body: { schema, data: { name } }, ...auth });

describe('the storage quota', () => {
  afterAll(() => setQuota(full, {}));

  it('refuses what adds data with 507 naming the quota, lets reads and deletes through, and shows on the tenant page', async () => {
    await asTenant(full, "INSERT INTO items (name) SELECT repeat('x', 500) FROM generate_series(1, 200)");
    const set = await setQuota(full, { storageBytes: 100_000 });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ storageBytes: 100_000, overStorage: true });
    expect(set.body.usedBytes).toBeGreaterThan(100_000);

    for (const auth of [{}, bearer(key)]) {
      const refused = await insert(full, 'one more', auth);
      expect(refused.status).toBe(507);
      expect(refused.body).toEqual({
        error: 'Storage quota exceeded',
        message: expect.stringContaining(`schema "${full}" uses`),
      });
      expect(refused.body.message).toContain('100000-byte storage quota');
    }
    const created = await call(tables, {
      method: 'POST',
      path: '/api/table/create',
      body: { schema: full, tableName: 'more', columns: [{ name: 'id', type: 'INTEGER' }] },
    });
    expect(created.status).toBe(507);
    const imported = await call(imports, {
      method: 'POST',
      path: '/api/table/items/import',
      query: { schema: full },
      headers: { 'content-type': 'text/csv' },
      body: 'name\nimported\n',
    });
    expect(imported.status).toBe(507);

    // A key's SQL may read, not write.
    expect((await sqlAs(key, 'SELECT count(*) AS n FROM items')).body.rows).toEqual([{ n: '201' }]);
    const written = await sqlAs(key, "INSERT INTO items (name) VALUES ('by sql')");
    expect(written.status).toBe(507);

    // Reads, deletes, and the neighbour's writes go on.
    expect((await call(tables, { path: '/api/table/items', query: { schema: full } })).status).toBe(200);
    const deleted = await call(rows, {
      method: 'DELETE',
      path: '/api/table/items/row/1',
      query: { schema: full },
    });
    expect(deleted.status).toBe(200);
    expect((await insert(neighbour, 'next door')).status).toBe(201);

    const page = await call(tenants, { path: `/api/tenants/${full}` });
    expect(page.body.quota).toMatchObject({ storageBytes: 100_000, overStorage: true });
    expect(page.body.quota.measuredAt).toEqual(expect.any(String));
    const listed = await call(tenants, { path: '/api/tenants', query: { sort: 'name' } });
    const row = listed.body.tenants.find((t: { schema: string }) => t.schema === full);
    expect(row.quota).toMatchObject({ overStorage: true });
  });

  it('is measured in the background: under it again once the rows are gone and the size read again', async () => {
    await asTenant(full, 'TRUNCATE items');
    // The next background measurement, run now rather than waited for.
    await measureDue(await getDatabase(), 0);
    await refreshQuotas(await getDatabase());
    expect((await insert(full, 'fits again')).status).toBe(201);
  });
});

describe('the measurement', () => {
  afterAll(() => setQuota(full, {}));

  it('neither waits on a tenant’s lock nor counts the schema smaller than before while it holds one', async () => {
    await asTenant(full, "INSERT INTO items (name) SELECT repeat('y', 500) FROM generate_series(1, 300)");
    const before = (await setQuota(full, { storageBytes: 10 * 1024 ** 2 })).body.usedBytes as number;
    const holder = loginAs(`${full}_user`, 'schema-pass-1');
    await holder.connect();
    try {
      await holder.query('BEGIN; LOCK TABLE items IN ACCESS EXCLUSIVE MODE; TRUNCATE items');
      const started = performance.now();
      await measureDue(await getDatabase(), 0);
      expect(performance.now() - started).toBeLessThan(5000);
      const quota = (await refreshQuotas(await getDatabase())).get(full);
      expect(quota?.usedBytes).toBeGreaterThanOrEqual(before);
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
    }
  });
});

describe('the statement timeout', () => {
  afterAll(() => setQuota(full, {}));

  it('ends a statement of the schema’s roles past it, and applies to its own login', async () => {
    expect((await setQuota(full, { statementTimeoutMs: 300 })).status).toBe(200);
    const slow = await sqlAs(key, 'SELECT pg_sleep(2)');
    expect(slow.status).toBe(400);
    expect(slow.body.message).toMatch(/statement timeout|ran longer/);
    // The neighbour is not held to it.
    const neighbourKey = (await createKey(neighbour, 'service_role')).key;
    expect((await sqlAs(neighbourKey, 'SELECT pg_sleep(0.5)')).status).toBe(200);

    const login = loginAs(`${full}_user`, 'schema-pass-1');
    await login.connect();
    try {
      expect((await login.query('SHOW statement_timeout')).rows[0].statement_timeout).toBe('300ms');
    } finally {
      await login.end();
    }
  });
});

describe('the connection limit', () => {
  afterAll(() => setQuota(full, {}));

  it('is the tenant’s login’s, applied by PostgreSQL', async () => {
    expect((await setQuota(full, { connectionLimit: 1 })).status).toBe(200);
    const limit = await withAdminClient(
      async (c) =>
        (await c.query('SELECT rolconnlimit FROM pg_roles WHERE rolname = $1', [`${full}_user`])).rows[0],
    );
    expect(limit.rolconnlimit).toBe(1);
    const first = loginAs(`${full}_user`, 'schema-pass-1');
    const second = loginAs(`${full}_user`, 'schema-pass-1');
    await first.connect();
    try {
      await expect(second.connect()).rejects.toThrow(/too many connections/);
    } finally {
      await first.end();
    }
    await setQuota(full, {});
    const back = await withAdminClient(
      async (c) =>
        (await c.query('SELECT rolconnlimit FROM pg_roles WHERE rolname = $1', [`${full}_user`])).rows[0],
    );
    expect(back.rolconnlimit).toBe(10);
  });
});

describe('PUT /api/tenants/{schema}/quota', () => {
  it('says what to fix', async () => {
    const reply = await setQuota(full, { statementTimeoutMs: 5 });
    expect(reply.status).toBe(400);
    expect(reply.body.message).toContain('statementTimeoutMs must be at least 100');
  });

  it('is the admin’s alone', async () => {
    const reply = await call(tenants, {
      method: 'PUT',
      path: `/api/tenants/${full}/quota`,
      body: { statementTimeoutMs: null, connectionLimit: null, storageBytes: null },
      ...bearer(key),
    });
    expect(reply.status).toBe(403);
  });
});
