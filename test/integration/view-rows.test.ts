import { handler as constraints } from '#functions/constraints';
import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * Views, materialized views and their rows: read a page at a time with filters, order and paging
 * as a table's are, exported, refused for writes with a 400 that says why, and materialized views
 * refreshed (concurrently where a unique index allows it).
 */

afterAll(closePool);

let schema: string;

const sql = async (text: string) => {
  const reply = await call(query, { method: 'POST', path: '/api/query', body: { schema, sql: text } });
  if (reply.status !== 200) throw new Error(`${text}: ${reply.text}`);
  return reply.body;
};
const page = (name: string, extra: Record<string, string> = {}) =>
  call(tables, { path: `/api/table/${name}`, query: { schema, ...extra } });
const refresh = (name: string, body: Record<string, unknown> = {}) =>
  call(constraints, { method: 'POST', path: `/api/view/${name}/refresh`, body: { schema, ...body } });

beforeAll(async () => {
  schema = await freshSchema('viewrows');
  // As the schema's role (through the SQL route), so the schema owns them, as a tenant's would.
  await sql(`
    CREATE TABLE people (id int PRIMARY KEY, name text, doc json);
    INSERT INTO people SELECT i, 'p' || i, json_build_object('i', i) FROM generate_series(1, 30) AS i;
    CREATE VIEW named AS SELECT name, doc FROM people WHERE id % 2 = 0;
    CREATE VIEW tied AS SELECT name, id % 3 AS team FROM people ORDER BY random();
    CREATE MATERIALIZED VIEW tally AS SELECT id % 3 AS bucket, count(*) AS n FROM people GROUP BY 1;
    CREATE UNIQUE INDEX tally_bucket ON tally (bucket);
    CREATE MATERIALIZED VIEW later AS SELECT id FROM people WITH NO DATA;
    CREATE MATERIALIZED VIEW unkeyed AS SELECT id FROM people;`);
});

describe('reading a view', () => {
  it('pages through a view with no key in one stable order, every row once', async () => {
    const seen: unknown[] = [];
    for (let n = 1; n <= 3; n++) {
      const reply = await page('named', { page: String(n), limit: '6' });
      expect(reply.status).toBe(200);
      expect(reply.body.columns).toEqual(['name', 'doc']);
      seen.push(...reply.body.data.map((row: { name: string }) => row.name));
      expect(reply.body).toMatchObject({ total: 15, totalExact: true, nextCursor: null });
    }
    expect(seen).toHaveLength(15);
    expect(new Set(seen).size).toBe(15);
  });

  it('pages a view ordered by a column full of ties with every row once, the ties ended by the row', async () => {
    const seen: string[] = [];
    for (let n = 1; n <= 5; n++) {
      const reply = await page('tied', { order: 'team', page: String(n), limit: '6' });
      expect(reply.status).toBe(200);
      seen.push(...reply.body.data.map((row: { name: string }) => row.name));
    }
    expect(seen).toHaveLength(30);
    expect(new Set(seen).size).toBe(30);
  });

  it('filters, orders, selects and searches a view as a table', async () => {
    const reply = await page('named', { filter: 'name.like.p1%', order: 'name.desc', select: 'name' });

    expect(reply.status).toBe(200);
    expect(reply.body.data).toEqual([
      { name: 'p18' },
      { name: 'p16' },
      { name: 'p14' },
      { name: 'p12' },
      { name: 'p10' },
    ]);
  });

  it('reads a materialized view, and says a never-filled one must be refreshed first', async () => {
    const tally = await page('tally', { order: 'bucket' });
    const later = await page('later');

    expect(tally.status).toBe(200);
    expect(tally.body.data).toEqual([
      { bucket: 0, n: '10' },
      { bucket: 1, n: '10' },
      { bucket: 2, n: '10' },
    ]);
    expect(later.status).toBe(400);
    expect(later.body.message).toMatch(/has not been populated/);
  });

  it('exports a view as CSV and JSON', async () => {
    const csv = await call(tables, {
      path: '/api/table/named/export',
      query: { schema, format: 'csv', filter: 'name.eq.p2' },
    });
    const json = await call(tables, {
      path: '/api/table/tally/export',
      query: { schema, format: 'json', order: 'bucket' },
    });

    expect(csv.status).toBe(200);
    expect(csv.text).toBe('name,doc\np2,"{""i"" : 2}"\n');
    expect(json.status).toBe(200);
    expect(JSON.parse(json.text)).toEqual({
      table: 'tally',
      count: 3,
      data: [
        { bucket: 0, n: '10' },
        { bucket: 1, n: '10' },
        { bucket: 2, n: '10' },
      ],
    });
  });

  it('refuses to change a view’s rows or structure with a 400 that says it is a view', async () => {
    const insert = await call(rows, {
      method: 'POST',
      path: '/api/table/named/row',
      body: { schema, data: { name: 'x' } },
    });
    const column = await call(tables, {
      method: 'POST',
      path: '/api/table/tally/column',
      body: { schema, columnName: 'extra', dataType: 'TEXT' },
    });

    expect(insert.status).toBe(400);
    expect(insert.body).toEqual({
      error: 'Not a table',
      message: `"named" in schema "${schema}" is a view: its rows can be read and exported, not changed, and its structure is its definition`,
    });
    expect(column.status).toBe(400);
    expect(column.body.error).toBe('Not a table');
    expect((await page('nothing_here')).status).toBe(404);
  });
});

describe('refreshing a materialized view', () => {
  it('refreshes concurrently when it has a unique index, and shows the new rows', async () => {
    await sql('INSERT INTO people VALUES (31, $$p31$$, null)');

    const reply = await refresh('tally');

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      success: true,
      concurrently: true,
      message: 'Materialized view "tally" refreshed concurrently',
    });
    expect((await page('tally', { filter: 'bucket.eq.1' })).body.data).toEqual([{ bucket: 1, n: '11' }]);
  });

  it('fills a never-filled view, locking it, and refuses concurrently with what to do', async () => {
    const refused = await refresh('later', { concurrently: true });
    const filled = await refresh('later');

    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/never been filled: refresh it once without concurrently/);
    expect(filled.body).toMatchObject({ concurrently: false });
    expect((await page('later')).body.total).toBe(31);
  });

  it('refuses concurrently without a unique index, and says what to add', async () => {
    const refused = await refresh('unkeyed', { concurrently: true });
    const plain = await refresh('unkeyed');

    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/no unique index over plain columns/);
    expect(plain.body).toMatchObject({ success: true, concurrently: false });
  });

  it('answers 404 for no such view and 400 for a plain view or a table', async () => {
    expect((await refresh('missing')).status).toBe(404);
    expect((await refresh('named')).body).toMatchObject({ error: 'Not a materialized view' });
    expect((await refresh('people')).status).toBe(400);
  });
});
