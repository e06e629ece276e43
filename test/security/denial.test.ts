import { handler as keys } from '#functions/keys';
import { handler as rows } from '#functions/rows';
import { handler as schemas } from '#functions/schemas';
import { handler as tables } from '#functions/tables';
import { resetConfig } from '#lib/config';
import { migrate } from '#lib/db/migrations';
import { closePool } from '#lib/db/pool';
import {
  asTenant,
  backendsStillRunning,
  bearer,
  createKey,
  loginAs,
  sightings,
  sqlAs,
  tenantSchema,
} from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

/**
 * What a tenant can hold or plant to stop the admin from revoking it, to outlive its revocation,
 * or to make a request run unbounded or fail with a 500.
 */

afterAll(closePool);
afterEach(() => {
  delete process.env.QUERY_TIMEOUT_MS;
  resetConfig();
});

/** A session of the tenant's own database login, kept open for the test. */
async function tenantSession(schema: string) {
  const client = loginAs(`${schema}_user`, 'schema-pass-1');
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

const hash = (text: string) =>
  withAdminClient(async (c) => Number((await c.query('SELECT hashtext($1) AS h', [text])).rows[0].h));

describe('a tenant cannot stop the admin from revoking it', () => {
  it('advisory locks a tenant takes do not block key deletion, key creation or schema deletion', async () => {
    process.env.QUERY_TIMEOUT_MS = '3000';
    resetConfig();
    const schema = await tenantSchema('lockout');
    const { id } = await createKey(schema, 'service_role');
    const tenant = await tenantSession(schema);
    try {
      for (const name of [`dbadmin.roles:${schema}`, `dbadmin.schema:${schema}`]) {
        await tenant.query('SELECT pg_advisory_lock($1)', [await hash(name)]);
      }
      await tenant.query('SELECT pg_advisory_lock($1)', [0x0db_ad_01]);

      const started = Date.now();
      const deleted = await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${id}` });
      const created = await createKey(schema, 'anon', uniqueName('after')).then(
        () => 201,
        () => 'failed',
      );
      const migrated = await withAdminClient((c) => migrate(c).then(() => 'migrated'));
      const dropped = await call(schemas, {
        method: 'DELETE',
        path: `/api/schema/${schema}`,
        query: { cascade: 'true' },
      });

      expect([deleted.status, created, migrated, dropped.status]).toEqual([200, 201, 'migrated', 200]);
      expect(Date.now() - started).toBeLessThan(2500);
    } finally {
      await tenant.end().catch(() => undefined);
    }
  });

  it('deleting a schema ends its tenant’s sessions, even one holding a lock on its table', async () => {
    const schema = await tenantSchema('squat');
    const tenant = await tenantSession(schema);
    await tenant.query(`BEGIN; LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`);

    const dropped = await call(schemas, {
      method: 'DELETE',
      path: `/api/schema/${schema}`,
      query: { cascade: 'true' },
    });
    const stillThere = await tenant.query('SELECT 1').then(
      () => true,
      () => false,
    );

    expect(dropped.status).toBe(200);
    expect(stillThere).toBe(false);
  });
});

describe('a key leaves no login behind', () => {
  it('a service_role key of public cannot give itself a login through the role it works as', async () => {
    const { key, id } = await createKey('public', 'service_role', uniqueName('pwd'));
    await sqlAs(key, "ALTER ROLE CURRENT_USER PASSWORD 'tenant-chose-this'");
    const who = (await sqlAs(key, 'SELECT current_user AS role')).body.rows[0].role as string;
    const attempt = async (role: string) => {
      const login = loginAs(role, 'tenant-chose-this');
      login.on('error', () => undefined);
      return login.connect().then(
        () => login,
        () => undefined,
      );
    };
    // Whatever login the password gave before the key is deleted ends with it.
    const opened = await attempt(who);

    await call(keys, { method: 'DELETE', path: `/api/project/public/keys/${id}` });
    const outcomes = [];
    for (const role of [who, 'public_exec', 'public_svc']) {
      const login = await attempt(role);
      outcomes.push(login ? `${role} logged in` : 'refused');
      await login?.end();
    }
    const openedAlive = opened
      ? await opened.query('SELECT 1').then(
          () => true,
          () => false,
        )
      : false;
    await opened?.end().catch(() => undefined);

    expect(outcomes).toEqual(['refused', 'refused', 'refused']);
    expect(openedAlive).toBe(false);
  });
});

describe('every request is bounded in time', () => {
  it('planted code that turns the statement timeout off does not make the next statement unbounded', async () => {
    process.env.QUERY_TIMEOUT_MS = '1000';
    resetConfig();
    const schema = await tenantSchema('untimed');
    // First call (the page's rows): switch the timeout off for the session; later calls: sleep.
    await withAdminClient((c) =>
      c.query(`
        CREATE TABLE "${schema}".calls (n int);
        GRANT ALL ON "${schema}".calls TO PUBLIC;
        CREATE FUNCTION "${schema}".stall() RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
          INSERT INTO "${schema}".calls VALUES (1);
          IF (SELECT count(*) FROM "${schema}".calls) = 1 THEN
            PERFORM set_config('statement_timeout', '0', false);
          ELSE
            PERFORM pg_sleep(7.31);
          END IF;
          RETURN true;
        END $$;`),
    );
    await asTenant(
      schema,
      `ALTER TABLE "${schema}".items ENABLE ROW LEVEL SECURITY; ALTER TABLE "${schema}".items FORCE ROW LEVEL SECURITY;
       CREATE POLICY stall ON "${schema}".items USING ("${schema}".stall());`,
    );

    const started = Date.now();
    const page = await call(tables, { path: '/api/table/items', query: { schema } });

    expect(Date.now() - started).toBeLessThan(5000);
    expect(page.body.error).toBe('Query timeout');
    const running = await backendsStillRunning("query LIKE '%count(*)%' AND wait_event = 'PgSleep'");
    expect(running).toBe(0);
  });
});

describe('errors a tenant can cause are 4xx', () => {
  it.each([
    ['a subquery with two rows', 'SELECT (VALUES (1), (2))'],
    ['FETCH from no cursor', 'FETCH c'],
    ['EXECUTE of nothing prepared', 'EXECUTE nothing'],
    ['a raised authorization error', "DO $$ BEGIN RAISE EXCEPTION 'no' USING ERRCODE = '28000'; END $$"],
  ])('%s through a key is 400', async (_, sql) => {
    const schema = await tenantSchema('err');
    const { key } = await createKey(schema, 'service_role');

    const reply = await sqlAs(key, sql);

    expect({ status: reply.status, error: typeof reply.body.error }).toEqual({
      status: 400,
      error: 'string',
    });
  });

  it('a planted trigger that returns nothing makes the admin insert a 400', async () => {
    const schema = await tenantSchema('noreturn');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".broken() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM 1; END $$;
       CREATE TRIGGER broken BEFORE INSERT ON "${schema}".items FOR EACH ROW EXECUTE FUNCTION "${schema}".broken();`,
    );

    const reply = await call(rows, {
      method: 'POST',
      path: '/api/table/items/row',
      body: { data: { name: 'x' }, schema },
    });

    expect(reply.status).toBe(400);
  });
});

describe('a connection whose statement was cancelled is not reused', () => {
  // Through a transaction pooler the server's session is shared by design, and a cancel goes by
  // the protocol to the statement it was for (test/integration/pgbouncer.test.ts).
  const direct = process.env.DATABASE_POOL_MODE === 'transaction' ? it.skip : it;
  direct('the session after a result that was too large is a new one', async () => {
    const schema = await tenantSchema('reuse');
    const { key } = await createKey(schema, 'service_role');
    const pid = async () => (await sqlAs(key, 'SELECT pg_backend_pid() AS pid')).body.rows[0].pid;
    const before = await pid();
    expect(await pid()).toBe(before);

    const big = await sqlAs(key, 'SELECT g FROM generate_series(1, 20000) g');
    const after = await pid();

    expect(big.status).toBe(413);
    expect(after).not.toBe(before);
    expect(bearer(key).auth).toBeNull();
  });
});

describe('what a review found next', () => {
  it('a service_role key cannot take over the schema’s own login by setting the password of the role it works as', async () => {
    const schema = await tenantSchema('owner');
    const { key, id } = await createKey(schema, 'service_role');
    await sqlAs(key, "ALTER ROLE CURRENT_USER PASSWORD 'taken-over'");
    await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${id}` });

    const takenOver = loginAs(`${schema}_user`, 'taken-over');
    const tookOver = await takenOver.connect().then(
      () => true,
      () => false,
    );
    await takenOver.end().catch(() => undefined);
    const owner = await tenantSession(schema);
    await owner.end();

    expect(tookOver).toBe(false);
  });

  it('a tenant cannot connect to other databases of the server (where it could keep objects a drop trips on)', async () => {
    const schema = await tenantSchema('elsewhere');
    const url = new URL(directUrl());
    url.username = `${schema}_user`;
    url.password = 'schema-pass-1';
    url.pathname = '/postgres';
    const { Client } = await import('pg');
    const elsewhere = new Client({ connectionString: url.toString() });

    const outcome = await elsewhere.connect().then(
      async () => {
        await elsewhere.end();
        return 'connected';
      },
      (error: { code?: string }) => error.code,
    );

    expect(outcome).toBe('42501');
  });

  it('settings a key role sets for itself do not outlive its key', async () => {
    const schema = await tenantSchema('settings');
    const { id } = await createKey(schema, 'service_role');
    // PostgreSQL 15 lets a role set its own defaults (16+ asks for ADMIN): planted as it could be there.
    await withAdminClient((c) => c.query(`ALTER ROLE "${schema}_svc" SET work_mem = '77kB'`));
    await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${id}` });

    const settings = await withAdminClient(async (c) =>
      Number(
        (
          await c.query(
            'SELECT count(*) AS n FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole WHERE r.rolname = $1',
            [`${schema}_svc`],
          )
        ).rows[0].n,
      ),
    );

    expect(settings).toBe(0);
  });

  it('an advisory lock a tenant holds does not stop a pending migration', async () => {
    const target = { schema: uniqueName('_mig') };
    const schema = await tenantSchema('miglock');
    const tenant = await tenantSession(schema);
    await tenant.query('SELECT pg_advisory_lock($1)', [0x0db_ad_01]);
    try {
      const applied = await withAdminClient(async (c) => {
        await c.query("SET statement_timeout = '2s'");
        return migrate(c, [{ id: 1, name: 'one', sql: `CREATE TABLE "${target.schema}".t (a int)` }], target);
      });

      expect(applied).toEqual([1]);
    } finally {
      await tenant.end();
      await withAdminClient((c) => c.query(`DROP SCHEMA "${target.schema}" CASCADE`));
    }
  });

  it('a request about to time out terminates its session, even one whose statement ignores a cancel', async () => {
    const schema = await tenantSchema('stubborn');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".stubborn() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM set_config('statement_timeout', '0', false);
         LOOP BEGIN PERFORM pg_sleep(8.21); EXIT; EXCEPTION WHEN query_canceled THEN NULL; END; END LOOP;
         RETURN NEW;
       END $$;
       CREATE TRIGGER stubborn BEFORE INSERT ON "${schema}".items FOR EACH ROW EXECUTE FUNCTION "${schema}".stubborn();`,
    );
    const { httpEvent, lambdaContext } = await import('#test/support/http');
    const started = Date.now();
    const context = { ...lambdaContext(), getRemainingTimeInMillis: () => 2500 - (Date.now() - started) };

    const response = (await rows(
      httpEvent({ method: 'POST', path: '/api/table/items/row', body: { data: { name: 'x' }, schema } }),
      context,
    )) as { body: string };

    expect(JSON.parse(response.body)).toMatchObject({ error: 'Query timeout' });
    const sleeping = await backendsStillRunning(
      "query LIKE '%INSERT INTO%items%' AND wait_event = 'PgSleep'",
    );
    expect(sleeping).toBe(0);
  });
});

describe('what a third review found', () => {
  it('an open transaction of the tenant on its roles does not block deleting a key or the schema', async () => {
    process.env.QUERY_TIMEOUT_MS = '4000';
    resetConfig();
    const schema = await tenantSchema('rowlock');
    const { id } = await createKey(schema, 'service_role');
    const tenant = await tenantSession(schema);
    await tenant.query(
      `BEGIN; ALTER ROLE CURRENT_USER PASSWORD 'held-open'; GRANT SELECT ON "${schema}".items TO PUBLIC`,
    );
    try {
      const started = Date.now();
      const deletedKey = await call(keys, { method: 'DELETE', path: `/api/project/${schema}/keys/${id}` });
      const dropped = await call(schemas, {
        method: 'DELETE',
        path: `/api/schema/${schema}`,
        query: { cascade: 'true' },
      });

      expect([deletedKey.status, dropped.status]).toEqual([200, 200]);
      expect(Date.now() - started).toBeLessThan(3500);
    } finally {
      await tenant.end().catch(() => undefined);
    }
  });

  it('a tenant login cannot take every connection of the server', async () => {
    const schema = await tenantSchema('flood');
    const sessions: Array<ReturnType<typeof loginAs>> = [];
    let refused: string | undefined;
    try {
      for (let i = 0; i < 40 && !refused; i++) {
        const client = loginAs(`${schema}_user`, 'schema-pass-1');
        client.on('error', () => undefined);
        await client.connect().then(
          () => sessions.push(client),
          (error: { code?: string }) => {
            refused = error.code;
          },
        );
      }

      expect(refused).toBe('53300');
      expect(sessions.length).toBeLessThanOrEqual(10);
    } finally {
      await Promise.all(sessions.map((s) => s.end().catch(() => undefined)));
    }
  });

  it('a key left over from a deleted schema does not open a new schema of the same name', async () => {
    const name = uniqueName('reborn');
    const { hashKey } = await import('#lib/admin/keys');
    const stale = 'ab'.repeat(32);
    await withAdminClient((c) =>
      c.query(
        `INSERT INTO _dbadmin.api_keys (schema_name, key_name, key_type, key_hash, key_prefix)
         VALUES ($1, 'left over', 'service_role', $2, 'abababab')`,
        [name, hashKey(stale)],
      ),
    );

    await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: name, password: 'long-enough-1' },
    });
    const reply = await call(tables, { path: '/api/tables', ...bearer(stale) });

    expect(reply.status).toBe(401);
  });

  it('the admin’s own-rights SQL in a schema does not resolve operators a public key planted', async () => {
    const { key } = await createKey('public', 'service_role', uniqueName('pubop'));
    const victim = await tenantSchema('adminsql');
    const planted = [
      await sqlAs(
        key,
        `CREATE FUNCTION public.spy_cat3(name, name) RETURNS text LANGUAGE plpgsql AS $$
         BEGIN PERFORM "${victim}".spy(); RETURN $1::text || $2::text; END $$`,
      ),
      await sqlAs(
        key,
        'CREATE OPERATOR public.|| (LEFTARG = name, RIGHTARG = name, FUNCTION = public.spy_cat3)',
      ),
    ];
    try {
      expect(planted.map((r) => r.status)).toEqual([200, 200]);
      await sightings(victim);

      const reply = await call((await import('#functions/query')).handler, {
        method: 'POST',
        path: '/api/query',
        body: { sql: "SELECT 'a'::name || 'b' AS ab", schema: victim, runAs: 'admin' },
      });

      expect(reply.status).toBe(200);
      expect(await sightings(victim)).toEqual([]);
    } finally {
      await withAdminClient((c) =>
        c.query(
          'DROP OPERATOR IF EXISTS public.|| (name, name); DROP FUNCTION IF EXISTS public.spy_cat3(name, name)',
        ),
      );
    }
  });

  it('work for a request that has already ended never starts', async () => {
    const { schemaAccess } = await import('#lib/db/executor');
    const schema = await tenantSchema('ended');
    const ended = new AbortController();
    ended.abort();
    let ran = false;

    const outcome = await (await schemaAccess(undefined, schema, ended.signal))
      .run(async () => {
        ran = true;
      })
      .then(
        () => 'ran',
        (error: { title?: string }) => error.title,
      );

    expect(outcome).toBe('Query timeout');
    expect(ran).toBe(false);
  });
});

describe('what a last review found', () => {
  it('a table the service has no rights on does not make the rest of the schema unusable', async () => {
    const schema = await tenantSchema('foreign');
    const { Client } = await import('pg');
    const url = new URL(process.env.DBADMIN_TEST_SUPERUSER_URL as string);
    url.pathname = new URL(directUrl()).pathname;
    const superuser = new Client({ connectionString: url.toString() });
    await superuser.connect();
    try {
      await superuser.query(`CREATE ROLE "${schema}_stranger"; CREATE TABLE "${schema}".alien (a int)`);
      await superuser.query(`ALTER TABLE "${schema}".alien OWNER TO "${schema}_stranger"`);
      // A fresh container: its pools are made (and the schema's grants renewed) on first use.
      await closePool();

      const page = await call(tables, { path: '/api/table/items', query: { schema } });

      expect(page.status).toBe(200);
    } finally {
      await superuser.query(`DROP TABLE "${schema}".alien; DROP ROLE "${schema}_stranger"`);
      await superuser.end();
    }
  });
});

/** A fresh tenant schema and an anon key of it, under a query timeout of `timeoutMs`. */
async function schemaWithKey(prefix: string, timeoutMs: number) {
  process.env.QUERY_TIMEOUT_MS = String(timeoutMs);
  resetConfig();
  const schema = await tenantSchema(prefix);
  const { key } = await createKey(schema, 'anon');
  return { schema, key };
}

/** Runs `work` while the tenant's own session keeps open the transaction `holding` began. */
async function whileTenantHolds<T>(schema: string, holding: string, work: () => Promise<T>): Promise<T> {
  const tenant = await tenantSession(schema);
  try {
    await tenant.query(holding);
    return await work();
  } finally {
    await tenant.end().catch(() => undefined);
  }
}

const lockItems = (schema: string) => `BEGIN; LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`;

describe('a lock a tenant holds on its table holds none of the service’s connections', () => {
  it('the structure read answers at once while the tenant keeps its table locked, for its own key too', async () => {
    const { schema, key } = await schemaWithKey('locked', 3000);

    // items.id's default (nextval) is deparsed for the structure: lock-free, or it waits here.
    await whileTenantHolds(schema, lockItems(schema), async () => {
      const started = Date.now();
      const replies = await Promise.all([
        call(tables, { path: '/api/schema', query: { schema } }),
        call(tables, { path: '/api/schema', query: { schema }, ...bearer(key) }),
      ]);

      expect(replies.map((r) => r.status)).toEqual([200, 200]);
      const items = replies[0]?.body.schema.find((entry: { table: string }) => entry.table === 'items');
      expect(items.columns[0]).toMatchObject({
        name: 'id',
        defaultValue: expect.stringContaining('nextval('),
      });
      expect(Date.now() - started).toBeLessThan(1500);
    });
  });

  it('a default whose constant is of the locked table’s row type (printing it opens the table) costs it a 409 at once, no wait', async () => {
    const { schema, key } = await schemaWithKey('rowtyped', 3000);
    await asTenant(
      schema,
      `ALTER TABLE "${schema}".items ADD COLUMN note text DEFAULT ('(0,x,)'::"${schema}".items)::text`,
    );
    // The row type's layout is loaded afresh on the next read (a committed ALTER drops it).
    await asTenant(
      schema,
      `ALTER TABLE "${schema}".items ALTER COLUMN note SET DEFAULT ('(1,y,)'::"${schema}".items)::text`,
    );

    await whileTenantHolds(schema, lockItems(schema), async () => {
      const started = Date.now();
      const replies = await Promise.all(
        Array.from({ length: 3 }, () =>
          call(tables, { path: '/api/schema', query: { schema }, ...bearer(key) }),
        ),
      );
      const elsewhere = await call(tables, { path: '/api/schema', query: { schema: 'public' } });

      expect(replies.map((r) => [r.status, r.body.error])).toEqual(Array(3).fill([409, 'Schema busy']));
      expect(replies[0]?.body.message).toMatch(/locked/);
      expect(elsewhere.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(1500);
    });
  });
});

describe('a tenant’s open schema change holds none of the service’s connections', () => {
  it('a new process logs in as a prepared key role without waiting on it at all', async () => {
    const { schema, key } = await schemaWithKey('altering', 8000);

    await whileTenantHolds(schema, `BEGIN; ALTER TABLE "${schema}".items ADD COLUMN later int`, async () => {
      await closePool(); // a new process: the role was prepared with the key, so it logs in directly

      const started = Date.now();
      const reply = await sqlAs(key, 'SELECT 1 AS one');

      expect(reply.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2000);
    });
  });

  it('preparing a key’s role waits at most 2 s on it, then answers 409', async () => {
    const { schema, key } = await schemaWithKey('altering', 8000);
    // The roles changed since (a generation bump): the next process prepares them first.
    await withAdminClient((c) =>
      c.query(`UPDATE _dbadmin.schema_locks SET prepared = '{}' WHERE schema_name = $1`, [schema]),
    );

    // Uncommitted, it holds the table's catalog row: a GRANT on the table waits for it.
    await whileTenantHolds(schema, `BEGIN; ALTER TABLE "${schema}".items ADD COLUMN later int`, async () => {
      await closePool(); // a new process: the key's role is prepared (its grants renewed) first

      const started = Date.now();
      const reply = await sqlAs(key, 'SELECT 1 AS one');

      expect([reply.status, reply.body.error]).toEqual([409, 'Schema busy']);
      expect(reply.body.message).toMatch(/try again once it ends/);
      expect(Date.now() - started).toBeLessThan(4000);
    });
  });
});
