import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { type Host, startHost } from '#test/support/host';
import { ADMIN, basic } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { type PgBouncer, pgbouncerInstalled, startPgBouncer } from '#test/support/pgbouncer';
import { buildProduction } from '../../bin/build';

/**
 * `npm start`'s production build behind Debian's PgBouncer in transaction mode, set up as the
 * README's "Through PgBouncer" says: DATABASE_URL naming the pooler, DATABASE_POOL_MODE=transaction.
 * Every function runs in one process from a bundle of its own, sharing the process's pools: what
 * one bundle made (a pooled connection, a role's pool) must work in every other.
 */
jest.setTimeout(300_000);

const superuserUrl = process.env.DBADMIN_TEST_SUPERUSER_URL;
const runs = pgbouncerInstalled() && superuserUrl && process.env.DATABASE_POOL_MODE === undefined;
const suite = runs ? describe : describe.skip;
if (!runs) console.warn('test/e2e/pgbouncer: skipped (no /usr/sbin/pgbouncer, or not the embedded server)');

const built = resolve('.pgbouncer-e2e-build');
let pooler: PgBouncer;
let host: Host;

suite('the production host through PgBouncer', () => {
  beforeAll(async () => {
    pooler = await startPgBouncer({
      databaseUrl: process.env.DATABASE_URL as string,
      superuserUrl: superuserUrl as string,
      maxDbConnections: 20,
    });
    await buildProduction({ dir: built, functions: {} });
    host = await startHost(
      { ...process.env, DATABASE_URL: pooler.url, DATABASE_POOL_MODE: 'transaction' },
      built,
    );
  }, 240_000);
  afterAll(async () => {
    await host?.stop();
    await pooler?.stop();
    rmSync(built, { recursive: true, force: true });
  });

  async function send(method: string, path: string, body?: unknown, auth = basic(ADMIN)) {
    const response = await fetch(`${host.base}${path}`, {
      method,
      headers: { authorization: auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    const type = response.headers.get('content-type') ?? '';
    return { status: response.status, body: type.includes('json') ? JSON.parse(text) : text };
  }

  it("serves a tenant's day across its functions, and holds the server connections to the cap", async () => {
    const schema = uniqueName('bouncer');
    expect(
      (await send('POST', '/api/schema/create', { schemaName: schema, password: 'schema-pass-1' })).status,
    ).toBe(201);
    const made = await send('POST', '/api/query', {
      schema,
      sql: `CREATE TABLE items (id int PRIMARY KEY, name text, born date, span interval);
            INSERT INTO items VALUES (1, 'Ann', '2001-02-03', '1 day 02:00'), (2, 'Bo', NULL, NULL)`,
    });
    expect(made.status).toBe(200);

    const page = await send('GET', `/api/table/items?schema=${schema}&filter=name.eq.Ann`);
    const exported = await send('GET', `/api/table/items/export?schema=${schema}&format=csv&filter=id.gt.1`);
    const index = await send('POST', '/api/table/items/indexes', {
      schema,
      columns: ['name'],
      concurrently: true,
    });
    const key = await send('POST', `/api/project/${schema}/keys`, { keyName: 'reader', keyType: 'anon' });
    const read = await send('GET', '/api/table/items', undefined, `Bearer ${key.body.key}`);
    const written = await send('POST', '/api/table/items/row', { schema, data: { id: 3, name: 'Cy' } });
    const who = await send('POST', '/api/query', {
      schema,
      sql: "SELECT current_user AS who, current_setting('search_path') AS path",
    });

    expect(page).toMatchObject({
      status: 200,
      body: { data: [{ id: 1, name: 'Ann', born: '2001-02-03', span: '1 day 02:00:00' }] },
    });
    expect(exported).toEqual({ status: 200, body: 'id,name,born,span\n2,Bo,,\n' });
    expect(index.status).toBe(200);
    expect(key.status).toBe(201);
    expect(read).toMatchObject({ status: 200, body: { total: 2 } });
    expect(written.status).toBe(201);
    expect(who.body.rows).toEqual([{ who: `${schema}_owner`, path: schema }]);
    expect(await pooler.serverConnections()).toBeLessThanOrEqual(20);
    expect((await send('DELETE', `/api/schema/${schema}?cascade=true`)).status).toBe(200);
  });
});
