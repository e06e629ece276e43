import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { handler as rows } from '#functions/rows';
import { closePool } from '#lib/db/pool';
import { recordScope } from '#lib/http/idempotency';
import { asTenant, bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { type Call, call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

/**
 * The records of Idempotency-Keys against a hostile tenant: its own database login, code it
 * planted where the admin writes, and its API keys. None of them may read a record (another
 * principal's answers), plant one (a forged answer the admin's retry would replay), or make the
 * admin's retry answer "already applied" for a change that never committed.
 */
afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await tenantSchema('idemsec');
});

const ROW = 'POST /api/table/{tableName}/row';
const insert = (key: string, data: Record<string, unknown>, table = 'items', auth: Partial<Call> = {}) =>
  call(rows, {
    method: 'POST',
    path: `/api/table/${table}/row`,
    body: { schema, data },
    ...auth,
    headers: { ...auth.headers, 'Idempotency-Key': key },
  });
const named = (name: string, table = 'items') =>
  withAdminClient(async (c) =>
    Number(
      (await c.query(`SELECT count(*) AS n FROM "${schema}"."${table}" WHERE name = $1`, [name])).rows[0].n,
    ),
  );
/** What the tenant's own login gets for `sql`: the error's message, or 'ran'. */
const tenantTries = (sql: string) =>
  asTenant(schema, sql).then(
    () => 'ran',
    (error: Error) => error.message,
  );

describe('the tenant’s own database login', () => {
  beforeAll(async () => {
    expect((await insert(randomUUID(), { name: uniqueName('kept') })).status).toBe(201);
  });

  it.each([
    'SELECT * FROM _dbadmin.idempotency_keys',
    `INSERT INTO _dbadmin.idempotency_keys (scope, fingerprint, claim, state, lease_until, status, answer, expires_at)
       VALUES ('\\x00', '\\x00', gen_random_uuid(), 'done', now(), 201, '{"forged":true}', now() + interval '1 day')`,
    `UPDATE _dbadmin.idempotency_keys SET answer = '{"forged":true}'`,
    'DELETE FROM _dbadmin.idempotency_keys',
    'TRUNCATE _dbadmin.idempotency_keys',
    'DROP TABLE _dbadmin.idempotency_keys',
  ])('is refused: %s', async (sql) => {
    expect(await tenantTries(sql)).toMatch(/permission denied|must be owner/);
  });
});

describe('code planted where the admin writes with an Idempotency-Key', () => {
  it('can neither read nor plant a record', async () => {
    await asTenant(
      schema,
      `CREATE TABLE tries (what text, outcome text);
       CREATE TABLE watched (id serial PRIMARY KEY, name text);
       CREATE FUNCTION meddle() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         BEGIN PERFORM count(*) FROM _dbadmin.idempotency_keys; INSERT INTO tries VALUES ('read', 'ran');
         EXCEPTION WHEN OTHERS THEN INSERT INTO tries VALUES ('read', SQLERRM); END;
         BEGIN UPDATE _dbadmin.idempotency_keys SET answer = '{"forged":true}'; INSERT INTO tries VALUES ('plant', 'ran');
         EXCEPTION WHEN OTHERS THEN INSERT INTO tries VALUES ('plant', SQLERRM); END;
         RETURN NEW;
       END $$;
       CREATE TRIGGER meddle AFTER INSERT ON watched FOR EACH ROW EXECUTE FUNCTION meddle();
       CREATE CONSTRAINT TRIGGER meddle_late AFTER INSERT ON watched DEFERRABLE INITIALLY DEFERRED
         FOR EACH ROW EXECUTE FUNCTION meddle()`,
    );
    const key = randomUUID();
    const name = uniqueName('watched');

    const first = await insert(key, { name }, 'watched');
    const again = await insert(key, { name }, 'watched');

    expect(first.status).toBe(201);
    expect(again).toMatchObject({ status: 201, body: first.body });
    const tries = await withAdminClient(
      async (c) => (await c.query(`SELECT what, outcome FROM "${schema}".tries ORDER BY what`)).rows,
    );
    expect(tries).toHaveLength(4);
    for (const attempt of tries) expect(attempt.outcome).toMatch(/permission denied/);
  });
});

describe('an API key of the schema', () => {
  it('sending the admin’s Idempotency-Key gets its own answer, and the admin’s retry still gets the admin’s', async () => {
    const writer = await createKey(schema, 'service_role', uniqueName('writer'));
    const key = randomUUID();
    const mine = uniqueName('admins');
    const theirs = uniqueName('tenants');

    const byAdmin = await insert(key, { name: mine });
    const byTenant = await insert(key, { name: theirs }, 'items', bearer(writer.key));
    const adminAgain = await insert(key, { name: mine });

    expect(byAdmin.status).toBe(201);
    expect(byTenant.status).toBe(201);
    expect(byTenant.body.row.name).toBe(theirs);
    expect(adminAgain).toMatchObject({ status: 201, body: byAdmin.body });
    expect(await named(mine)).toBe(1);
  });
});

describe('a copy of the admin’s sealed audit entry', () => {
  it('from a change that rolled back, written by the tenant, never makes the admin’s retry answer "Already applied"', async () => {
    // The tenant fails the admin's COMMIT while a switch row is there (a deferred check it owns).
    await asTenant(
      schema,
      `CREATE TABLE switch (on_ boolean);
       INSERT INTO switch VALUES (true);
       CREATE TABLE held (id serial PRIMARY KEY, name text);
       CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN IF EXISTS (SELECT FROM switch) THEN RAISE EXCEPTION 'refused by the tenant'; END IF; RETURN NULL; END $$;
       CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON held DEFERRABLE INITIALLY DEFERRED
         FOR EACH ROW EXECUTE FUNCTION refuse()`,
    );
    // Our COMMIT's text, as planted code reads it with current_query() (test/security/audit); and
    // the database not answering the service when it asks what became of the transaction.
    const seen: string[] = [];
    const query = pg.Client.prototype.query;
    const spy = jest.spyOn(pg.Client.prototype, 'query').mockImplementation(function (
      this: pg.Client,
      ...args: unknown[]
    ) {
      const first = args[0] as string | { text?: string };
      const text = typeof first === 'string' ? first : first?.text;
      if (text?.includes('INSERT INTO _dbadmin_audit.inbox')) seen.push(text);
      if (text?.includes('pg_xact_status')) {
        const cut = new Error('Connection terminated unexpectedly');
        // pg-pool passes a callback; a client used directly answers with a promise.
        const callback = args.find((arg): arg is (error: Error) => void => typeof arg === 'function');
        if (!callback) return Promise.reject(cut);
        process.nextTick(() => callback(cut));
        return undefined;
      }
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as never);
    const key = randomUUID();
    const name = uniqueName('held');

    let first: Awaited<ReturnType<typeof insert>>;
    try {
      first = await insert(key, { name }, 'held');
    } finally {
      spy.mockRestore();
    }
    const copy = seen.at(-1)?.replace(/;\s*COMMIT\s*$/i, '') ?? '';
    const planted = await tenantTries(copy);
    await tenantTries('DELETE FROM switch');
    // The service never learnt how the first ended: its claim stands, and its time is now up.
    const [held] = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `UPDATE _dbadmin.idempotency_keys SET lease_until = now() - interval '1 second'
              WHERE scope = $1 RETURNING state`,
            [recordScope({ kind: 'admin' }, ROW, key)],
          )
        ).rows,
    );
    const retried = await insert(key, { name }, 'held');

    expect(first.status).toBe(400);
    expect(copy).toContain('_dbadmin_audit.inbox');
    expect(planted).toBe('ran');
    expect(held).toEqual({ state: 'running' });
    expect(retried.status).toBe(201);
    expect(await named(name, 'held')).toBe(1);
  });
});
