import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { EXACT_COUNT_MAX_ROWS } from '#lib/admin/table-pages';
import { closePool } from '#lib/db/pool';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * GET /api/table/:tableName at any size: totals exact while cheap and estimated past
 * EXACT_COUNT_MAX_ROWS (the real threshold, on tables a little over it: no knob only tests turn),
 * keyset cursors, and deep pages that seek in the key's index. Every answer is checked against
 * plain OFFSET paging or count(*) run through the query endpoint on the same table.
 */

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('pgr');
});

type Row = Record<string, unknown>;

/** SQL as the schema's role, through the query endpoint; its last statement's rows. */
async function sql(text: string): Promise<Row[]> {
  const reply = await call(query, { method: 'POST', path: '/api/query', body: { sql: text, schema } });
  if (reply.status !== 200) throw new Error(`${text}: ${reply.text}`);
  return reply.body.rows;
}

const read = (table: string, params: Record<string, string> = {}) =>
  call(tables, { path: `/api/table/${table}`, query: { schema, ...params } });

/** What OFFSET paging answers for that page. */
const offsetPage = (table: string, order: string, page: number, limit: number) =>
  sql(`SELECT * FROM ${table} ORDER BY ${order} LIMIT ${limit} OFFSET ${(page - 1) * limit}`);

/** Every key, by `after` cursors from the first page to the one whose nextCursor is null. */
async function walk(table: string, key: string, limit: number) {
  const keys: unknown[] = [];
  let requests = 0;
  let after: string | undefined;
  do {
    const reply = await read(table, { limit: String(limit), ...(after === undefined ? {} : { after }) });
    expect(reply.status).toBe(200);
    requests++;
    keys.push(...reply.body.data.map((row: Row) => row[key]));
    after = reply.body.nextCursor ?? undefined;
  } while (after !== undefined && requests < 1000);
  return { keys, requests };
}

/** A table of `rows` rows (`id` 1..rows, `label`) that autovacuum leaves alone: its statistics stay as a test sets them. */
const bigTable = (table: string, rows: number) =>
  sql(`CREATE TABLE ${table} (id integer PRIMARY KEY, label text) WITH (autovacuum_enabled = false);
       INSERT INTO ${table} SELECT g, 'row ' || g FROM generate_series(1, ${rows}) g`);

describe('small tables', () => {
  beforeAll(() =>
    sql(`CREATE TABLE numbers (n integer PRIMARY KEY, label text);
         INSERT INTO numbers SELECT g, 'n' || g FROM generate_series(120, 1, -1) g`),
  );

  it('answers every page as OFFSET paging does, with the exact total', async () => {
    for (let page = 1; page <= 19; page++) {
      const reply = await read('numbers', { page: String(page), limit: '7' });

      expect(reply.status).toBe(200);
      expect(reply.body).toEqual({
        data: await offsetPage('numbers', 'n', page, 7),
        columns: ['n', 'label'],
        total: 120,
        totalExact: true,
        page,
        nextCursor: page < 18 ? String(page * 7) : null,
      });
    }
  });

  it('gives the next page’s cursor on a full last page only when rows follow', async () => {
    const last = await read('numbers', { page: '4', limit: '30' });
    const before = await read('numbers', { page: '3', limit: '30' });

    expect(last.body.data).toHaveLength(30);
    expect(last.body.nextCursor).toBeNull();
    expect(before.body.nextCursor).toBe('90');
  });

  it('skips the count with count=false but still answers the cursor', async () => {
    const reply = await read('numbers', { count: 'false', limit: '10' });

    expect(reply.body.total).toBeNull();
    expect(reply.body.totalExact).toBe(false);
    expect(reply.body.nextCursor).toBe('10');
  });

  it('reads after a cursor, answering the page number it was given', async () => {
    const reply = await read('numbers', { after: '100', page: '11', limit: '10' });

    expect(reply.body.data.map((row: Row) => row.n)).toEqual([
      101, 102, 103, 104, 105, 106, 107, 108, 109, 110,
    ]);
    expect(reply.body.page).toBe(11);
    expect(reply.body.total).toBe(120);
    expect(reply.body.nextCursor).toBe('110');
  });

  it('answers columns named like those the read adds, and odd names, as they are', async () => {
    await sql(`CREATE TABLE odd ("Key Col" integer PRIMARY KEY, "count" integer, "lead" text, "text" text, "__proto__" text);
               INSERT INTO odd VALUES (1, 10, 'l', 't', 'p'), (2, 20, 'l2', 't2', 'p2');
               CREATE TABLE odd_loose ("count" integer, "ctid2" text); INSERT INTO odd_loose VALUES (5, 'c')`);

    const keyed = await read('odd', { limit: '1' });
    const loose = await read('odd_loose');

    expect(keyed.status).toBe(200);
    expect(keyed.body.data).toEqual([{ 'Key Col': 1, count: 10, lead: 'l', text: 't', ['__proto__']: 'p' }]);
    expect(Object.keys(keyed.body.data[0])).toEqual(['Key Col', 'count', 'lead', 'text', '__proto__']);
    expect([keyed.body.total, keyed.body.nextCursor]).toEqual([2, '1']);
    expect(loose.body).toMatchObject({ data: [{ count: 5, ctid2: 'c' }], total: 1, totalExact: true });
  });
});

describe('after cursors', () => {
  it('walk a table with integer keys in key order, every row once', async () => {
    await sql(`CREATE TABLE sparse (id bigint PRIMARY KEY, label text);
               INSERT INTO sparse SELECT g * 37 - 500, 'x' FROM generate_series(1, 95) g`);
    const expected = (await sql('SELECT id FROM sparse ORDER BY id')).map((row) => row.id);

    const { keys, requests } = await walk('sparse', 'id', 10);

    expect(keys).toEqual(expected);
    expect(requests).toBe(10);
  });

  it('walk a table with text keys in the column’s collation, the empty string and spaces included', async () => {
    const words = [
      '',
      ' ',
      'a',
      'A',
      'a b',
      'ab',
      'B',
      'é',
      'e',
      'z',
      'Z',
      '10',
      '9',
      "it's",
      'x"y',
      '%',
      '\\',
    ];
    await sql(`CREATE TABLE words (word text PRIMARY KEY);
               INSERT INTO words SELECT unnest(ARRAY[${words.map((w) => `'${w.replace(/'/g, "''")}'`).join(', ')}])`);
    const expected = (await sql('SELECT word FROM words ORDER BY word')).map((row) => row.word);

    const { keys, requests } = await walk('words', 'word', 4);

    expect(keys).toEqual(expected);
    expect(requests).toBe(Math.ceil(words.length / 4));
  });

  it('walk a table with timestamp keys without losing the microseconds JSON dates drop', async () => {
    await sql(`CREATE TABLE events (at timestamptz PRIMARY KEY, label text);
               INSERT INTO events SELECT '2024-01-01T00:00:00Z'::timestamptz + g * interval '1 microsecond', 'e'
                 FROM generate_series(1, 9) g`);

    const { keys } = await walk('events', 'at', 2);

    expect(keys).toHaveLength(9);
  });

  it.each([
    ['a word for an integer key', 'numbers', 'abc', /invalid input syntax for type integer/],
    ['a number past the key’s type', 'numbers', '99999999999', /out of range for type integer/],
  ])('refuses %s with 400', async (_, table, after, message) => {
    const reply = await read(table, { after });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
  });

  it('are refused with 400 on tables without a single-column primary key, saying why', async () => {
    await sql(`CREATE TABLE pairs (a integer, b integer, PRIMARY KEY (a, b));
               CREATE TABLE heap (v text); INSERT INTO heap VALUES ('x')`);

    const composite = await read('pairs', { after: '1' });
    const none = await read('heap', { after: 'x' });

    expect([composite.status, none.status]).toEqual([400, 400]);
    expect(composite.body.error).toBe('No single-column primary key');
    expect(composite.body.message).toMatch(
      /a composite primary key; after pages by a single-column primary key/,
    );
    expect(none.body.message).toMatch(/no primary key/);
  });
});

describe('tables without a single-column primary key', () => {
  it('still page, as OFFSET in their stable order, without a cursor', async () => {
    await sql(`CREATE TABLE loose (v text); INSERT INTO loose SELECT 'v' || g FROM generate_series(1, 10) g;
               CREATE TABLE pairs2 (a integer, b integer, PRIMARY KEY (a, b));
               INSERT INTO pairs2 SELECT g % 3, g FROM generate_series(1, 10) g`);

    const loose = await read('loose', { page: '2', limit: '3' });
    const pairs = await read('pairs2', { page: '2', limit: '3' });

    expect(loose.body).toEqual({
      data: await offsetPage('loose', 'ctid', 2, 3),
      columns: ['v'],
      total: 10,
      totalExact: true,
      page: 2,
      nextCursor: null,
    });
    expect(pairs.body.data).toEqual(await offsetPage('pairs2', 'a, b', 2, 3));
    expect(pairs.body.nextCursor).toBeNull();
  });
});

describe(`tables past ${EXACT_COUNT_MAX_ROWS} rows`, () => {
  const rows = EXACT_COUNT_MAX_ROWS + 10_000;

  beforeAll(async () => {
    await bigTable('big', rows);
    await sql('ANALYZE big');
    // Rows the statistics have not seen: a count would find them gone, the estimate does not.
    await sql('DELETE FROM big WHERE id > 55000');
  });

  it('answer the planner’s estimate, not a count, with totalExact false', async () => {
    const [counted] = await sql('SELECT count(*)::int AS n FROM big');

    const reply = await read('big');

    expect(reply.status).toBe(200);
    expect(counted?.n).toBe(55_000);
    expect(reply.body.total).toBe(rows);
    expect(reply.body.totalExact).toBe(false);
  });

  it('answer deep pages as OFFSET paging does', async () => {
    for (const page of [2, 1000, 1100]) {
      const reply = await read('big', { page: String(page), limit: '50' });

      expect(reply.body.data).toEqual(await offsetPage('big', 'id', page, 50));
      expect(reply.body.nextCursor).toBe(page < 1100 ? String(page * 50) : null);
    }
  });

  it('count with a bound when the statistics lag behind a load, and then answer an estimate', async () => {
    await bigTable('loaded', 10);
    await sql('ANALYZE loaded');
    await sql(`INSERT INTO loaded SELECT g, 'late' FROM generate_series(11, ${rows}) g`);

    const reply = await read('loaded');

    expect(reply.body.totalExact).toBe(false);
    expect(reply.body.total).toBeGreaterThan(EXACT_COUNT_MAX_ROWS);
    expect(reply.body.data).toHaveLength(50);
  });

  it('estimate over every partition', async () => {
    await sql(`CREATE TABLE parted (id integer PRIMARY KEY, label text) PARTITION BY RANGE (id);
               CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (MINVALUE) TO (30000);
               CREATE TABLE parted_high PARTITION OF parted FOR VALUES FROM (30000) TO (MAXVALUE);
               INSERT INTO parted SELECT g, 'p' FROM generate_series(1, ${rows}) g;
               ANALYZE parted`);

    const reply = await read('parted', { after: '29998', limit: '3' });

    expect(reply.body.total).toBe(rows);
    expect(reply.body.totalExact).toBe(false);
    expect(reply.body.data.map((row: Row) => row.id)).toEqual([29999, 30000, 30001]);
  });
});
