import { randomUUID } from 'node:crypto';
import * as imports from '#functions/imports';
import * as keys from '#functions/keys';
import * as rows from '#functions/rows';
import * as schemas from '#functions/schemas';
import { sweepKeys } from '#lib/db/idempotency';
import { closePool, getDatabase } from '#lib/db/pool';
import { recordScope } from '#lib/http/idempotency';
import { openApiDocument } from '#lib/http/openapi';
import type { Principal } from '#lib/principal';
import { asTenant, bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { type Call, call } from '#test/support/http';
import { LosingProxy, losingStatements } from '#test/support/lost-answer';
import { uniqueName } from '#test/support/names';
import { withSetting } from '#test/support/settings';

/**
 * Idempotency-Key through the real handlers, against a real PostgreSQL reached through a proxy
 * that can lose an answer: a retry answers the first answer and writes nothing again, whether
 * the answer was lost on the way, the database crashed as it committed, or the retry came while
 * the first was still running. The tenant's attacks on the records are in test/security/idempotency.
 */

// This file's own module registry gets its own config and pools, all through the proxy.
const target = new URL(process.env.DATABASE_URL as string);
const proxy = new LosingProxy(target.hostname, Number(target.port || 5432));

let schema: string;
beforeAll(async () => {
  await proxy.up();
  const viaProxy = new URL(target);
  viaProxy.port = String(proxy.port);
  process.env.DATABASE_URL = viaProxy.toString();
  schema = await tenantSchema('idem');
});

afterAll(async () => {
  await closePool();
  await proxy.down();
  process.env.DATABASE_URL = target.toString();
});

const ADMIN: Principal = { kind: 'admin' };
const ROW = 'POST /api/table/{tableName}/row';
const withKey = (key: string, request: Call): Call => ({
  ...request,
  headers: { ...request.headers, 'Idempotency-Key': key },
});
const insert = (key: string, data: Record<string, unknown>, table = 'items', auth = {}) =>
  call(
    rows.handler,
    withKey(key, { method: 'POST', path: `/api/table/${table}/row`, body: { schema, data }, ...auth }),
  );
const named = (name: string, table = 'items') =>
  withAdminClient(async (c) =>
    Number(
      (await c.query(`SELECT count(*) AS n FROM "${schema}"."${table}" WHERE name = $1`, [name])).rows[0].n,
    ),
  );
/** The first request's time is up (its process gave up or died): the database's clock moved on. */
const timeUp = (key: string, route = ROW, principal = ADMIN) =>
  withAdminClient((c) =>
    c.query(
      `UPDATE _dbadmin.idempotency_keys SET lease_until = now() - interval '1 second' WHERE scope = $1`,
      [recordScope(principal, route, key)],
    ),
  );

describe('a retry with the same Idempotency-Key', () => {
  it('answers the first answer again, says so, and writes the row once', async () => {
    const key = randomUUID();
    const name = uniqueName('once');

    const first = await insert(key, { name });
    const again = await insert(key, { name });

    expect(first.status).toBe(201);
    expect(first.headers['idempotency-replayed']).toBeUndefined();
    expect(again).toMatchObject({ status: 201, body: first.body });
    expect(again.headers['idempotency-replayed']).toBe('true');
    expect(await named(name)).toBe(1);
  });

  it('with another body is refused (409) and writes nothing', async () => {
    const key = randomUUID();
    const name = uniqueName('first');
    const other = uniqueName('other');

    expect((await insert(key, { name })).status).toBe(201);
    const reused = await insert(key, { name: other });

    expect(reused.status).toBe(409);
    expect(reused.body).toEqual({
      error: 'Idempotency-Key reused',
      message: expect.stringMatching(/was first sent with another request/),
    });
    expect(await named(other)).toBe(0);
  });

  it('on another table is another request: refused, and nothing written there', async () => {
    await asTenant(schema, `CREATE TABLE "${schema}".others (id serial PRIMARY KEY, name text)`);
    const key = randomUUID();
    const name = uniqueName('where');

    expect((await insert(key, { name })).status).toBe(201);
    expect((await insert(key, { name }, 'others')).status).toBe(409);
    expect(await named(name, 'others')).toBe(0);
  });

  it('is kept apart per principal: a key of the schema with the same Idempotency-Key makes its own row', async () => {
    const writer = await createKey(schema, 'service_role', uniqueName('writer'));
    const key = randomUUID();
    const name = uniqueName('apart');

    const byAdmin = await insert(key, { name });
    const byKey = await insert(key, { name }, 'items', bearer(writer.key));

    expect([byAdmin.status, byKey.status]).toEqual([201, 201]);
    expect(byKey.headers['idempotency-replayed']).toBeUndefined();
    expect(await named(name)).toBe(2);
  });

  it('after a failure runs again: a failed answer is not kept', async () => {
    const key = randomUUID();
    const name = uniqueName('later');

    const missing = await insert(key, { name }, 'later_table');
    await asTenant(schema, `CREATE TABLE "${schema}".later_table (id serial PRIMARY KEY, name text)`);
    const retried = await insert(key, { name }, 'later_table');

    expect(missing.status).toBe(404);
    expect(retried.status).toBe(201);
    expect(retried.headers['idempotency-replayed']).toBeUndefined();
    expect(await named(name, 'later_table')).toBe(1);
  });

  it('after the record expired (24 hours) is a new request', async () => {
    const key = randomUUID();
    const name = uniqueName('old');
    expect((await insert(key, { name })).status).toBe(201);
    await withAdminClient((c) =>
      c.query(
        `UPDATE _dbadmin.idempotency_keys SET expires_at = now() - interval '1 second' WHERE scope = $1`,
        [recordScope(ADMIN, ROW, key)],
      ),
    );

    const anew = await insert(key, { name: `${name}-new` });

    expect(anew.status).toBe(201);
    expect(anew.headers['idempotency-replayed']).toBeUndefined();
    expect(await named(`${name}-new`)).toBe(1);
  });
});

describe('an Idempotency-Key on a write that does not take one', () => {
  it('is refused with 400 naming the routes that do, and nothing is written', async () => {
    const name = uniqueName('not-keyed');
    expect((await insert(randomUUID(), { name })).status).toBe(201);

    const update = await call(rows.handler, {
      method: 'PATCH',
      path: '/api/table/items/rows',
      query: { filter: `name.eq.${name}` },
      body: { schema, set: { name: `${name}-changed` } },
      headers: { 'Idempotency-Key': randomUUID() },
    });

    expect([update.status, update.body.error]).toEqual([400, 'Idempotency-Key not taken']);
    expect(update.body.message).toMatch(/does not take an Idempotency-Key: only row inserts/);
    expect(await named(name)).toBe(1);
    expect(await named(`${name}-changed`)).toBe(0);
  });
});

/** A row inserted with a fresh key, whose record has expired since: the record's scope. */
async function expiredRecord(prefix: string): Promise<Buffer> {
  const key = randomUUID();
  expect((await insert(key, { name: uniqueName(prefix) })).status).toBe(201);
  const scope = recordScope(ADMIN, ROW, key);
  await withAdminClient((c) =>
    c.query(
      `UPDATE _dbadmin.idempotency_keys SET expires_at = now() - interval '1 second' WHERE scope = $1`,
      [scope],
    ),
  );
  return scope;
}

const recordsOf = (scope: Buffer) =>
  withAdminClient(
    async (c) =>
      (await c.query('SELECT 1 FROM _dbadmin.idempotency_keys WHERE scope = $1', [scope])).rowCount,
  );

describe('expired records, with no request sending an Idempotency-Key', () => {
  it('are swept by the writes that come (with the audit log’s own sweep)', async () => {
    const scope = await expiredRecord('unkeyed-sweep');
    const left = () => recordsOf(scope);

    // Ten minutes later (sweeps run at most that often per process), a write without a key.
    const now = jest.spyOn(performance, 'now').mockReturnValue(performance.now() + 3_600_000);
    try {
      const plain = await call(rows.handler, {
        method: 'POST',
        path: '/api/table/items/row',
        body: { schema, data: { name: uniqueName('plain') } },
      });
      expect(plain.status).toBe(201);
    } finally {
      now.mockRestore();
    }
    for (let waited = 0; waited < 40 && (await left()) !== 0; waited++)
      await new Promise((r) => setTimeout(r, 50));

    expect(await left()).toBe(0);
  });
});

describe('an expired record', () => {
  it('is swept away in the background, by its expiry', async () => {
    const scope = await expiredRecord('swept');

    // A moment past any sweep this process made (they run ten minutes apart).
    const swept = await sweepKeys(await getDatabase(), Number.MAX_SAFE_INTEGER);

    expect(swept).toBeGreaterThanOrEqual(1);
    expect(await recordsOf(scope)).toBe(0);
  });
});

describe('when the answer is lost', () => {
  const COMMIT_WITH_ENTRY = /INSERT INTO _dbadmin_audit\.inbox[\s\S]*COMMIT/;

  it('on its way back from a COMMIT that happened, the retry is told so and writes nothing again', async () => {
    const key = randomUUID();
    const name = uniqueName('lost');

    const lost = proxy.loseAnswerTo(COMMIT_WITH_ENTRY);
    const first = await insert(key, { name });
    await lost;
    const retried = await insert(key, { name });

    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(retried.status).toBe(409);
    expect(retried.body).toEqual({
      error: 'Already applied',
      message: expect.stringMatching(/made its change, but its answer was lost/),
    });
    expect(await named(name)).toBe(1);
  });

  it('because PostgreSQL crashed as it committed, the retry waits for the first, then finds its change made', async () => {
    const key = randomUUID();
    const name = uniqueName('crash');

    const crashed = proxy.loseAnswerTo(COMMIT_WITH_ENTRY, { crash: true });
    const first = await insert(key, { name });
    await crashed;
    await proxy.up();
    const meanwhile = await insert(key, { name });
    await timeUp(key);
    const retried = await insert(key, { name });

    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(meanwhile.status).toBe(409);
    expect(meanwhile.body.error).toBe('Request in progress');
    expect(Number(meanwhile.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
    expect(retried.status).toBe(409);
    expect(retried.body.error).toBe('Already applied');
    expect(await named(name)).toBe(1);
  });

  it('because PostgreSQL crashed before the COMMIT, the retry once the first’s time is up writes the row, once', async () => {
    const key = randomUUID();
    const name = uniqueName('before');

    const crashed = proxy.loseAnswerTo(new RegExp(`INSERT INTO "${schema}"\\."items"`), { crash: true });
    const first = await insert(key, { name });
    await crashed;
    await proxy.up();
    await timeUp(key);
    const retried = await insert(key, { name });

    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(retried.status).toBe(201);
    expect(await named(name)).toBe(1);
  });
});

describe('with the audit log off (AUDIT_LOG=off), so no entry can prove a commit', () => {
  withSetting('AUDIT_LOG', 'off');

  it('still answers a retry the first answer, and frees the key after a refusal', async () => {
    const key = randomUUID();
    const name = uniqueName('unaudited');

    const refused = await insert(key, { name }, 'not_yet');
    const first = await insert(key, { name });
    const again = await insert(key, { name });

    expect(refused.status).toBe(404);
    expect(first.status).toBe(201);
    expect(again).toMatchObject({ status: 201, body: first.body });
    expect(await named(name)).toBe(1);
  });

  it('knows a request whose COMMIT’s answer was lost made its change: the retry is told so, never run again', async () => {
    const key = randomUUID();
    const name = uniqueName('unknown');

    const lost = proxy.loseAnswerTo(
      /^Q[\s\S]{4}SELECT _dbadmin_audit\.idempotency_bound[\s\S]*COMMIT[\s\S]$/,
    );
    const first = await insert(key, { name });
    await lost;
    const retried = await insert(key, { name });

    expect(first.status).toBeGreaterThanOrEqual(500);
    expect(retried.status).toBe(409);
    expect(retried.body.error).toBe('Already applied');
    expect(await named(name)).toBe(1);
  });

  it('frees the key of a request that failed before any transaction of its began: the retry runs', async () => {
    const key = randomUUID();
    const name = uniqueName('never-began');
    // The first's BEGIN never reaches PostgreSQL: its connection is lost as it is sent.
    let cut = false;
    const restore = losingStatements((text) => {
      if (cut || !text.startsWith('BEGIN')) return false;
      cut = true;
      return true;
    });
    let first: Awaited<ReturnType<typeof insert>>;
    try {
      first = await insert(key, { name });
    } finally {
      restore();
    }
    const retried = await insert(key, { name });

    expect(first.status).toBe(503);
    expect(retried.status).toBe(201);
    expect(await named(name)).toBe(1);
  });
});

describe('duplicates sent together', () => {
  it('write once: the one that comes second is told to retry later, then gets the first answer', async () => {
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".slow (id serial PRIMARY KEY, name text);
       CREATE FUNCTION "${schema}".slowly() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN PERFORM pg_sleep(0.5); RETURN NEW; END $$;
       CREATE TRIGGER slowly BEFORE INSERT ON "${schema}".slow FOR EACH ROW EXECUTE FUNCTION "${schema}".slowly()`,
    );
    const key = randomUUID();
    const name = uniqueName('together');

    const both = await Promise.all([insert(key, { name }, 'slow'), insert(key, { name }, 'slow')]);
    const later = await insert(key, { name }, 'slow');

    const statuses = both.map((reply) => reply.status).sort();
    expect(statuses).toEqual([201, 409]);
    const second = both.find((reply) => reply.status === 409);
    expect(second?.body.error).toBe('Request in progress');
    expect(second?.headers['Retry-After']).toBe('1');
    expect(later.status).toBe(201);
    expect(later.body).toEqual(both.find((reply) => reply.status === 201)?.body);
    expect(await named(name, 'slow')).toBe(1);
  });
});

describe('every write a client may retry', () => {
  it('bulk rows: answered again, written once', async () => {
    const key = randomUUID();
    const name = uniqueName('bulk');
    const bulk = () =>
      call(
        rows.handler,
        withKey(key, {
          method: 'POST',
          path: '/api/table/items/rows',
          body: { schema, rows: [{ name }, { name }] },
        }),
      );

    const first = await bulk();
    const again = await bulk();

    expect(first.status).toBe(201);
    expect(again).toMatchObject({ status: 201, body: first.body });
    expect(again.headers['idempotency-replayed']).toBe('true');
    expect(await named(name)).toBe(2);
  });

  it('an import’s commit: answered again, written once', async () => {
    const key = randomUUID();
    const opened = await call(imports.handler, {
      method: 'POST',
      path: '/api/table/items/imports',
      body: { schema, format: 'csv' },
    });
    const id = opened.body.id as string;
    const name = uniqueName('imp');
    await call(imports.handler, {
      method: 'PUT',
      path: `/api/table/items/imports/${id}/parts/1`,
      query: { schema },
      headers: { 'content-type': 'text/csv' },
      body: `name\n${name}\n`,
    });
    const commit = () =>
      call(
        imports.handler,
        withKey(key, {
          method: 'POST',
          path: `/api/table/items/imports/${id}/commit`,
          body: { schema, parts: 1 },
        }),
      );

    const first = await commit();
    const again = await commit();

    expect(first.status).toBe(200);
    expect(again).toMatchObject({ status: 200, body: first.body });
    expect(again.headers['idempotency-replayed']).toBe('true');
    expect(await named(name)).toBe(1);
  });

  it('a schema’s creation: answered again, made once', async () => {
    const key = randomUUID();
    const schemaName = uniqueName('idem_made');
    const create = () =>
      call(
        schemas.handler,
        withKey(key, {
          method: 'POST',
          path: '/api/schema/create',
          body: { schemaName, password: 'schema-pass-1' },
        }),
      );

    const first = await create();
    const again = await create();

    expect(first.status).toBe(201);
    expect(again).toMatchObject({ status: 201, body: first.body });
    expect(again.headers['idempotency-replayed']).toBe('true');
  });

  it('a key’s creation: made once; the retry names the key made, never its secret, shown once', async () => {
    const key = randomUUID();
    const keyName = uniqueName('made');
    const create = () =>
      call(
        keys.handler,
        withKey(key, {
          method: 'POST',
          path: `/api/project/${schema}/keys`,
          body: { keyName, keyType: 'anon' },
        }),
      );

    const first = await create();
    const again = await create();
    const listed = await call(keys.handler, { path: `/api/project/${schema}/keys` });

    expect(first.status).toBe(201);
    expect(again.status).toBe(409);
    expect(again.body).toEqual({
      error: 'Already made',
      message: expect.stringMatching(/shown once/),
      first: {
        id: first.body.id,
        keyPrefix: first.body.keyPrefix,
        keyName,
        keyType: 'anon',
        schemaName: schema,
        createdAt: first.body.createdAt,
      },
    });
    expect(again.text).not.toContain(first.body.key);
    expect(listed.body.filter((made: { key_name: string }) => made.key_name === keyName)).toHaveLength(1);
    const kept = await withAdminClient(
      async (c) =>
        (
          await c.query('SELECT answer FROM _dbadmin.idempotency_keys WHERE scope = $1', [
            recordScope(ADMIN, 'POST /api/project/{schema}/keys', key),
          ])
        ).rows,
    );
    expect(JSON.stringify(kept)).not.toContain(first.body.key);
  });
});

describe('the Idempotency-Key header', () => {
  it.each([
    ['empty', ''],
    ['over 255 characters', 'k'.repeat(256)],
    ['not ASCII', 'clé'],
    ['a control character', 'a\tb'],
  ])('is refused when %s (400), and nothing is written', async (_, key) => {
    const name = uniqueName('bad');

    const reply = await insert(key, { name });

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'Invalid Idempotency-Key',
      message: expect.stringMatching(/1 to 255 printable ASCII characters/),
    });
    expect(await named(name)).toBe(0);
  });

  it('is documented on the routes that take it, with how long an answer is kept', () => {
    const document = openApiDocument([...rows.routes, ...keys.routes, ...schemas.routes, ...imports.routes], {
      title: 't',
      version: '1',
    });
    type Parameter = { name: string; in: string; description?: string };
    const takes = (path: string, method: string) => {
      const operation = document.paths[path]?.[method] as { parameters?: Parameter[] } | undefined;
      return operation?.parameters?.find((p) => p.in === 'header' && p.name === 'Idempotency-Key');
    };

    for (const [path, method] of [
      ['/api/table/{tableName}/row', 'post'],
      ['/api/table/{tableName}/rows', 'post'],
      ['/api/table/{tableName}/imports/{importId}/commit', 'post'],
      ['/api/schema/create', 'post'],
      ['/api/project/{schema}/keys', 'post'],
    ] as const) {
      expect({ path, described: takes(path, method)?.description }).toEqual({
        path,
        described: expect.stringMatching(/24 hours/),
      });
    }
    expect(takes('/api/table/{tableName}/rows', 'patch')).toBeUndefined();
  });
});
