import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { bearer, createKey } from '#test/security/tenant';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * Finding rows: PostgREST's filters, or/and trees, order, select, q and cursors over any order,
 * through the real handler against a real PostgreSQL.
 */
afterAll(closePool);

let schema: string;

/** people: 12 rows, with NULLs in age and nick, and a column whose name holds a dot. */
beforeAll(async () => {
  schema = await freshSchema('find');
  const made = await call(query, {
    method: 'POST',
    path: '/api/query',
    body: {
      schema,
      sql: `CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL, nick varchar(20), age int,
                                 tags text[], data jsonb, bio text, active boolean, "my.col" int);
            INSERT INTO people VALUES
              (1, 'Ada', 'ada', 36, '{math,code}', '{"lang": "en", "n": 1}', 'Wrote the first program', true, 10),
              (2, 'Brian', NULL, 50, '{code}', '{"lang": "en"}', 'Unix and C', true, 20),
              (3, 'Chloé', 'clo', NULL, '{}', '{"lang": "fr"}', 'Écrit des poèmes', false, 30),
              (4, 'Dennis', 'dmr', 70, '{code,unix}', NULL, 'C, Unix', NULL, 40),
              (5, 'Edsger', NULL, 72, '{math}', '{"lang": "nl"}', 'Goto considered harmful', true, 50),
              (6, 'Frances', 'fran', 88, NULL, '{"lang": "en"}', 'Compilers', false, 60),
              (7, 'Grace', 'amazing', 85, '{code,navy}', '{"lang": "en"}', 'Debugging, literally', true, 70),
              (8, 'Smith, J', 'sj', 36, '{}', '{}', 'Has a comma', true, 80),
              (9, 'O''Brien', NULL, NULL, '{}', '{}', 'Has a quote; and a semicolon', false, 90),
              (10, 'Ken', 'ken', 70, '{unix}', '{"lang": "en"}', 'Plan 9', true, 100),
              (11, 'Linus', NULL, 50, '{code}', '{"lang": "fi"}', 'Kernels', true, 110),
              (12, 'Margaret', 'mh', 60, '{space,code}', '{"lang": "en"}', 'Apollo guidance', true, 120);
            CREATE TABLE prices (id int PRIMARY KEY, price numeric(10,2), code varchar(3));
            INSERT INTO prices VALUES (1, 1.23, 'abc');
            CREATE TABLE fixed (code char(3) PRIMARY KEY, v int, b bit(3));
            INSERT INTO fixed VALUES ('a', 1, '001'), ('abc', 2, '101'), ('abd', 3, '110'), ('b', 4, '111');
            CREATE TABLE kinds (id int PRIMARY KEY, d date, ts timestamptz, u uuid, n numeric,
                                f float8, ip inet, iv interval, t time, b bytea);
            INSERT INTO kinds VALUES
              (1, '2024-01-31', '2024-01-31 12:00:00+00', '00000000-0000-0000-0000-000000000001', 1.5, 0.25, '10.0.0.1', '1 hour', '08:00', '\\x00ff'),
              (2, '2024-02-29', '2024-02-29 23:30:00+02', '00000000-0000-0000-0000-000000000002', -2, 1e10, '192.168.1.1', '2 days', '17:45:30', '\\x41'),
              (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
            CREATE TABLE keyless (a int, b text);
            INSERT INTO keyless VALUES (1, 'x'), (2, 'y');`,
    },
  });
  if (made.status !== 200) throw new Error(made.text);
});

const find = (q: Record<string, string | string[]>, auth: object = {}) =>
  call(tables, { path: '/api/table/people', query: { schema, limit: '100', ...q }, ...auth });

/** The ids a filter finds, in the answer's order. */
async function ids(q: Record<string, string | string[]>): Promise<number[]> {
  const reply = await find(q);
  if (reply.status !== 200) throw new Error(`${JSON.stringify(q)}: ${reply.status} ${reply.text}`);
  return reply.body.data.map((row: { id: number }) => row.id);
}

describe('filter=column.operator.value', () => {
  it.each([
    ['age.eq.36', [1, 8]],
    ['age.neq.36', [2, 4, 5, 6, 7, 10, 11, 12]],
    ['age.gt.70', [5, 6, 7]],
    ['age.gte.70', [4, 5, 6, 7, 10]],
    ['age.lt.50', [1, 8]],
    ['age.lte.50', [1, 2, 8, 11]],
    ['name.like.*an*', [2, 6]],
    ['name.ilike.*AN*', [2, 6]],
    ['name.ilike.c*', [3]],
    ['name.in.(Ada,Ken,"Smith, J")', [1, 8, 10]],
    ['id.in.()', []],
    ['age.is.null', [3, 9]],
    ['active.is.true', [1, 2, 5, 7, 8, 10, 11, 12]],
    ['active.is.false', [3, 6, 9]],
    ['active.is.unknown', [4]],
    ['tags.cs.{code,unix}', [4]],
    ['tags.cd.{code,math}', [1, 2, 3, 5, 8, 9, 11]],
    ['data.cs.{"lang":"fr"}', [3]],
    ['bio.fts.unix', [2, 4]],
    ['bio.fts(english).program', [1]],
    ['bio.plfts.first program', [1]],
    ['bio.wfts."guidance" -apollo', []],
    ['bio.phfts(simple).des poèmes', [3]],
    ['age.not.eq.36', [2, 4, 5, 6, 7, 10, 11, 12]],
    ['age.not.is.null', [1, 2, 4, 5, 6, 7, 8, 10, 11, 12]],
    ['name.not.in.(Ada,Brian)', [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]],
    ['"my.col".gt.100', [11, 12]],
  ])('%s', async (filter, expected) => {
    expect(await ids({ filter })).toEqual(expected);
  });

  it('compares a value as sent, never cut or rounded to the column’s modifier', async () => {
    const prices = async (filter: string) =>
      (await call(tables, { path: '/api/table/prices', query: { schema, filter } })).body.data.length;

    expect(await prices('price.eq.1.23')).toBe(1);
    expect(await prices('price.eq.1.234')).toBe(0);
    expect(await prices('code.eq.abc')).toBe(1);
    expect(await prices('code.eq.abcd')).toBe(0);
    expect(await prices('code.in.(abcd,xyz)')).toBe(0);
  });

  it('compares char(n) and bit(n) values whole, in filters, lists and cursors', async () => {
    const fixed = async (q: Record<string, string>) =>
      (await call(tables, { path: '/api/table/fixed', query: { schema, ...q } })).body;

    expect((await fixed({ filter: 'code.eq.abc' })).data.map((r: { v: number }) => r.v)).toEqual([2]);
    expect((await fixed({ filter: 'code.eq.axyz' })).data).toEqual([]);
    expect((await fixed({ filter: 'code.in.(abc,b)' })).data.map((r: { v: number }) => r.v)).toEqual([2, 4]);
    expect((await fixed({ filter: 'b.eq.101' })).data.map((r: { v: number }) => r.v)).toEqual([2]);
    const first = await fixed({ order: 'code.desc', limit: '2' });
    const second = await fixed({ order: 'code.desc', limit: '2', after: first.nextCursor });
    expect([...first.data, ...second.data].map((r: { v: number }) => r.v)).toEqual([4, 3, 2, 1]);
  });

  it.each([
    ['d.eq.2024-02-29', [2]],
    ['d.lt.2024-02-01', [1]],
    ['d.in.(2024-01-31,2024-02-29)', [1, 2]],
    ['ts.gte.2024-02-29T21:00:00Z', [2]],
    ['ts.lt.2024-02-01 00:00:00+00', [1]],
    ['u.eq.00000000-0000-0000-0000-000000000002', [2]],
    ['n.lt.0', [2]],
    ['n.eq.1.50', [1]],
    ['f.gt.1000', [2]],
    ['ip.eq.10.0.0.1', [1]],
    ['iv.gt.1 day', [2]],
    ['t.gte.12:00', [2]],
    ['b.eq.\\x41', [2]],
    ['d.is.null', [3]],
    ['u.not.is.null', [1, 2]],
    ['ts.ilike.2024-01*', [1]],
  ])('type families: %s', async (filter, expected) => {
    const reply = await call(tables, { path: '/api/table/kinds', query: { schema, filter } });

    expect([reply.status, reply.body.data?.map((row: { id: number }) => row.id)]).toEqual([200, expected]);
  });

  it.each(['d.eq.yesterday-ish', 'u.eq.not-a-uuid', 'ip.gt.banana', 'n.eq.1,5'])(
    'a value its type refuses is a 400 naming the type: %s',
    async (filter) => {
      const reply = await call(tables, { path: '/api/table/kinds', query: { schema, filter } });

      expect(reply.status).toBe(400);
      expect(reply.body.message).toMatch(/invalid input syntax for type|invalid input/);
    },
  );

  it('ANDs repeated filters', async () => {
    expect(await ids({ filter: ['age.gte.50', 'tags.cs.{code}'] })).toEqual([2, 4, 7, 11, 12]);
  });

  it('binds values: quotes, semicolons and unicode are only values', async () => {
    expect(await ids({ filter: "name.eq.O'Brien" })).toEqual([9]);
    expect(await ids({ filter: 'bio.eq.Has a quote; and a semicolon' })).toEqual([9]);
    expect(await ids({ filter: "name.eq.x'; DROP TABLE people; --" })).toEqual([]);
    expect(await ids({ filter: 'name.eq.Chloé' })).toEqual([3]);
    expect(await ids({ filter: 'id.gt.0' })).toHaveLength(12);
  });
});

describe('or and and', () => {
  it.each([
    ['or', '(age.lt.40,age.gt.80)', [1, 6, 7, 8]],
    ['or', '(name.eq."Smith, J",name.eq.Ada)', [1, 8]],
    ['or', '(age.is.null,and(age.gte.70,active.is.true))', [3, 5, 7, 9, 10]],
    ['or', '(not.and(age.gte.40,age.lte.80),id.eq.5)', [1, 5, 6, 7, 8]],
    ['and', '(age.gte.50,or(nick.is.null,nick.eq.ken))', [2, 5, 10, 11]],
  ])('%s=%s', async (kind, tree, expected) => {
    expect(await ids({ [kind]: tree })).toEqual(expected);
  });

  it('combines with filter', async () => {
    expect(await ids({ filter: 'active.is.true', or: '(age.lt.40,age.gt.80)' })).toEqual([1, 7, 8]);
  });
});

describe('order, select and q', () => {
  it('orders by any columns, NULLs where asked, the key breaking ties', async () => {
    expect(await ids({ order: 'age.desc.nullslast' })).toEqual([6, 7, 5, 4, 10, 12, 2, 11, 1, 8, 3, 9]);
    expect(await ids({ order: 'age.asc.nullsfirst' })).toEqual([3, 9, 1, 8, 2, 11, 12, 4, 10, 5, 7, 6]);
    expect(await ids({ order: 'age,name.desc' })).toEqual([8, 1, 11, 2, 12, 10, 4, 5, 7, 6, 9, 3]);
  });

  it('answers the selected columns only, in that order', async () => {
    const reply = await find({ select: 'name,id', filter: 'id.eq.1' });

    expect(reply.body.columns).toEqual(['name', 'id']);
    expect(reply.body.data).toEqual([{ name: 'Ada', id: 1 }]);
  });

  it('searches the text columns with q, case-insensitively, wildcards taken literally', async () => {
    expect(await ids({ q: 'UNIX' })).toEqual([2, 4]);
    expect(await ids({ q: 'amaz' })).toEqual([7]);
    expect(await ids({ q: '%' })).toEqual([]);
    expect(await ids({ q: 'a', filter: 'age.gt.80' })).toEqual([6, 7]);
  });

  it('counts the filtered rows, exactly while the table is small', async () => {
    const reply = await find({ filter: 'age.gte.50', limit: '2' });

    expect(reply.body).toMatchObject({ total: 8, totalExact: true });
  });
});

describe('paging by cursor under any order', () => {
  /** Every page by nextCursor, `size` rows at a time: the ids in the order they came. */
  async function walk(q: Record<string, string | string[]>, size: number): Promise<number[]> {
    const seen: number[] = [];
    let after: string | undefined;
    for (let pages = 0; pages < 20; pages++) {
      const reply = await find({ ...q, limit: String(size), ...(after ? { after } : {}) });
      if (reply.status !== 200) throw new Error(reply.text);
      seen.push(...reply.body.data.map((row: { id: number }) => row.id));
      after = reply.body.nextCursor ?? undefined;
      if (!after) return seen;
    }
    throw new Error('the cursor never ended');
  }

  it.each([
    'age',
    'age.desc',
    'age.desc.nullslast',
    'age.asc.nullsfirst',
    'nick.desc,age',
    'active,age.desc.nullslast',
    'name',
    'id.desc',
  ])('walks every row once in the order %s', async (order) => {
    const all = await ids({ order });

    for (const size of [1, 2, 5]) expect(await walk({ order }, size)).toEqual(all);
  });

  it('walks a filtered order too', async () => {
    const q = { order: 'age.desc', filter: 'active.is.true' };

    expect(await walk(q, 3)).toEqual(await ids(q));
  });

  it('refuses a cursor that was altered, or made for another order', async () => {
    const first = await find({ order: 'age', limit: '2' });
    const cursor = first.body.nextCursor as string;
    const [payload = '', mac = ''] = cursor.split('.');
    const forged = `${Buffer.from(JSON.stringify(['1', '1'])).toString('base64url')}.${mac}`;

    for (const [order, after] of [
      ['age', forged],
      ['age.desc', cursor],
      ['age', `${payload}.AAAA`],
      ['age', 'not a cursor'],
    ]) {
      const reply = await find({ order: order as string, after: after as string });
      expect([reply.status, reply.body.error]).toEqual([400, 'Invalid cursor']);
    }
  });

  it('pages a table without a primary key by number only', async () => {
    const page = await call(tables, { path: '/api/table/keyless', query: { schema, order: 'b.desc' } });
    const after = await call(tables, {
      path: '/api/table/keyless',
      query: { schema, order: 'b', after: 'x' },
    });

    expect(page.body).toMatchObject({
      data: [
        { a: 2, b: 'y' },
        { a: 1, b: 'x' },
      ],
      nextCursor: null,
    });
    expect(after.status).toBe(400);
  });
});

describe('what a caller gets wrong is a 400 that says what', () => {
  it.each([
    [{ filter: 'height.eq.1' }, /has no column "height"/],
    [{ filter: 'age.about.1' }, /unknown operator "about"/],
    [{ filter: 'age.eq.old' }, /invalid input syntax for type integer: "old"/],
    [{ filter: 'age.is.maybe' }, /is takes null, true, false or unknown/],
    [{ filter: 'age.is.constructor' }, /is takes null, true, false or unknown/],
    [{ filter: 'age' }, /expected "\."/],
    [{ or: '(age.eq.1' }, /expected "\)"/],
    [{ or: 'age.eq.1' }, /expected "\("/],
    [{ or: '(age.eq.1))' }, /unexpected text/],
    [{ filter: 'id.in.(1))or(' }, /unexpected text/],
    [{ filter: 'id.in.(1)garbage' }, /unexpected text/],
    [{ or: `${'(or'.repeat(6)}(age.eq.1${')'.repeat(7)}` }, /nest deeper than 4/],
    [{ filter: 'pg_catalog.pg_authid.rolpassword.eq.x' }, /unknown operator "pg_authid"/],
    [{ filter: '"pg_catalog.pg_authid".eq.x' }, /has no column "pg_catalog.pg_authid"/],
    [{ order: 'age.sideways' }, /none of asc, desc/],
    [{ order: 'secret' }, /has no column "secret"/],
    [{ select: 'id,nope' }, /has no column "nope"/],
  ])('%j', async (q, message) => {
    const reply = await find(q as Record<string, string>);

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
  });

  it('refuses a 10,000-clause filter at once', async () => {
    const started = Date.now();
    const reply = await find({ or: `(${Array.from({ length: 10_000 }, (_, i) => `id.eq.${i}`).join(',')})` });

    expect(reply.status).toBe(400);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('reads a literal + in every parameter alike', async () => {
    const reply = await call(tables, {
      path: '/api/table/people',
      query: { schema, filter: 'bio.eq.C, Unix', or: '(name.eq.a+b,id.eq.4)', q: 'C, Unix' },
    });

    expect(reply.body.data.map((row: { id: number }) => row.id)).toEqual([4]);
  });

  it('refuses more than 100 conditions', async () => {
    const reply = await find({ filter: Array.from({ length: 101 }, (_, i) => `id.neq.${i}`) });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/more than 100 conditions/);
  });
});

describe('API keys', () => {
  it('an anon key finds rows in its own schema', async () => {
    const { key } = await createKey(schema, 'anon', 'finder');
    const reply = await call(tables, {
      path: '/api/table/people',
      query: { filter: 'age.gt.80', order: 'age.desc' },
      ...bearer(key),
    });

    expect(reply.body.data.map((row: { id: number }) => row.id)).toEqual([6, 7]);
  });
});

describe('the export takes the same filters, order and select', () => {
  const exported = (q: Record<string, string | string[]>) =>
    call(tables, { path: '/api/table/people/export', query: { schema, ...q } });

  it('writes the matching rows as CSV, in the order asked, with the selected columns', async () => {
    const reply = await exported({
      format: 'csv',
      filter: ['age.gte.70', 'nick.not.is.null'],
      order: 'age.desc',
      select: 'id,name',
    });

    expect(reply.status).toBe(200);
    expect(reply.text).toBe('id,name\n6,Frances\n7,Grace\n4,Dennis\n10,Ken\n');
  });

  it('binds every kind of value, lists and searches included, for JSON too', async () => {
    const reply = await exported({
      filter: 'name.in.(O\'Brien,"Smith, J",Ada)',
      q: 'a',
      order: 'id.desc',
      select: 'id',
    });

    expect(reply.body).toEqual({ table: 'people', count: 3, data: [{ id: 9 }, { id: 8 }, { id: 1 }] });
  });

  it('is the same, byte for byte, with a filter every row matches', async () => {
    for (const format of ['csv', 'json']) {
      const all = await exported({ format });
      const filtered = await exported({ format, filter: 'id.gt.0' });
      expect(filtered.text).toBe(all.text);
    }
  });

  it('says when no row matches', async () => {
    const reply = await exported({ filter: 'age.gt.1000' });

    expect([reply.status, reply.body.message]).toEqual([
      404,
      'table "people" has no rows that match the filter',
    ]);
  });

  it('refuses what the page read refuses', async () => {
    const reply = await exported({ filter: 'height.eq.1' });

    expect([reply.status, reply.body.error]).toEqual([400, 'Unknown column']);
  });
});
