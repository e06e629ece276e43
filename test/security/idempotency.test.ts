import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { handler as keys } from '#functions/keys';
import { handler as rows } from '#functions/rows';
import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { recordScope } from '#lib/http/idempotency';
import { asTenant, bearer, createKey, tenantSchema } from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { type Call, call, httpEvent, lambdaContext } from '#test/support/http';
import { losingStatements } from '#test/support/lost-answer';
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

describe('a write held in its COMMIT by code the tenant planted', () => {
  it('does not make a retry with its key wait on it: the retry answers 409 in progress at once', async () => {
    const gate = 0x1d_e0_01;
    await asTenant(
      schema,
      `CREATE TABLE held_commit (id serial PRIMARY KEY, name text);
       CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM pg_advisory_xact_lock(${gate}); RETURN NULL; END $$;
       CREATE CONSTRAINT TRIGGER hold AFTER INSERT ON held_commit DEFERRABLE INITIALLY DEFERRED
         FOR EACH ROW EXECUTE FUNCTION hold()`,
    );
    const locker = new pg.Client({ connectionString: directUrl() });
    await locker.connect();
    await locker.query('SELECT pg_advisory_lock($1)', [gate]);
    const key = randomUUID();
    const name = uniqueName('held-commit');
    let first: Promise<Awaited<ReturnType<typeof insert>>> | undefined;
    try {
      first = insert(key, { name }, 'held_commit');
      // Until the first one's COMMIT waits on the gate, after its binding to the key.
      for (let tries = 0; tries < 2000; tries++) {
        const { rowCount } = await locker.query(
          `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`,
          [gate],
        );
        if (rowCount) break;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const started = Date.now();
      const retry = await insert(key, { name }, 'held_commit');

      expect([retry.status, retry.body.error]).toEqual([409, 'Request in progress']);
      expect(Date.now() - started).toBeLessThan(1500);
    } finally {
      await locker.query('SELECT pg_advisory_unlock_all()');
      await locker.end();
    }
    expect((await first)?.status).toBe(201);
    expect(await named(name, 'held_commit')).toBe(1);
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

describe('a copy of the admin’s sealed audit entry, or of its claim’s binding', () => {
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
    // the database not answering the service when it settles the failed request's claim, which
    // therefore stands, unbound, while the tenant replays the copies.
    const seen: string[] = [];
    const restore = losingStatements((text) => {
      if (text.includes('INSERT INTO _dbadmin_audit.inbox')) seen.push(text);
      return text.includes('bound_xid IS NOT NULL AS bound FROM');
    });
    const key = randomUUID();
    const name = uniqueName('held');

    let first: Awaited<ReturnType<typeof insert>>;
    try {
      first = await insert(key, { name }, 'held');
    } finally {
      restore();
    }
    const statements = (seen.at(-1) ?? '').split(/;\s*/);
    const binding = statements.find((s) => s.includes('_dbadmin_audit.idempotency_bound')) ?? '';
    const entry = statements.find((s) => s.includes('_dbadmin_audit.inbox')) ?? '';
    const bound = await tenantTries(binding);
    const planted = await tenantTries(entry);
    await tenantTries('DELETE FROM switch');
    // The claim stood, unbound, all along; its time is now up.
    const [held] = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `UPDATE _dbadmin.idempotency_keys SET lease_until = now() - interval '1 second'
              WHERE scope = $1 RETURNING state, bound_xid`,
            [recordScope({ kind: 'admin' }, ROW, key)],
          )
        ).rows,
    );
    const retried = await insert(key, { name }, 'held');

    expect(first.status).toBe(400);
    expect(held).toEqual({ state: 'running', bound_xid: null });
    expect(binding).toContain('_dbadmin_audit.idempotency_bound');
    expect(bound).toMatch(/no longer claimed/);
    expect(planted).toBe('ran');
    expect(retried.status).toBe(201);
    expect(await named(name, 'held')).toBe(1);
  });
});

/** The key's record, as the service keeps it. */
const recordOf = (key: string, principal: Parameters<typeof recordScope>[0] = { kind: 'admin' }) =>
  withAdminClient(
    async (c) =>
      (
        await c.query(
          `SELECT state, status, pg_catalog.octet_length(answer) AS bytes,
                  expires_at > now() + interval '23 hours' AS "keptADay"
             FROM _dbadmin.idempotency_keys WHERE scope = $1`,
          [recordScope(principal, ROW, key)],
        )
      ).rows[0] as
        | { state: string; status: number | null; bytes: number | null; keptADay: boolean }
        | undefined,
  );
const expireLease = (key: string) =>
  withAdminClient((c) =>
    c.query(
      `UPDATE _dbadmin.idempotency_keys SET lease_until = now() - interval '1 second' WHERE scope = $1`,
      [recordScope({ kind: 'admin' }, ROW, key)],
    ),
  );
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A table whose first insert (of the test) sleeps `seconds` in the tenant's trigger; later ones do not. */
async function slowFirstInsert(table: string, seconds: number) {
  await asTenant(
    schema,
    `CREATE TABLE ${table} (id serial PRIMARY KEY, name text, body text);
     CREATE SEQUENCE ${table}_inserts;
     CREATE FUNCTION ${table}_lag() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN IF nextval('${table}_inserts') = 1 THEN PERFORM pg_sleep(${seconds}); END IF; RETURN NEW; END $$;
     CREATE TRIGGER lag BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_lag()`,
  );
}

describe('a first request still running when its time is up', () => {
  it('cannot commit once a retry has taken its key over: the row is written once, by the retry', async () => {
    await slowFirstInsert('overtaken', 3);
    const key = randomUUID();
    const name = uniqueName('overtaken');

    const first = insert(key, { name }, 'overtaken');
    // The first is in its trigger, its transaction open, when its time is up (its process gave up).
    await pause(700);
    await expireLease(key);
    const retried = await insert(key, { name }, 'overtaken');
    const firstReply = await first;

    expect(retried.status).toBe(201);
    expect(firstReply.status).toBeGreaterThanOrEqual(400);
    expect(await named(name, 'overtaken')).toBe(1);
  });

  it('that the service could not stop rolls back rather than commit after the request gave up', async () => {
    await slowFirstInsert('abandoned', 3);
    // The cancel and the terminate never reach PostgreSQL (a frozen or dying process).
    const restore = losingStatements(
      (text) => text.includes('pg_terminate_backend') || text.includes('pg_cancel_backend'),
    );
    const name = uniqueName('abandoned');
    const started = Date.now();
    try {
      const event = httpEvent({
        method: 'POST',
        path: '/api/table/abandoned/row',
        body: { schema, data: { name } },
        headers: { 'Idempotency-Key': randomUUID() },
      });
      const context = { ...lambdaContext(), getRemainingTimeInMillis: () => 1500 - (Date.now() - started) };
      const reply = (await rows(event, context as never)) as { statusCode: number };
      expect(reply.statusCode).toBeGreaterThanOrEqual(400);
      // The trigger's sleep ends, and the statement with it, after the request answered.
      await pause(3500 - (Date.now() - started));
    } finally {
      restore();
    }

    expect(await named(name, 'abandoned')).toBe(0);
  });
});

describe('a claim taken over near its record’s expiry', () => {
  it('is kept a day from the take-over: a retry meanwhile is told to wait, and the row is written once', async () => {
    // The first two inserts sleep: the first request's, and the retry's that takes it over.
    await asTenant(
      schema,
      `CREATE TABLE late (id serial PRIMARY KEY, name text);
       CREATE SEQUENCE late_inserts;
       CREATE FUNCTION late_lag() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF nextval('late_inserts') <= 2 THEN PERFORM pg_sleep(3); END IF; RETURN NEW; END $$;
       CREATE TRIGGER lag BEFORE INSERT ON late FOR EACH ROW EXECUTE FUNCTION late_lag()`,
    );
    const key = randomUUID();
    const name = uniqueName('late');

    const first = insert(key, { name }, 'late');
    await pause(500);
    // Its time is up, and its key was first used almost a day ago: the record expires in a second.
    await withAdminClient((c) =>
      c.query(
        `UPDATE _dbadmin.idempotency_keys
            SET lease_until = now() - interval '1 second', expires_at = now() + interval '1 second'
          WHERE scope = $1`,
        [recordScope({ kind: 'admin' }, ROW, key)],
      ),
    );
    const takenOver = insert(key, { name }, 'late');
    await pause(1500);
    const meanwhile = await insert(key, { name }, 'late');
    const record = await recordOf(key);
    const [firstReply, takenOverReply] = await Promise.all([first, takenOver]);

    expect(meanwhile.status).toBe(409);
    expect(meanwhile.body.error).toBe('Request in progress');
    expect(record).toMatchObject({ state: 'running', keptADay: true });
    expect(takenOverReply.status).toBe(201);
    expect(firstReply.status).toBeGreaterThanOrEqual(400);
    expect(await named(name, 'late')).toBe(1);
  });
});

describe('what a key’s record keeps', () => {
  it('never an answer over 64 KiB: the change is kept as applied, and a retry is told to read it back', async () => {
    const key = randomUUID();
    const name = uniqueName('big');
    await asTenant(schema, 'ALTER TABLE items ADD COLUMN IF NOT EXISTS note text');

    const first = await insert(key, { name, note: 'x'.repeat(70 * 1024) });
    const record = await recordOf(key);
    const retried = await insert(key, { name, note: 'x'.repeat(70 * 1024) });

    expect(first.status).toBe(201);
    expect(record).toMatchObject({ state: 'applied', bytes: null });
    expect(retried.status).toBe(409);
    expect(retried.body).toEqual({
      error: 'Already applied',
      message: expect.stringMatching(/too large to keep \(over 64 KiB\).*read the result back/),
    });
    expect(await named(name)).toBe(1);
  });

  it('nothing once its schema is deleted', async () => {
    const doomed = await tenantSchema('idemgone');
    const key = randomUUID();
    const made = await call(rows, {
      method: 'POST',
      path: '/api/table/items/row',
      body: { schema: doomed, data: { name: 'gone' } },
      headers: { 'Idempotency-Key': key },
    });
    const before = await recordOf(key);

    const deleted = await call(schemas, {
      method: 'DELETE',
      path: `/api/schema/${doomed}`,
      query: { cascade: 'true' },
    });

    expect(made.status).toBe(201);
    expect(before).toBeDefined();
    expect(deleted.status).toBe(200);
    expect(await recordOf(key)).toBeUndefined();
  });

  it('nothing of an API key once the key is deleted', async () => {
    const writer = await createKey(schema, 'service_role', uniqueName('forgotten'));
    const key = randomUUID();
    const principal = { kind: 'key', id: writer.id, schema, keyType: 'service_role' } as never;
    expect((await insert(key, { name: uniqueName('by-key') }, 'items', bearer(writer.key))).status).toBe(201);
    const before = await recordOf(key, principal);

    const deleted = await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${writer.id}` });

    expect(deleted.status).toBe(200);

    expect(before).toBeDefined();
    expect(await recordOf(key, principal)).toBeUndefined();
  });
});

describe('a tenant flooding the audit inbox', () => {
  it('never makes a retry of a request whose answer was lost answer 503', async () => {
    const key = randomUUID();
    const name = uniqueName('flooded');
    expect((await insert(key, { name })).status).toBe(201);
    // The service never learnt how the first ended (its answer lost), and its time is up.
    await withAdminClient((c) =>
      c.query(
        `UPDATE _dbadmin.idempotency_keys SET state = 'running', status = NULL, answer = NULL,
                lease_until = now() - interval '1 second' WHERE scope = $1`,
        [recordScope({ kind: 'admin' }, ROW, key)],
      ),
    );
    // More rows than one read of the log drains (100 batches of 1000), none of them sealed.
    await tenantTries(
      `INSERT INTO _dbadmin_audit.inbox (entry, seal) SELECT 'junk', repeat('0', 64) FROM generate_series(1, 101000)`,
    );
    try {
      const retried = await insert(key, { name });

      expect(retried.status).toBe(409);
      expect(retried.body.error).toBe('Already applied');
      expect(await named(name)).toBe(1);
    } finally {
      await withAdminClient((c) => c.query(`DELETE FROM _dbadmin_audit.inbox WHERE entry = 'junk'`));
    }
  }, 60_000);
});

describe('a request body nested deeper than JSON bodies may be', () => {
  it.each([
    ['without', undefined],
    ['with', randomUUID()],
  ])('is refused (400) naming the limit, %s an Idempotency-Key', async (_, key) => {
    const deep = `${'['.repeat(6000)}${']'.repeat(6000)}`;
    const reply = await call(rows, {
      method: 'POST',
      path: '/api/table/items/row',
      body: `{"schema":"${schema}","data":{"name":"deep","note":${deep}}}`,
      headers: { 'content-type': 'application/json', ...(key ? { 'Idempotency-Key': key } : {}) },
    });

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'JSON nested too deep',
      message: expect.stringMatching(/256 levels/),
    });
  });
});
