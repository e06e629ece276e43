import { handler as query } from '#functions/query';
import { HISTORY_KEPT, HISTORY_SQL_CHARS } from '#lib/admin/sql-history';
import { SNIPPETS_KEPT } from '#lib/admin/sql-snippets';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { type Call, call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { person } from '#test/support/people';

type Signed = Awaited<ReturnType<typeof person>>;

/**
 * The SQL editor's library through the real handlers: each person's history, kept by
 * POST /api/query with history: true (failed runs too), searched and paged, trimmed to the last
 * HISTORY_KEPT; and named snippets, kept for oneself or shared with the people whose scope holds
 * their schema, changed only by whoever saved them.
 */

afterAll(closePool);

let schema: string;
let other: string;
let alice: Signed;
let bob: Signed;
let scoped: Signed;
beforeAll(async () => {
  schema = await tenantSchema('library');
  other = await tenantSchema('libraryother');
  alice = await person('developer', null);
  bob = await person('developer', null);
  scoped = await person('analyst', [other]);
});

type As = (request: Call) => ReturnType<typeof call>;
const admin: As = (request) => call(query, request);
const as =
  (who: Signed): As =>
  (request) =>
    who.as(query, request);

const run = (who: As, sql: string, extra: Record<string, unknown> = {}) =>
  who({ method: 'POST', path: '/api/query', body: { schema, sql, history: true, ...extra } });
const history = (who: As, q?: Record<string, string>) =>
  who({ path: '/api/sql/history', ...(q ? { query: q } : {}) });

describe('history', () => {
  it('keeps each person’s runs, failed ones too, newest first, and shows them to no one else', async () => {
    const mark = uniqueName('mark');
    await run(as(alice), `SELECT '${mark}' AS a FROM generate_series(1, 3)`);
    await run(as(alice), `SELECT nope_${mark}`);
    await run(as(bob), `SELECT '${mark}' AS b`);

    const mine = await history(as(alice), { q: mark.toUpperCase() });
    const bobs = await history(as(bob), { q: mark });
    const admins = await history(admin, { q: mark });

    expect(mine.status).toBe(200);
    expect(mine.body.entries).toEqual([
      expect.objectContaining({
        schema,
        sql: `SELECT nope_${mark}`,
        ok: false,
        rowCount: null,
        error: expect.stringContaining(`column "nope_${mark}" does not exist`),
      }),
      expect.objectContaining({
        sql: `SELECT '${mark}' AS a FROM generate_series(1, 3)`,
        ok: true,
        rowCount: 3,
        error: null,
        cut: false,
        durationMs: expect.any(Number),
        ranAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/),
      }),
    ]);
    expect(bobs.body.entries.map((e: { sql: string }) => e.sql)).toEqual([`SELECT '${mark}' AS b`]);
    expect(admins.body.entries).toEqual([]);
  });

  it('keeps nothing without history: true, and the admin’s runs in a history of its own', async () => {
    const mark = uniqueName('quiet');
    await admin({ method: 'POST', path: '/api/query', body: { schema, sql: `SELECT '${mark}'` } });
    expect((await history(admin, { q: mark })).body.entries).toEqual([]);

    await run(admin, `SELECT '${mark}'`);
    expect((await history(admin, { q: mark })).body.entries).toHaveLength(1);
    expect((await history(as(alice), { q: mark })).body.entries).toEqual([]);
  });

  it('pages by before, and forgets a person’s history on request', async () => {
    const me = await person('developer', null);
    for (let n = 1; n <= 5; n++) await run(as(me), `SELECT ${n}`);

    const first = await history(as(me), { limit: '2' });
    const second = await history(as(me), { limit: '2', before: String(first.body.next) });
    const rest = await history(as(me), { limit: '2', before: String(second.body.next) });

    expect([first, second, rest].map((r) => r.body.entries.map((e: { sql: string }) => e.sql))).toEqual([
      ['SELECT 5', 'SELECT 4'],
      ['SELECT 3', 'SELECT 2'],
      ['SELECT 1'],
    ]);
    expect(rest.body.next).toBeNull();
    const forgot = await me.as(query, { method: 'DELETE', path: '/api/sql/history' });
    expect(forgot.body).toEqual({ success: true, forgotten: 5 });
    expect((await history(as(me))).body.entries).toEqual([]);
  });

  it(`keeps the last ${HISTORY_KEPT} runs, and a long script cut, saying so`, async () => {
    const me = await person('developer', null);
    await withAdminClient((c) =>
      c.query(
        `INSERT INTO _dbadmin.sql_history (person_id, schema_name, sql, cut, ok)
         SELECT $1, $2, 'SELECT ' || g, false, true FROM generate_series(1, $3) g`,
        [me.id, schema, HISTORY_KEPT],
      ),
    );
    const long = `SELECT 1 -- ${'x'.repeat(HISTORY_SQL_CHARS)}`;
    await run(as(me), long);

    const kept = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT count(*)::int AS n, count(*) FILTER (WHERE sql = 'SELECT 1')::int AS first,
                    count(*) FILTER (WHERE sql = 'SELECT 2')::int AS second
               FROM _dbadmin.sql_history WHERE person_id = $1`,
            [me.id],
          )
        ).rows[0],
    );
    const newest = (await history(as(me), { limit: '1' })).body.entries[0];

    expect(kept).toEqual({ n: HISTORY_KEPT, first: 0, second: 1 });
    expect(newest).toMatchObject({ cut: true, ok: true });
    expect(newest.sql).toHaveLength(HISTORY_SQL_CHARS);
  });

  it('refuses history: true from an API key, and the library’s routes to keys', async () => {
    const { key } = await createKey(schema, 'service_role', 'library');
    const auth = bearer(key);

    const ran = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT 1', history: true },
      ...auth,
    });
    const read = await call(query, { path: '/api/sql/history', ...auth });
    const snippets = await call(query, { path: '/api/sql/snippets', ...auth });

    expect(ran.status).toBe(403);
    expect(ran.body.message).toMatch(/not for API keys: leave history out/);
    expect(read.status).toBeGreaterThanOrEqual(401);
    expect(read.status).toBeLessThanOrEqual(403);
    expect(snippets.status).toBeGreaterThanOrEqual(401);
    expect(snippets.status).toBeLessThanOrEqual(403);
  });
});

describe('POST /api/sql/split', () => {
  const split = (sql: string) => call(query, { method: 'POST', path: '/api/sql/split', body: { sql } });

  it('says where each statement starts and ends, in characters, as PostgreSQL splits them', async () => {
    const sql = "SELECT 'é;€' AS a; INSERT INTO t VALUES (1);\n-- note\nSELECT 2";
    const reply = await split(sql);

    expect(reply.status).toBe(200);
    const characters = Array.from(sql);
    expect(
      reply.body.statements.map((s: { start: number; end: number; query: boolean }) => [
        characters.slice(s.start, s.end).join(''),
        s.query,
      ]),
    ).toEqual([
      ["SELECT 'é;€' AS a", true],
      [' INSERT INTO t VALUES (1)', false],
      ['\n-- note\nSELECT 2', true],
    ]);
  });

  it('answers 400 for a script of comments alone: nothing to run', async () => {
    const reply = await split('-- only a note\n;');

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({ error: 'No statement', message: 'the script holds no statement to run' });
  });

  it('answers 400 with the position PostgreSQL would give for a script it cannot read', async () => {
    const reply = await split('SELECT 1; SELEC € 2');

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'Invalid SQL',
      message: 'syntax error at or near "SELEC"',
      position: 11,
    });
  });
});

describe('snippets', () => {
  const save = (who: As, body: Record<string, unknown>) =>
    who({ method: 'POST', path: '/api/sql/snippets', body });
  const list = async (who: As) =>
    (await who({ path: '/api/sql/snippets' })).body.snippets as { name: string }[];
  const names = async (who: As, prefix: string) =>
    (await list(who)).map((s) => s.name).filter((name) => name.startsWith(prefix));

  it('keeps a person’s snippets to themselves, and shares shared ones with the people of their schema', async () => {
    const p = uniqueName('s');
    const mine = await save(as(alice), { name: `${p} mine`, sql: 'SELECT 1' });
    await save(as(alice), { name: `${p} team`, sql: 'SELECT 2', shared: true });
    await save(as(alice), { name: `${p} library`, sql: 'SELECT 3', schema, shared: true });
    await save(as(alice), { name: `${p} other`, sql: 'SELECT 4', schema: other, shared: true });

    expect(mine.status).toBe(201);
    expect(mine.body).toMatchObject({
      name: `${p} mine`,
      sql: 'SELECT 1',
      schema: null,
      shared: false,
      mine: true,
    });
    expect(await names(as(alice), p)).toEqual([`${p} library`, `${p} mine`, `${p} other`, `${p} team`]);
    expect(await names(as(bob), p)).toEqual([`${p} library`, `${p} other`, `${p} team`]);
    expect(await names(as(scoped), p)).toEqual([`${p} other`, `${p} team`]);
    expect(await names(admin, p)).toEqual([`${p} library`, `${p} other`, `${p} team`]);
  });

  it('lets only whoever saved it change or delete it; the administrator may', async () => {
    const p = uniqueName('c');
    const shared = (await save(as(alice), { name: `${p} shared`, sql: 'SELECT 1', shared: true })).body;
    const hidden = (await save(as(alice), { name: `${p} hidden`, sql: 'SELECT 2' })).body;

    const changed = await alice.as(query, {
      method: 'PATCH',
      path: `/api/sql/snippets/${shared.id}`,
      body: { sql: 'SELECT 10', name: `${p} renamed` },
    });
    const byBob = await bob.as(query, {
      method: 'PATCH',
      path: `/api/sql/snippets/${shared.id}`,
      body: { sql: 'x' },
    });
    const unseen = await bob.as(query, { method: 'DELETE', path: `/api/sql/snippets/${hidden.id}` });
    const byAdmin = await admin({ method: 'DELETE', path: `/api/sql/snippets/${hidden.id}` });

    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({
      name: `${p} renamed`,
      sql: 'SELECT 10',
      shared: true,
      author: alice.login,
    });
    expect(byBob.status).toBe(403);
    expect(byBob.body.message).toMatch(/save a copy under your own name/);
    expect(unseen.status).toBe(404);
    expect(byAdmin.status).toBe(200);
    expect(await names(as(alice), p)).toEqual([`${p} renamed`]);
  });

  it(`keeps ${SNIPPETS_KEPT} snippets a person at most, and says so`, async () => {
    const me = await person('analyst', null);
    await withAdminClient((c) =>
      c.query(
        `INSERT INTO _dbadmin.sql_snippets (owner, author, name, sql)
         SELECT $1, $2, 'n' || g, 'SELECT 1' FROM generate_series(1, $3) g`,
        [`person:${me.id}`, me.login, SNIPPETS_KEPT],
      ),
    );

    const over = await save(as(me), { name: 'one more', sql: 'SELECT 1' });

    expect(over.status).toBe(409);
    expect(over.body).toEqual({
      error: 'Too many snippets',
      message: `you keep ${SNIPPETS_KEPT} snippets already: delete some first`,
    });
  });

  it('answers 409 for a name taken, 403 for a schema outside the scope, 400 for nothing to change', async () => {
    const p = uniqueName('e');
    await save(as(alice), { name: p, sql: 'SELECT 1' });

    const taken = await save(as(alice), { name: p, sql: 'SELECT 2' });
    const sameNameOtherPerson = await save(as(bob), { name: p, sql: 'SELECT 2' });
    const outside = await save(as(scoped), { name: p, sql: 'SELECT 1', schema });
    const empty = await alice.as(query, { method: 'PATCH', path: '/api/sql/snippets/1', body: {} });
    const blank = await save(as(alice), { name: '  ', sql: 'SELECT 1' });

    expect(taken.status).toBe(409);
    expect(taken.body.message).toMatch(`you already have a snippet named "${p}"`);
    expect(sameNameOtherPerson.status).toBe(201);
    expect(outside.status).toBe(403);
    expect(empty.status).toBe(400);
    expect(blank.status).toBe(400);
  });
});
