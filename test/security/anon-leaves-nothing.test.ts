import pg from 'pg';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { asTenant, bearer, createKey, sqlAs, tenantSchema } from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * An anon key is read-only, and it ends up in public web pages: nothing it runs may outlive its
 * request. A READ ONLY transaction is not enough before PostgreSQL 17: lo_create() and
 * lo_from_bytea() work in one, and a committed large object stays (anyone with the key could fill
 * the disk); NOTIFY and pg_notify() reach other sessions at commit. Its transactions are rolled back,
 * never committed. The security suite runs on PostgreSQL 15 as well as 17 (DBADMIN_TEST_POSTGRES).
 */
afterAll(closePool);

const largeObjects = () =>
  withAdminClient(async (c) =>
    Number((await c.query('SELECT count(*) AS n FROM pg_catalog.pg_largeobject_metadata')).rows[0].n),
  );

/** A session of the service's that listens on `channel`, and what it has heard. */
async function listen(channel: string): Promise<{ heard: string[]; stop: () => Promise<void> }> {
  const client = new pg.Client({ connectionString: directUrl() });
  await client.connect();
  const heard: string[] = [];
  client.on('notification', (message) => heard.push(message.payload ?? ''));
  await client.query(`LISTEN ${channel}`);
  return {
    heard,
    stop: async () => {
      await client.query('SELECT 1'); // a round trip: notifications sent before it have arrived
      await client.end();
    },
  };
}

describe('nothing an anon key runs outlives its request', () => {
  let schema: string;
  let anon: string;
  beforeAll(async () => {
    schema = await tenantSchema('anonrb');
    ({ key: anon } = await createKey(schema, 'anon', 'public-web-page'));
  });

  it.each([
    ["SELECT pg_catalog.lo_from_bytea(0, '\\x41')"],
    ['SELECT pg_catalog.lo_create(0)'],
    ["SELECT pg_catalog.lo_from_bytea(0, '\\x41') FROM pg_catalog.generate_series(1, 3)"],
  ])('leaves no large object behind: %s', async (sql) => {
    const before = await largeObjects();

    await sqlAs(anon, sql);

    expect(await largeObjects()).toBe(before);
  });

  it('sends no notification to other sessions', async () => {
    const listener = await listen('anon_rb_channel');
    try {
      await sqlAs(anon, "SELECT pg_catalog.pg_notify('anon_rb_channel', 'from the anon key')");
      await sqlAs(anon, "NOTIFY anon_rb_channel, 'from the anon key'");
    } finally {
      await listener.stop();
    }

    expect(listener.heard).toEqual([]);
  });

  it('leaves nothing behind through code planted in a row policy of a table it reads', async () => {
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".blob() RETURNS oid LANGUAGE sql AS $$ SELECT pg_catalog.lo_from_bytea(0, '\\x41') $$;
       CREATE TABLE "${schema}".blobs (id int PRIMARY KEY);
       INSERT INTO "${schema}".blobs VALUES (1), (2);
       ALTER TABLE "${schema}".blobs ENABLE ROW LEVEL SECURITY;
       CREATE POLICY everyone ON "${schema}".blobs USING ("${schema}".blob() IS NOT NULL);
       GRANT SELECT ON "${schema}".blobs TO PUBLIC;`,
    );
    const before = await largeObjects();

    await call(tables, { path: '/api/table/blobs', ...bearer(anon) });
    await call(tables, { path: '/api/table/blobs/export', query: { format: 'csv' }, ...bearer(anon) });

    expect(await largeObjects()).toBe(before);
  });

  // pg_logical_emit_message(false, ...) writes to the WAL at once, outside any transaction: a
  // rollback cannot take it back, and logical decoding (CDC) delivers it. Revoked from PUBLIC where
  // dbadmin provisions the server (the embedded one, the container's); the README says how elsewhere.
  (process.env.DBADMIN_TEST_SUPERUSER_URL ? it : it.skip)(
    'cannot write messages into the WAL, which no rollback takes back',
    async () => {
      const reply = await sqlAs(anon, "SELECT pg_catalog.pg_logical_emit_message(false, 'p', 'x')");

      expect(reply.status).toBe(403);
      expect(reply.body.message).toMatch(/permission denied for function pg_logical_emit_message/);
    },
  );

  it('still reads: a read-only key’s SQL answers as before', async () => {
    const reply = await sqlAs(anon, `SELECT name FROM "${schema}".items`);

    expect(reply.status).toBe(200);
    expect(reply.body.rows).toEqual([{ name: 'first' }]);
  });
});
