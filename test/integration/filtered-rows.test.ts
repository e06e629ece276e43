import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { closePool } from '#lib/db/pool';
import { withAdminClient } from '#test/support/db';
import { type Call, call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { withSetting } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

/**
 * PATCH /api/table/:tableName/rows (set columns on every row a filter finds) and SPEC's bulk delete
 * with the same filters: all or nothing, guarded by all=true and maxAffected, through the real
 * handler against a real PostgreSQL. Attacks by a hostile tenant: test/security/filtered-rows.
 */

afterAll(closePool);

let schema: string;

/** The admin's SQL in the test's schema, as its role (tables owned by the schema). */
async function run(sql: string): Promise<void> {
  const reply = await call(query, { method: 'POST', path: '/api/query', body: { sql, schema } });
  if (reply.status !== 200) throw new Error(`${sql}: ${reply.text}`);
}

const stored = (table: string) =>
  withAdminClient(async (c) => (await c.query(`SELECT * FROM "${schema}"."${table}" ORDER BY 1`)).rows);

const patch = (table: string, q: Call['query'], body: Record<string, unknown>) =>
  call(rows, { method: 'PATCH', path: `/api/table/${table}/rows`, query: q, body: { schema, ...body } });

const remove = (table: string, q: Call['query'], body: Record<string, unknown> = {}) =>
  call(rows, {
    method: 'POST',
    path: `/api/table/${table}/rows/delete`,
    query: q,
    body: { schema, ...body },
  });

/** `people (id int pk, name text, age int, city text, tags jsonb)` with five rows. */
async function people(): Promise<string> {
  const name = uniqueName('people');
  await run(`
    CREATE TABLE ${name} (id int PRIMARY KEY, name text NOT NULL, age int CHECK (age >= 0), city text, tags jsonb);
    INSERT INTO ${name} VALUES
      (1, 'Ann', 30, 'Berlin', NULL), (2, 'Bob', 40, 'Paris', NULL), (3, 'Cy', 50, 'Berlin', NULL),
      (4, 'Di', NULL, 'Rome', NULL), (5, 'Ed', 70, 'Berlin', NULL)`);
  return name;
}

beforeAll(async () => {
  schema = await freshSchema('fltr');
});

describe('PATCH /api/table/:tableName/rows', () => {
  it('sets the columns on every row the filters find, and answers them as stored with their count', async () => {
    const table = await people();

    const reply = await patch(
      table,
      { filter: ['city.eq.Berlin', 'age.gte.40'] },
      { set: { city: 'Bonn', tags: ['moved', { at: 2024 }] } },
    );

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      count: 2,
      rows: [
        { id: 3, name: 'Cy', age: 50, city: 'Bonn', tags: '["moved", {"at": 2024}]' },
        { id: 5, name: 'Ed', age: 70, city: 'Bonn', tags: '["moved", {"at": 2024}]' },
      ],
    });
    expect((await stored(table)).map((row) => row.city)).toEqual(['Berlin', 'Paris', 'Bonn', 'Rome', 'Bonn']);
  });

  it('takes or, and and q like a page read, and sets a column to null', async () => {
    const table = await people();

    const byOr = await patch(table, { or: '(age.is.null,name.eq.Ann)' }, { set: { city: null } });
    const byQ = await patch(table, { q: 'par' }, { set: { age: 41 } });

    expect([byOr.status, byOr.body.count, byQ.status, byQ.body.count]).toEqual([200, 2, 200, 1]);
    expect((await stored(table)).map((row) => [row.city, row.age])).toEqual([
      [null, 30],
      ['Paris', 41],
      ['Berlin', 50],
      [null, null],
      ['Berlin', 70],
    ]);
  });

  it('answers an empty list when no row matches', async () => {
    const table = await people();

    const reply = await patch(table, { filter: 'id.gt.100' }, { set: { city: 'x' } });

    expect([reply.status, reply.body]).toEqual([200, { rows: [], count: 0 }]);
  });

  it('refuses to run without a filter unless all=true, saying so, and changes every row with it', async () => {
    const table = await people();

    const none = await patch(table, {}, { set: { city: 'Oslo' } });
    const emptySearch = await patch(table, { q: '' }, { set: { city: 'Oslo' } });
    const before = await stored(table);
    const all = await patch(table, { all: 'true' }, { set: { city: 'Oslo' } });

    expect([none.status, none.body.error]).toEqual([400, 'Filter required']);
    expect(none.body.message).toMatch(/all=true/);
    expect(emptySearch.status).toBe(400);
    expect(before.map((row) => row.city)).toEqual(['Berlin', 'Paris', 'Berlin', 'Rome', 'Berlin']);
    expect([all.status, all.body.count]).toEqual([200, 5]);
    expect((await stored(table)).every((row) => row.city === 'Oslo')).toBe(true);
  });

  it.each<[string, Call['query'], Record<string, unknown>, RegExp]>([
    ['an unknown column in the filter', { filter: 'town.eq.Rome' }, { city: 'x' }, /no column "town"/],
    ['an unknown column in set', { filter: 'id.eq.1' }, { town: 'x' }, /has no column "town"/],
    [
      'a value its column refuses',
      { filter: 'id.eq.1' },
      { age: 'old' },
      /invalid input syntax for type integer/,
    ],
    ['a filter value its column refuses', { filter: 'age.gt.old' }, { city: 'x' }, /invalid input syntax/],
    ['a value a check refuses', { all: 'true' }, { age: -1 }, /check constraint/],
    ['a malformed filter', { or: '(id.eq.1' }, { city: 'x' }, /Invalid filter|expected/],
  ])('refuses %s with a 400 and changes nothing', async (_, q, set, message) => {
    const table = await people();
    const before = await stored(table);

    const reply = await patch(table, q, { set });

    expect(reply.status).toBe(400);
    expect(`${reply.body.error}: ${reply.body.message}`).toMatch(message);
    expect(await stored(table)).toEqual(before);
  });

  it.each<[string, Record<string, unknown>]>([
    ['no set', {}],
    ['an empty set', { set: {} }],
    ['set with column and value', { set: { city: 'x' }, column: 'city', value: 'x' }],
    ['an unknown field', { set: { city: 'x' }, where: 'id = 1' }],
  ])('refuses a body with %s', async (_, body) => {
    const table = await people();

    const reply = await patch(table, { all: 'true' }, body);

    expect(reply.status).toBe(400);
    expect((await stored(table)).map((row) => row.city)).toEqual([
      'Berlin',
      'Paris',
      'Berlin',
      'Rome',
      'Berlin',
    ]);
  });

  it('changes up to maxAffected rows, and past it answers 409 naming how many and changes nothing', async () => {
    const table = await people();

    const over = await patch(table, { filter: 'city.eq.Berlin', maxAffected: '2' }, { set: { age: 1 } });
    const afterOver = await stored(table);
    const within = await patch(table, { filter: 'city.eq.Berlin', maxAffected: '3' }, { set: { age: 2 } });

    expect([over.status, over.body.error]).toEqual([409, 'Too many rows']);
    expect(over.body.message).toMatch(/^3 rows would have been updated, more than maxAffected \(2\)/);
    expect(afterOver.map((row) => row.age)).toEqual([30, 40, 50, null, 70]);
    expect([within.status, within.body.count]).toEqual([200, 3]);
    expect((await stored(table)).map((row) => row.age)).toEqual([2, 40, 2, null, 2]);
  });

  it('with return=minimal answers the count alone, and maxAffected still holds', async () => {
    const table = await people();

    const over = await patch(
      table,
      { all: 'true', return: 'minimal', maxAffected: '4' },
      { set: { age: 1 } },
    );
    const reply = await patch(table, { all: 'true', return: 'minimal' }, { set: { age: 1 } });

    expect(over.status).toBe(409);
    expect([reply.status, reply.body]).toEqual([200, { count: 5 }]);
  });

  it('a trigger of the table that raises midway is a 400 with its message, and no row changed', async () => {
    const table = await people();
    await run(`
      CREATE FUNCTION ${table}_guard() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.id = 3 THEN RAISE EXCEPTION 'row 3 is frozen'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER guard BEFORE UPDATE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_guard()`);

    const reply = await patch(table, { all: 'true' }, { set: { city: 'x' } });

    expect([reply.status, reply.body.message]).toEqual([400, expect.stringMatching(/row 3 is frozen/)]);
    expect((await stored(table)).map((row) => row.city)).toEqual([
      'Berlin',
      'Paris',
      'Berlin',
      'Rome',
      'Berlin',
    ]);
  });

  it('updates a table without a primary key by its filter', async () => {
    const table = uniqueName('keyless');
    await run(`CREATE TABLE ${table} (a int, b text); INSERT INTO ${table} VALUES (1, 'x'), (2, 'y')`);

    const reply = await patch(table, { filter: 'a.eq.2' }, { set: { b: 'z' } });

    expect([reply.status, reply.body]).toEqual([200, { rows: [{ a: 2, b: 'z' }], count: 1 }]);
  });

  it('a missing table is a 404', async () => {
    const reply = await patch('missing', { all: 'true' }, { set: { a: 1 } });

    expect(reply.status).toBe(404);
  });

  describe('with QUERY_MAX_ROWS=2', () => {
    withSetting('QUERY_MAX_ROWS', '2');

    it('rows changed past the result limits are a 413 that changed nothing; return=minimal changes them', async () => {
      const table = await people();

      const tooMany = await patch(table, { filter: 'city.eq.Berlin' }, { set: { city: 'x' } });
      const afterTooMany = await stored(table);
      const minimal = await patch(
        table,
        { filter: 'city.eq.Berlin', return: 'minimal' },
        { set: { city: 'x' } },
      );

      expect(tooMany.status).toBe(413);
      expect(afterTooMany.map((row) => row.city)).toEqual(['Berlin', 'Paris', 'Berlin', 'Rome', 'Berlin']);
      expect([minimal.status, minimal.body.count]).toEqual([200, 3]);
    });

    it('maxAffected is answered before the result limits', async () => {
      const table = await people();

      const reply = await patch(table, { all: 'true', maxAffected: '4' }, { set: { city: 'x' } });

      expect([reply.status, reply.body.message]).toEqual([409, expect.stringMatching(/^5 rows/)]);
    });
  });
});

describe('SPEC’s PATCH /api/table/:tableName/:rowId beside it', () => {
  it('still updates the row whose key is 5', async () => {
    const table = await people();

    const reply = await call(rows, {
      method: 'PATCH',
      path: `/api/table/${table}/5`,
      body: { column: 'city', value: 'Oslo', schema },
    });

    expect([reply.status, reply.body]).toEqual([
      200,
      { row: { id: 5, name: 'Ed', age: 70, city: 'Oslo', tags: null } },
    ]);
  });

  it('still updates the row whose key is the text "rows": a body of SPEC’s shape is SPEC’s update', async () => {
    const table = uniqueName('named');
    await run(
      `CREATE TABLE ${table} (k text PRIMARY KEY, v text); INSERT INTO ${table} VALUES ('rows', 'a'), ('b', 'b')`,
    );

    const reply = await call(rows, {
      method: 'PATCH',
      path: `/api/table/${table}/rows`,
      body: { column: 'v', value: 'changed', schema },
    });
    const withQuery = await patch(table, { all: 'true' }, { column: 'v', value: 'x' });
    const notAnInteger = await call(rows, {
      method: 'PATCH',
      path: `/api/table/${await people()}/rows`,
      body: { column: 'city', value: 'x', schema },
    });

    expect([reply.status, reply.body]).toEqual([200, { row: { k: 'rows', v: 'changed' } }]);
    expect(withQuery.status).toBe(400);
    expect((await stored(table)).map((row) => row.v)).toEqual(['b', 'changed']);
    // As SPEC's route answers any key its column's type refuses.
    expect([notAnInteger.status, notAnInteger.body.message]).toEqual([
      400,
      expect.stringMatching(/invalid input syntax for type integer: "rows"/),
    ]);
  });
});

describe('POST /api/table/:tableName/rows/delete with a filter', () => {
  it('deletes the rows a filter finds, answering SPEC’s body', async () => {
    const table = await people();

    const reply = await remove(table, { filter: 'city.eq.Berlin', or: '(age.lt.40,age.gt.60)' });

    expect([reply.status, reply.body]).toEqual([
      200,
      { success: true, deletedCount: 2, message: `2 rows deleted from "${table}"` },
    ]);
    expect((await stored(table)).map((row) => row.id)).toEqual([2, 3, 4]);
  });

  it('with rowIds and a filter deletes the rows that are both', async () => {
    const table = await people();

    const reply = await remove(table, { filter: 'city.eq.Berlin' }, { rowIds: [1, 2, 3] });

    expect([reply.status, reply.body.deletedCount]).toEqual([200, 2]);
    expect((await stored(table)).map((row) => row.id)).toEqual([2, 4, 5]);
  });

  it('with rowIds alone deletes those rows, as SPEC says', async () => {
    const table = await people();

    const reply = await remove(table, {}, { rowIds: ['4', 5, 99] });

    expect([reply.status, reply.body.deletedCount]).toEqual([200, 2]);
    expect((await stored(table)).map((row) => row.id)).toEqual([1, 2, 3]);
  });

  it('without rowIds or a filter is a 400 unless all=true, which deletes every row', async () => {
    const table = await people();

    const none = await remove(table, {});
    const before = await stored(table);
    const all = await remove(table, { all: 'true' });

    expect([none.status, none.body.error]).toEqual([400, 'Filter required']);
    expect(none.body.message).toMatch(/rowIds.*all=true/);
    expect(before).toHaveLength(5);
    expect([all.status, all.body.deletedCount]).toEqual([200, 5]);
    expect(await stored(table)).toEqual([]);
  });

  it('deletes up to maxAffected rows, and past it answers 409 and deletes nothing', async () => {
    const table = await people();

    const over = await remove(table, { filter: 'city.eq.Berlin', maxAffected: '2' });
    const overIds = await remove(table, { maxAffected: '1' }, { rowIds: [1, 2] });
    const afterOver = await stored(table);
    const within = await remove(table, { filter: 'city.eq.Berlin', maxAffected: '3' });

    expect([over.status, over.body.message]).toEqual([
      409,
      expect.stringMatching(/^3 rows would have been deleted/),
    ]);
    expect(overIds.status).toBe(409);
    expect(afterOver).toHaveLength(5);
    expect([within.status, within.body.deletedCount]).toEqual([200, 3]);
    expect((await stored(table)).map((row) => row.id)).toEqual([2, 4]);
  });

  it.each<[string, Call['query'], Record<string, unknown>]>([
    ['an unknown column', { filter: 'town.eq.Rome' }, {}],
    ['a value its column refuses', { filter: 'age.eq.old' }, {}],
    ['an empty rowIds', { filter: 'id.eq.1' }, { rowIds: [] }],
    ['an unknown query parameter', { filter: 'id.eq.1', schema: 'x' }, {}],
  ])('refuses %s with a 400 and deletes nothing', async (_, q, body) => {
    const table = await people();

    const reply = await remove(table, q, body);

    expect(reply.status).toBe(400);
    expect(await stored(table)).toHaveLength(5);
  });

  it('a trigger that raises midway is a 400, and no row is deleted', async () => {
    const table = await people();
    await run(`
      CREATE FUNCTION ${table}_keep() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF OLD.id = 4 THEN RAISE EXCEPTION 'row 4 stays'; END IF; RETURN OLD; END $$;
      CREATE TRIGGER keep BEFORE DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_keep()`);

    const reply = await remove(table, { all: 'true' });

    expect([reply.status, reply.body.message]).toEqual([400, expect.stringMatching(/row 4 stays/)]);
    expect(await stored(table)).toHaveLength(5);
  });

  it('deletes from a table without a primary key by its filter; rowIds there are a 400', async () => {
    const table = uniqueName('keyless');
    await run(`CREATE TABLE ${table} (a int, b text); INSERT INTO ${table} VALUES (1, 'x'), (2, 'y')`);

    const byFilter = await remove(table, { filter: 'b.eq.y' });
    const byIds = await remove(table, {}, { rowIds: [1] });

    expect([byFilter.status, byFilter.body.deletedCount]).toEqual([200, 1]);
    expect([byIds.status, byIds.body.error]).toEqual([400, 'No single-column primary key']);
    expect(await stored(table)).toEqual([{ a: 1, b: 'x' }]);
  });

  it('matches rowIds against a varchar key as sent, never cut to the column’s length', async () => {
    const table = uniqueName('codes');
    await run(`CREATE TABLE ${table} (code varchar(3) PRIMARY KEY); INSERT INTO ${table} VALUES ('abc')`);

    const reply = await remove(table, {}, { rowIds: ['abcd'] });

    expect([reply.status, reply.body.deletedCount]).toEqual([200, 0]);
    expect(await stored(table)).toEqual([{ code: 'abc' }]);
  });

  it('matches rowIds against a char(n) key whole, never cut to one character', async () => {
    const table = uniqueName('fixed');
    await run(`CREATE TABLE ${table} (code char(3) PRIMARY KEY); INSERT INTO ${table} VALUES ('a'), ('abc')`);

    const reply = await remove(table, {}, { rowIds: ['axx'] });

    expect([reply.status, reply.body.deletedCount]).toEqual([200, 0]);
    expect(await stored(table)).toHaveLength(2);
  });
});
