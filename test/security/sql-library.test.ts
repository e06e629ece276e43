import { handler as people } from '#functions/people';
import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { person } from '#test/support/people';

/**
 * The SQL library holds what people typed, which names their tables and, in a script, may hold
 * values. A person reads their own history and no one else's; a shared snippet reaches only the
 * people whose scope holds its schema; a snippet is changed or deleted only by whoever saved it
 * (or the administrator and unscoped owners); an API key reaches none of it.
 */

afterAll(closePool);

let inside: string;
let outside: string;
beforeAll(async () => {
  inside = await tenantSchema('libin');
  outside = await tenantSchema('libout');
});

describe('a person prying into others’ SQL', () => {
  it('never reads another person’s or the administrator’s history, whatever it searches', async () => {
    const [alice, mallory] = [await person('developer', null), await person('owner', null)];
    const secret = uniqueName('secret');
    await alice.as(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema: inside, sql: `SELECT '${secret}'`, history: true },
    });
    await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema: inside, sql: `SELECT '${secret}'`, history: true },
    });

    for (const q of [secret, '%', "' OR true --"]) {
      const seen = await mallory.as(query, { path: '/api/sql/history', query: { q, limit: '100' } });
      expect(seen.status).toBe(200);
      expect(JSON.stringify(seen.body)).not.toContain(secret);
    }
  });

  it('reads no shared snippet of a schema outside the scope, and cannot change or delete another’s', async () => {
    const owner = await person('developer', null);
    const scoped = await person('developer', [inside]);
    const name = uniqueName('outside');
    const saved = await owner.as(query, {
      method: 'POST',
      path: '/api/sql/snippets',
      body: { name, sql: `SELECT * FROM "${outside}".items`, schema: outside, shared: true },
    });
    const mine = await owner.as(query, {
      method: 'POST',
      path: '/api/sql/snippets',
      body: { name: `${name} inside`, sql: 'SELECT 1', schema: inside, shared: true },
    });

    const listed = await scoped.as(query, { path: '/api/sql/snippets' });
    const changes = [
      await scoped.as(query, {
        method: 'PATCH',
        path: `/api/sql/snippets/${saved.body.id}`,
        body: { shared: false },
      }),
      await scoped.as(query, { method: 'DELETE', path: `/api/sql/snippets/${saved.body.id}` }),
      await scoped.as(query, {
        method: 'PATCH',
        path: `/api/sql/snippets/${mine.body.id}`,
        body: { sql: 'DROP TABLE items' },
      }),
      await scoped.as(query, { method: 'DELETE', path: `/api/sql/snippets/${mine.body.id}` }),
    ];

    expect(JSON.stringify(listed.body)).not.toContain(outside);
    expect(listed.body.snippets.map((s: { name: string }) => s.name)).toContain(`${name} inside`);
    expect(changes.map((r) => r.status)).toEqual([404, 404, 403, 403]);
    const still = await owner.as(query, { path: '/api/sql/snippets' });
    expect(still.body.snippets.filter((s: { name: string }) => s.name.startsWith(name))).toEqual([
      expect.objectContaining({ name, shared: true }),
      expect.objectContaining({ name: `${name} inside`, sql: 'SELECT 1' }),
    ]);
  });

  it('a token narrowed to one schema sees only that schema’s runs and snippets of its person', async () => {
    const me = await person('developer', null);
    const secret = uniqueName('elsewhere');
    for (const where of [inside, outside]) {
      await me.as(query, {
        method: 'POST',
        path: '/api/query',
        body: { schema: where, sql: `SELECT '${secret} ${where}'`, history: true },
      });
      await me.as(query, {
        method: 'POST',
        path: '/api/sql/snippets',
        body: { name: `${secret} ${where}`, sql: `SELECT '${secret}'`, schema: where },
      });
    }
    const made = await me.as(people, {
      method: 'POST',
      path: '/api/me/tokens',
      body: { name: uniqueName('narrow'), schemas: [inside] },
    });
    const token = { auth: null, headers: { authorization: `Bearer ${made.body.token}` } };

    const seen = await call(query, { path: '/api/sql/history', query: { q: secret }, ...token });
    const snippets = await call(query, { path: '/api/sql/snippets', ...token });
    const cleared = await call(query, { method: 'DELETE', path: '/api/sql/history', ...token });
    const left = await me.as(query, { path: '/api/sql/history', query: { q: secret } });

    expect(seen.body.entries.map((e: { schema: string }) => e.schema)).toEqual([inside]);
    expect(JSON.stringify(snippets.body)).not.toContain(outside);
    expect(cleared.body.forgotten).toBe(1);
    expect(left.body.entries.map((e: { schema: string }) => e.schema)).toEqual([outside]);
  });

  it('an API key reaches neither history nor snippets, and keeps no history', async () => {
    const { key } = await createKey(inside, 'service_role', 'pry');
    const auth = bearer(key);
    const replies = [
      await call(query, { path: '/api/sql/history', ...auth }),
      await call(query, { method: 'DELETE', path: '/api/sql/history', ...auth }),
      await call(query, { path: '/api/sql/snippets', ...auth }),
      await call(query, {
        method: 'POST',
        path: '/api/sql/snippets',
        body: { name: 'k', sql: 'SELECT 1' },
        ...auth,
      }),
      await call(query, {
        method: 'POST',
        path: '/api/query',
        body: { sql: 'SELECT 1', history: true },
        ...auth,
      }),
    ];

    expect(replies.map((r) => r.status)).toEqual([403, 403, 403, 403, 403]);
  });
});
