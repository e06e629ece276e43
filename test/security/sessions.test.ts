import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { closePool } from '#lib/db/pool';
import { asTenant, createKey, sqlAs, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * A key's request must leave nothing behind on the connection it ran on: the next request (the
 * same key's, or the admin's) starts from a clean session. anon stays read-only across requests.
 */

afterAll(closePool);

let schema: string;
let anon: string;
let service: string;
beforeAll(async () => {
  schema = await tenantSchema('sess');
  anon = (await createKey(schema, 'anon')).key;
  service = (await createKey(schema, 'service_role')).key;
});

const count = (sql: string, values: unknown[] = []) =>
  withAdminClient(async (c) => Number((await c.query(sql, values)).rows[0].n));

describe('anon is read-only across requests', () => {
  it('an open transaction from BEGIN READ WRITE does not carry a write into a later request', async () => {
    const oid = 900_000 + Math.floor(Math.random() * 90_000);

    const replies = [
      await sqlAs(anon, 'BEGIN READ WRITE'),
      await sqlAs(anon, `SELECT lo_create(${oid})`),
      await sqlAs(anon, 'COMMIT'),
    ];

    expect(replies.map((r) => r.status).every((status) => status < 500)).toBe(true);
    expect(await count('SELECT count(*) AS n FROM pg_largeobject_metadata WHERE oid = $1', [oid])).toBe(0);
  });

  it('refuses a write in the request itself, whatever the SQL sets first', async () => {
    const writes = [
      "SELECT set_config('transaction_read_only', 'off', false), lo_create(0)",
      `INSERT INTO "${schema}".items (name) VALUES ('anon was here')`,
      'SET TRANSACTION READ WRITE',
    ];
    for (const sql of writes) await sqlAs(anon, sql);

    expect(await count(`SELECT count(*) AS n FROM "${schema}".items WHERE name = 'anon was here'`)).toBe(0);
    expect((await sqlAs(anon, 'SELECT current_setting($$transaction_read_only$$) AS ro')).body.rows).toEqual([
      { ro: 'on' },
    ]);
  });
});

describe('nothing a key does outlives its request', () => {
  it('a table lock taken inside a BEGIN is released when the request ends', async () => {
    await sqlAs(service, 'BEGIN');
    await sqlAs(service, `LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`);

    expect(
      await count('SELECT count(*) AS n FROM pg_locks WHERE relation = $1::regclass', [`"${schema}".items`]),
    ).toBe(0);
    expect(
      await count("SELECT count(*) AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'"),
    ).toBe(0);
  });

  it('an advisory lock, LISTEN, a temporary table and a setting are gone before the next request', async () => {
    const lock = 7_000_000 + Math.floor(Math.random() * 1_000_000);
    for (const sql of [
      `SELECT pg_advisory_lock(${lock})`,
      'LISTEN tenant_channel',
      'CREATE TEMP TABLE kept (a int)',
      "SELECT set_config('search_path', 'pg_catalog', false)",
    ]) {
      expect((await sqlAs(service, sql)).status).toBe(200);
    }

    expect(
      await count("SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1", [lock]),
    ).toBe(0);
    expect(
      await count("SELECT count(*) AS n FROM pg_class WHERE relname = 'kept' AND relpersistence = 't'"),
    ).toBe(0);
    const after = await sqlAs(
      service,
      'SELECT current_setting($$search_path$$) AS path, pg_listening_channels() AS ch',
    );
    expect(after.body.rows).toEqual([]);
    const path = await sqlAs(service, 'SELECT current_setting($$search_path$$) AS path');
    expect(path.body.rows[0].path).toContain(schema);
  });

  it('a client encoding, time zone or date style the SQL set is gone before the next request', async () => {
    // PgBouncer keeps these per client, as the server last reported them, and sets them again on
    // the next server it gives that client: the reset's reports must put them back.
    const set = await sqlAs(
      service,
      `SELECT set_config('client_encoding', 'LATIN1', false), set_config('TimeZone', 'Pacific/Chatham', false),
              set_config('DateStyle', 'SQL, DMY', false)`,
    );
    expect(set.status).toBe(200);

    const after = await sqlAs(
      service,
      `SELECT current_setting('client_encoding') AS enc, current_setting('TimeZone') AS tz,
              current_setting('DateStyle') AS ds`,
    );

    expect(after.body.rows[0]).toEqual({
      enc: 'UTF8',
      tz: expect.not.stringMatching(/Chatham/),
      ds: 'ISO, MDY',
    });
  });

  it('a transaction the key commits or prepares itself is refused, not left behind', async () => {
    const replies = [await sqlAs(service, 'COMMIT'), await sqlAs(service, "PREPARE TRANSACTION 'kept'")];

    expect(replies.map((r) => r.status)).toEqual([400, 400]);
    expect(await count('SELECT count(*) AS n FROM pg_prepared_xacts')).toBe(0);
  });

  it('a transaction the key ends and chains to a new one is refused too', async () => {
    // AND CHAIN leaves a transaction open, so it is not seen as ended; the chained one would run
    // without the statement timeout we set in ours.
    const replies = [await sqlAs(service, 'COMMIT AND CHAIN'), await sqlAs(service, 'ROLLBACK AND CHAIN')];

    expect(replies.map((r) => [r.status, r.body.error])).toEqual([
      [400, 'Transaction control not allowed'],
      [400, 'Transaction control not allowed'],
    ]);
  });
});

/**
 * Code a tenant runs at COMMIT (a deferred constraint trigger) changes the session after every
 * statement of ours but the commit itself: the reset that follows the commit must still undo it.
 */
describe('what a tenant’s code does at COMMIT does not outlive the request', () => {
  const lock = 8_000_000 + Math.floor(Math.random() * 1_000_000);
  beforeAll(async () => {
    await asTenant(
      schema,
      `CREATE TABLE at_commit (id serial PRIMARY KEY, a int);
       CREATE FUNCTION at_commit_plant() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM pg_catalog.set_config('search_path', 'pg_catalog', false);
         PERFORM pg_catalog.set_config('statement_timeout', '0', false);
         PERFORM pg_catalog.pg_advisory_lock(${lock});
         EXECUTE 'LISTEN at_commit_channel';
         CREATE TEMP TABLE IF NOT EXISTS commit_kept (a int);
         EXECUTE 'PREPARE commit_kept_plan AS SELECT 1';
         RETURN NULL;
       END $$;
       CREATE CONSTRAINT TRIGGER at_commit_plant AFTER INSERT ON at_commit
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION at_commit_plant();`,
    );
  });

  const leftBehind = async (key: string) => {
    const seen = await sqlAs(
      key,
      `SELECT pg_catalog.current_setting('search_path') AS path,
              pg_catalog.current_setting('statement_timeout') AS timeout,
              (SELECT count(*)::int FROM pg_catalog.pg_listening_channels()) AS channels,
              (SELECT count(*)::int FROM pg_catalog.pg_prepared_statements) AS plans,
              (SELECT count(*)::int FROM pg_catalog.pg_class WHERE relname = 'commit_kept' AND relpersistence = 't') AS temp`,
    );
    const locks = await count(
      "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1",
      [lock],
    );
    return { ...seen.body.rows[0], locks };
  };
  const clean = (path: string) => ({
    path,
    timeout: expect.not.stringMatching(/^0/),
    channels: 0,
    plans: 0,
    temp: 0,
    locks: 0,
  });

  it('through a key’s SQL', async () => {
    expect((await sqlAs(service, 'INSERT INTO at_commit (a) VALUES (1)')).status).toBe(200);

    expect(await leftBehind(service)).toEqual(clean(expect.stringContaining(schema)));
  });

  it('through the admin’s SQL', async () => {
    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'INSERT INTO at_commit (a) VALUES (2)', schema },
    });
    expect(reply.status).toBe(200);

    expect(await leftBehind(service)).toEqual(clean(expect.stringContaining(schema)));
  });

  it('through an anon key’s read, whose reset runs read-only', async () => {
    const planted = await sqlAs(anon, "SELECT pg_catalog.set_config('search_path', 'pg_catalog', false)");
    expect(planted.status).toBe(200);

    expect(await leftBehind(anon)).toEqual(clean(expect.stringContaining(schema)));
  });

  it('through a row insert', async () => {
    const reply = await call(rows, {
      method: 'POST',
      path: '/api/table/at_commit/row',
      body: { data: { a: 3 }, schema },
    });
    expect(reply.status).toBe(201);

    expect(await leftBehind(service)).toEqual(clean(expect.stringContaining(schema)));
  });
});
