import { randomBytes } from 'node:crypto';
import { handler as audit } from '#functions/audit';
import { handler as keys } from '#functions/keys';
import { handler as people } from '#functions/people';
import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { handler as schemas } from '#functions/schemas';
import { handler as tables } from '#functions/tables';
import { handler as tenants } from '#functions/tenants';
import { startSession } from '#lib/admin/person-sessions';
import { getConfig, resetConfig } from '#lib/config';
import { closePool, getDatabase } from '#lib/db/pool';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { ADMIN, call } from '#test/support/http';
import { addPerson, PASSWORD, person, signIn } from '#test/support/people';
import { changingSettings, withSetting } from '#test/support/settings';

/**
 * People are principals an attacker can be: an analyst who wants to write, a support engineer
 * scoped to one tenant who wants another's rows, a colleague removed this morning whose browser is
 * still signed in, a page on another site riding a signed-in browser, a token that outlives its
 * person's demotion. Every defence is enforced on the request path and, for SQL, by PostgreSQL.
 */
afterAll(closePool);

const itemNames = (schema: string) =>
  withAdminClient(async (c) =>
    (await c.query(`SELECT name FROM "${schema}".items ORDER BY id`)).rows.map((r) => r.name),
  );

describe('an analyst (read-only)', () => {
  it('reads, but SQL that writes leaves nothing, whatever it tries', async () => {
    const schema = await tenantSchema('analyst');
    const analyst = await person('analyst', null);

    const read = await analyst.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT name FROM items', schema },
    });
    const insert = await analyst.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: "INSERT INTO items (name) VALUES ('analyst')", schema },
    });
    const script = await analyst.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: "COMMIT; BEGIN; INSERT INTO items (name) VALUES ('escaped'); COMMIT", schema },
    });
    const viaFunction = await analyst.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: `SELECT "${schema}".spy()`, schema },
    });

    expect(read.status).toBe(200);
    expect(read.body.rows).toEqual([{ name: 'first' }]);
    // PostgreSQL refuses the write (25006, 403 Read-only); a script is not one statement (400).
    expect([insert.status, insert.body.error]).toEqual([403, 'Read-only']);
    expect(script.status).toBe(400);
    expect([viaFunction.status, viaFunction.body.error]).toEqual([403, 'Read-only']);
    expect(await itemNames(schema)).toEqual(['first']);
  });

  it('is refused every route that changes something, before any work', async () => {
    const schema = await tenantSchema('analystw');
    const analyst = await person('analyst', null);

    const insert = await analyst.as(rows, {
      method: 'POST',
      path: '/api/table/items/row',
      body: { schema, data: { name: 'nope' } },
    });
    const drop = await analyst.as(tables, { method: 'DELETE', path: '/api/table/items', query: { schema } });
    const key = await analyst.as(keys, {
      method: 'POST',
      path: `/api/project/${schema}/keys`,
      body: { keyName: 'k', keyType: 'anon' },
    });
    const runAsAdmin = await analyst.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT 1', runAs: 'admin' },
    });

    expect([insert.status, drop.status, key.status, runAsAdmin.status]).toEqual([403, 403, 403, 403]);
    expect(insert.body.message).toMatch(/analyst/);
    expect(await itemNames(schema)).toEqual(['first']);
  });
});

describe('a person scoped to one schema', () => {
  it('reaches that schema and no other, by any route or SQL', async () => {
    const [mine, theirs] = [await tenantSchema('mine'), await tenantSchema('theirs')];
    const support = await person('developer', [mine]);

    const own = await support.as(tables, { path: '/api/table/items', query: { schema: mine } });
    const other = await support.as(tables, { path: '/api/table/items', query: { schema: theirs } });
    const defaulted = await support.as(tables, { path: '/api/tables' });
    const otherSql = await support.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT 1', schema: theirs },
    });
    const named = await support.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: `SELECT name FROM "${theirs}".items` },
    });
    const reachAcross = await support.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: `SELECT name FROM "${theirs}".items`, schema: mine },
    });
    const structure = await support.as(tables, { path: '/api/table/items', query: { schema: theirs } });
    const list = await support.as(schemas, { path: '/api/schemas' });
    const tenantList = await support.as(tenants, { path: '/api/tenants' });
    const tenant = await support.as(tenants, { path: `/api/tenants/${theirs}` });

    expect(own.status).toBe(200);
    expect([
      other.status,
      defaulted.status,
      otherSql.status,
      named.status,
      structure.status,
      tenant.status,
    ]).toEqual([403, 403, 403, 403, 403, 403]);
    // Named inside its own schema's SQL: PostgreSQL refuses it (the schema's role has no rights there).
    expect([reachAcross.status, reachAcross.body.message]).toEqual([
      403,
      expect.stringMatching(/permission denied for table items/),
    ]);
    expect(JSON.stringify(reachAcross.body)).not.toContain('first');
    expect(list.body).toEqual([mine]);
    expect(tenantList.body.tenants.map((t: { schema: string }) => t.schema)).toEqual([mine]);
  });

  it('sees the audit entries of its schemas alone', async () => {
    const [mine, theirs] = [await tenantSchema('audmine'), await tenantSchema('audtheirs')];
    for (const schema of [mine, theirs])
      await call(rows, {
        method: 'POST',
        path: '/api/table/items/row',
        body: { schema, data: { name: 'x' } },
      });
    const reader = await person('analyst', [mine]);

    const all = await reader.as(audit, { path: '/api/audit', query: { limit: '1000' } });
    const asked = await reader.as(audit, { path: '/api/audit', query: { schema: theirs } });

    expect(all.status).toBe(200);
    expect(new Set(all.body.entries.map((e: { schema: string }) => e.schema))).toEqual(new Set([mine]));
    expect(asked.status).toBe(403);
  });

  it('can hold no whole-database permission, whatever its role', async () => {
    const schema = await tenantSchema('scopedadmin');
    const scopedAdmin = await person('admin', [schema]);

    const create = await scopedAdmin.as(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: `${schema}x`, password: 'schema-pass-1' },
    });
    const asAdmin = await scopedAdmin.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT 1', runAs: 'admin', schema },
    });

    expect([create.status, asAdmin.status]).toEqual([403, 403]);
  });
});

describe('a developer', () => {
  it('changes data and structure, lists keys, but neither makes keys nor deletes schemas', async () => {
    const schema = await tenantSchema('dev');
    const developer = await person('developer', null);

    const insert = await developer.as(rows, {
      method: 'POST',
      path: '/api/table/items/row',
      body: { schema, data: { name: 'dev' } },
    });
    const listKeys = await developer.as(keys, { path: `/api/project/${schema}/keys` });
    const makeKey = await developer.as(keys, {
      method: 'POST',
      path: `/api/project/${schema}/keys`,
      body: { keyName: 'k', keyType: 'anon' },
    });
    const drop = await developer.as(schemas, { method: 'DELETE', path: `/api/schema/${schema}` });
    const peopleList = await developer.as(people, { path: '/api/people' });

    expect([insert.status, listKeys.status]).toEqual([201, 200]);
    expect([makeKey.status, drop.status, peopleList.status]).toEqual([403, 403, 403]);
  });
});

describe('SQL a role may not run', () => {
  it('an admin cannot run SQL with the service’s rights, which reach dbadmin’s own tables', async () => {
    const admin = await person('admin', null);
    const promote = await admin.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { runAs: 'admin', sql: `UPDATE _dbadmin.people SET role = 'owner' WHERE id = ${admin.id}` },
    });
    const role = await withAdminClient(
      async (c) => (await c.query('SELECT role FROM _dbadmin.people WHERE id = $1', [admin.id])).rows[0].role,
    );

    expect(promote.status).toBe(403);
    expect(role).toBe('admin');
  });

  it('a developer cannot delete the schema, however the statement hides it', async () => {
    const schema = await tenantSchema('nodrop');
    const developer = await person('developer', null);
    const attempts = [
      `DROP SCHEMA "${schema}" CASCADE`,
      `DO $$ BEGIN EXECUTE 'DROP SCHEMA "${schema}" CASCADE'; END $$`,
      `DROP TABLE items; DROP SCHEMA "${schema}" CASCADE`,
    ];
    const statuses = [];
    for (const sql of attempts)
      statuses.push(
        (await developer.as(query, { method: 'POST', path: '/api/query', body: { sql, schema } })).status,
      );
    const alter = await developer.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'ALTER TABLE items ADD COLUMN note text', schema },
    });

    expect(statuses).toEqual([403, 403, 400]);
    expect(await itemNames(schema)).toEqual(['first']);
    expect(alter.status).toBe(200);
  });
});

describe('the sign-in throttle', () => {
  const failures = (clients: string[]) =>
    withAdminClient(
      async (c) =>
        (
          await c.query(
            'SELECT client, failures FROM _dbadmin.sign_in_failures WHERE client = ANY ($1) ORDER BY client',
            [clients],
          )
        ).rows,
    );

  it('writes nothing more for an address past its limit, whatever logins it makes up', async () => {
    const sourceIp = '100.64.43.5';
    const logins = Array.from({ length: 6 }, () => `made-up-${randomBytes(4).toString('hex')}`);
    const statuses: number[] = [];
    // A limit of three for this test alone (other tests sign in from this file's own address).
    const limit = changingSettings();
    limit.set({ AUTH_MAX_FAILURES: '3' });
    try {
      for (const login of logins)
        statuses.push(
          (
            await call(people, {
              method: 'POST',
              path: '/api/session',
              auth: null,
              sourceIp,
              body: { login, password: 'x' },
            })
          ).status,
        );
    } finally {
      limit.restore();
    }
    expect(statuses).toEqual([401, 401, 401, 429, 429, 429]);
    expect((await failures(logins.map((l) => `login:${l}`))).length).toBe(3);
  });

  it('counts no guess for a right current password with a new one the rules refuse', async () => {
    const someone = await person('analyst', null);
    for (let i = 0; i < 4; i++) {
      const reply = await someone.as(people, {
        method: 'POST',
        path: '/api/me/password',
        sourceIp: '100.64.43.6',
        body: { currentPassword: PASSWORD, newPassword: 'short' },
      });
      expect(reply.status).toBe(400);
    }
    // Its sign-in was counted and taken back (0); none of the four attempts is a guess.
    expect((await failures([`login:${someone.login}`])).map((row) => row.failures)).toEqual([0]);
  });
});

describe('console sessions', () => {
  it('keeps the password out of the answer and the database, and the cookie out of scripts and other sites', async () => {
    const { login } = await addPerson('analyst', null);
    const reply = await call(people, {
      method: 'POST',
      path: '/api/session',
      auth: null,
      body: { login, password: PASSWORD },
    });
    const stored = await withAdminClient(
      async (c) =>
        (await c.query('SELECT password_hash FROM _dbadmin.people WHERE login = $1', [login])).rows[0]
          .password_hash,
    );

    expect(reply.headers['set-cookie']).toMatch(
      /^dbadmin_session=dbs_[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=\d+$/,
    );
    expect(reply.text).not.toContain(PASSWORD);
    expect(stored).toMatch(/^scrypt\$15\$8\$1\$/);
    expect(stored).not.toContain(PASSWORD);
  });

  it('is Secure and __Host- over HTTPS, and only that cookie counts there', async () => {
    const { login } = await addPerson('analyst', null);
    // The container's Caddy: a trusted proxy that says the browser came over HTTPS.
    const process = await import('node:process');
    const before = process.env.TRUSTED_PROXIES;
    process.env.TRUSTED_PROXIES = '10.0.0.1';
    try {
      const { resetConfig } = await import('#lib/config');
      resetConfig();
      const overHttps = {
        sourceIp: '10.0.0.1',
        headers: { 'x-forwarded-proto': 'https', 'x-forwarded-for': '203.0.113.9' },
      };
      const reply = await call(people, {
        method: 'POST',
        path: '/api/session',
        auth: null,
        body: { login, password: PASSWORD },
        ...overHttps,
      });
      const secret = /=([^;]+)/.exec(reply.headers['set-cookie'] ?? '')?.[1];
      const plain = await call(people, {
        path: '/api/session',
        auth: null,
        ...overHttps,
        headers: { ...overHttps.headers, cookie: `dbadmin_session=${secret}` },
      });
      const hosted = await call(people, {
        path: '/api/session',
        auth: null,
        ...overHttps,
        headers: { ...overHttps.headers, cookie: `__Host-dbadmin_session=${secret}` },
      });

      expect(reply.headers['set-cookie']).toMatch(/^__Host-dbadmin_session=dbs_.*; Secure$/);
      expect(plain.status).toBe(401);
      expect(hosted.status).toBe(200);
    } finally {
      if (before === undefined) delete process.env.TRUSTED_PROXIES;
      else process.env.TRUSTED_PROXIES = before;
      (await import('#lib/config')).resetConfig();
    }
  });

  it('signs AUTH_USER in to a session of its own, which ends when AUTH_PASS changes', async () => {
    const reply = await call(people, {
      method: 'POST',
      path: '/api/session',
      auth: null,
      body: { login: ADMIN.user, password: ADMIN.pass },
    });
    const cookie = String(reply.headers['set-cookie']).split(';')[0] as string;
    const withCookie = { auth: null, headers: { cookie } };

    const who = await call(people, { path: '/api/session', ...withCookie });
    const list = await call(schemas, { path: '/api/schemas', ...withCookie });
    const before = process.env.AUTH_PASS;
    process.env.AUTH_PASS = 'a-new-admin-password';
    resetConfig();
    let after: Awaited<ReturnType<typeof call>>;
    try {
      after = await call(schemas, { path: '/api/schemas', ...withCookie });
    } finally {
      process.env.AUTH_PASS = before;
      resetConfig();
    }

    expect(reply.status).toBe(200);
    expect(reply.text).not.toContain(ADMIN.pass);
    expect(who.body).toMatchObject({ kind: 'admin', role: 'owner', csrfToken: reply.body.csrfToken });
    expect(list.status).toBe(200);
    expect(after.status).toBe(401);
  });

  it('refuses a change carried by the cookie without its CSRF token', async () => {
    const schema = await tenantSchema('csrf');
    const developer = await person('developer', null);
    const insert = {
      method: 'POST',
      path: '/api/table/items/row',
      body: { schema, data: { name: 'forged' } },
    };

    const without = await developer.as(rows, insert, { csrf: false });
    const wrong = await call(rows, {
      ...insert,
      auth: null,
      headers: { cookie: developer.cookie, 'x-csrf-token': 'x'.repeat(43) },
    });
    const read = await developer.as(tables, { path: '/api/table/items', query: { schema } }, { csrf: false });

    expect([without.status, wrong.status, read.status]).toEqual([403, 403, 200]);
    expect(await itemNames(schema)).toEqual(['first']);
  });

  it('ends when the person is removed, demoted or signed out, on their very next request', async () => {
    const schema = await tenantSchema('removed');
    const removed = await person('developer', null);
    const demoted = await person('developer', null);
    const leaving = await person('developer', null);
    const insert = { method: 'POST', path: '/api/table/items/row', body: { schema, data: { name: 'late' } } };
    expect((await removed.as(tables, { path: '/api/table/items', query: { schema } })).status).toBe(200);

    await call(people, { method: 'DELETE', path: `/api/people/${removed.id}` });
    await call(people, { method: 'PATCH', path: `/api/people/${demoted.id}`, body: { role: 'analyst' } });
    await leaving.as(people, { method: 'DELETE', path: '/api/session' });

    expect((await removed.as(rows, insert)).status).toBe(401);
    expect((await demoted.as(rows, insert)).status).toBe(403);
    expect((await leaving.as(rows, insert)).status).toBe(401);
    expect(await itemNames(schema)).toEqual(['first']);
  });

  it('ends once idle past its idle lifetime, and past its absolute end whatever its use', async () => {
    const idle = await person('analyst', null);
    const old = await person('analyst', null);
    await withAdminClient(async (c) => {
      await c.query(
        `UPDATE _dbadmin.person_sessions SET idle_until = now() - interval '1 second' WHERE person_id = $1`,
        [idle.id],
      );
      await c.query(
        `UPDATE _dbadmin.person_sessions SET ends_at = now() - interval '1 second' WHERE person_id = $1`,
        [old.id],
      );
    });

    expect((await idle.as(people, { path: '/api/session' })).status).toBe(401);
    expect((await old.as(people, { path: '/api/session' })).status).toBe(401);
  });

  it('sweeps sessions that ended unused when someone signs in later', async () => {
    const idle = await person('analyst', null);
    await withAdminClient((c) =>
      c.query(
        `UPDATE _dbadmin.person_sessions SET idle_until = now() - interval '1 minute' WHERE person_id = $1`,
        [idle.id],
      ),
    );
    const later = new Date(Date.now() + 2 * 3_600_000);
    const seen = { address: undefined, userAgent: undefined };
    await startSession(
      await getDatabase(),
      { personId: idle.id },
      'password',
      await getConfig(),
      seen,
      undefined,
      later,
    );

    const ended = await withAdminClient(
      async (c) =>
        (
          await c.query(
            'SELECT count(*)::int AS n FROM _dbadmin.person_sessions WHERE person_id = $1 AND idle_until < now()',
            [idle.id],
          )
        ).rows[0].n,
    );
    expect(ended).toBe(0);
  });

  it('gives a new secret at every sign-in, and an owner ends anyone’s sessions', async () => {
    const { login, id } = await addPerson('analyst', null);
    const first = await signIn(login);
    const second = await signIn(login);
    expect(first.cookie).not.toBe(second.cookie);

    const ended = await call(people, { method: 'DELETE', path: `/api/people/${id}/sessions` });

    expect(ended.body).toEqual({ ended: 2 });
    expect((await first.as(people, { path: '/api/session' })).status).toBe(401);
    expect((await second.as(people, { path: '/api/session' })).status).toBe(401);
  });

  describe('with a sign-in limit', () => {
    withSetting('AUTH_MAX_FAILURES', '10');

    it('throttles sign-in per login, whatever address the guesses come from', async () => {
      const { login } = await addPerson('analyst', null);
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) {
        const reply = await call(people, {
          method: 'POST',
          path: '/api/session',
          auth: null,
          sourceIp: `100.64.37.${i + 1}`,
          body: { login, password: `wrong guess ${i}` },
        });
        statuses.push(reply.status);
      }
      const right = await call(people, {
        method: 'POST',
        path: '/api/session',
        auth: null,
        sourceIp: '100.64.37.200',
        body: { login, password: PASSWORD },
      });

      expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
      expect(statuses.slice(10)).toEqual([429, 429]);
      expect(right.status).toBe(429);
    });

    it('gives a burst of guesses sent at once no more than the limit', async () => {
      const { login } = await addPerson('analyst', null);
      const guesses = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          call(people, {
            method: 'POST',
            path: '/api/session',
            auth: null,
            sourceIp: `100.64.38.${i + 1}`,
            body: { login, password: `burst guess ${i}` },
          }),
        ),
      );
      const checked = guesses.filter((reply) => reply.status === 401).length;

      expect(checked).toBeLessThanOrEqual(10);
      expect(guesses.filter((reply) => reply.status === 429).length).toBe(25 - checked);
    });

    it('counts wrong current passwords of a password change as failed sign-ins', async () => {
      const signed = await person('analyst', null);
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++)
        statuses.push(
          (
            await signed.as(people, {
              method: 'POST',
              path: '/api/me/password',
              body: { currentPassword: `guess ${i}`, newPassword: 'a brand new password' },
              sourceIp: `100.64.39.${i + 1}`,
            })
          ).status,
        );

      expect(statuses.slice(0, 10)).toEqual(Array(10).fill(403));
      expect(statuses.slice(10)).toEqual([429, 429]);
    });
  });
});

describe('personal tokens', () => {
  it('carry at most their person’s rights, now and after a demotion, and end when revoked', async () => {
    const schema = await tenantSchema('token');
    const developer = await person('developer', null);
    const higher = await developer.as(people, {
      method: 'POST',
      path: '/api/me/tokens',
      body: { name: 'admin', role: 'admin' },
    });
    const made = await developer.as(people, { method: 'POST', path: '/api/me/tokens', body: { name: 'ci' } });
    const token = made.body.token as string;
    const insert = {
      method: 'POST',
      path: '/api/table/items/row',
      body: { schema, data: { name: 'by token' } },
    };

    const before = await call(rows, { ...insert, ...bearer(token) });
    const peopleList = await call(people, { path: '/api/people', ...bearer(token) });
    const mint = await call(people, {
      method: 'POST',
      path: '/api/me/tokens',
      body: { name: 'again' },
      ...bearer(token),
    });
    await call(people, { method: 'PATCH', path: `/api/people/${developer.id}`, body: { role: 'analyst' } });
    const afterDemotion = await call(rows, { ...insert, ...bearer(token) });
    await developer.as(people, { method: 'DELETE', path: `/api/me/tokens/${made.body.id}` });
    const afterRevoke = await call(tables, { path: '/api/table/items', query: { schema }, ...bearer(token) });

    expect(higher.status).toBe(403);
    expect(made.status).toBe(201);
    expect(token).toMatch(/^dbp_/);
    expect([before.status, peopleList.status, mint.status]).toEqual([201, 403, 403]);
    expect(afterDemotion.status).toBe(403);
    expect(afterRevoke.status).toBe(401);
  });

  it('cannot change their person’s password or sessions, nor reset their own person; a reset ends them', async () => {
    const owner = await person('owner', null);
    const made = await owner.as(people, { method: 'POST', path: '/api/me/tokens', body: { name: 'ci' } });
    const token = bearer(made.body.token);

    const password = await call(people, {
      method: 'POST',
      path: '/api/me/password',
      body: { currentPassword: PASSWORD, newPassword: 'taken over by a token' },
      ...token,
    });
    const reset = await call(people, {
      method: 'POST',
      path: `/api/people/${owner.id}/reset`,
      body: {},
      ...token,
    });
    const byOther = await call(people, { method: 'POST', path: `/api/people/${owner.id}/reset`, body: {} });
    const after = await call(people, { path: '/api/session', ...token });

    expect([password.status, reset.status, byOther.status]).toEqual([403, 403, 200]);
    expect(after.status).toBe(401);
  });

  it('are audited as their person', async () => {
    const schema = await tenantSchema('tokaudit');
    const developer = await person('developer', null);
    const made = await developer.as(people, { method: 'POST', path: '/api/me/tokens', body: { name: 'ci' } });
    await call(rows, {
      method: 'POST',
      path: '/api/table/items/row',
      body: { schema, data: { name: 't' } },
      ...bearer(made.body.token),
    });

    const entries = await call(audit, { path: '/api/audit', query: { schema, action: 'row.insert' } });

    expect(entries.body.entries[0]).toMatchObject({
      actor: 'person',
      personId: developer.id,
      personLogin: developer.login,
      via: 'token',
    });
  });

  it('are refused to API keys, and API keys to people', async () => {
    const schema = await tenantSchema('keyppl');
    const { key } = await createKey(schema, 'service_role');

    const list = await call(people, { path: '/api/people', ...bearer(key) });
    const mine = await call(people, { path: '/api/me/tokens', ...bearer(key) });

    expect([list.status, mine.status]).toEqual([403, 403]);
  });
});
