import { closePool } from '#lib/db/pool';
import { createKey, sqlAs, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';

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

  it('a transaction the key commits or prepares itself is refused, not left behind', async () => {
    const replies = [await sqlAs(service, 'COMMIT'), await sqlAs(service, "PREPARE TRANSACTION 'kept'")];

    expect(replies.map((r) => r.status)).toEqual([400, 400]);
    expect(await count('SELECT count(*) AS n FROM pg_prepared_xacts')).toBe(0);
  });
});
