import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { call } from '#test/support/http';
import { withSetting } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

/**
 * POST /api/query/export: one query's rows as CSV or JSON, rendered by PostgreSQL, a page of
 * QUERY_MAX_ROWS at most with the offset the next starts at, and a 400 that says what an export
 * takes for anything but one query.
 */

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('qexport');
  const made = await call(query, {
    method: 'POST',
    path: '/api/query',
    body: {
      schema,
      sql: `CREATE TABLE people (id int PRIMARY KEY, name text, doc jsonb);
            INSERT INTO people SELECT i, 'p' || i, jsonb_build_object('n', i) FROM generate_series(1, 25) i;
            INSERT INTO people VALUES (26, 'comma, "quote"' || chr(10) || 'line', NULL);`,
    },
  });
  if (made.status !== 200) throw new Error(made.text);
});

const exported = (body: Record<string, unknown>) =>
  call(query, { method: 'POST', path: '/api/query/export', body: { schema, ...body } });

describe('POST /api/query/export', () => {
  it('answers a query’s rows as CSV, quoted as PostgreSQL quotes them', async () => {
    const reply = await exported({
      sql: 'SELECT id, name FROM people WHERE id IN (1, 26) ORDER BY id -- the two',
    });

    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(reply.headers['x-row-count']).toBe('2');
    expect(reply.headers['x-next-offset']).toBeUndefined();
    expect(reply.text).toBe('id,name\n1,p1\n26,"comma, ""quote""\nline"\n');
  });

  it('answers JSON, values as PostgreSQL renders them', async () => {
    const reply = await exported({
      sql: 'SELECT id, doc FROM people WHERE id <= 2 ORDER BY id',
      format: 'json',
    });

    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.text)).toEqual({
      count: 2,
      data: [
        { id: 1, doc: { n: 1 } },
        { id: 2, doc: { n: 2 } },
      ],
    });
  });

  describe('with QUERY_MAX_ROWS=10', () => {
    withSetting('QUERY_MAX_ROWS', '10');

    it('pages a result past it by offset, every row once', async () => {
      const pages: string[] = [];
      let offset: number | undefined = 0;
      while (offset !== undefined) {
        const reply = await exported({
          sql: 'SELECT id FROM people ORDER BY id',
          offset,
          header: offset === 0,
        });
        expect(reply.status).toBe(200);
        pages.push(reply.text);
        const next = reply.headers['x-next-offset'];
        offset = next === undefined ? undefined : Number(next);
      }
      const lines = pages.join('').trim().split('\n');
      expect(lines).toEqual(['id', ...Array.from({ length: 26 }, (_, i) => String(i + 1))]);
      expect(pages).toHaveLength(3);
    });
  });

  it.each([
    ['two statements', 'SELECT 1; SELECT 2', /2 statements/],
    ['a write', "UPDATE people SET name = 'x'", /not a query/],
    ['SELECT INTO', 'SELECT * INTO copied FROM people', /not a query/],
    ['SQL that cannot be read', 'SELEC 1', /could not be read/],
  ])('refuses %s with a 400 that says what an export takes', async (_, sql, message) => {
    const reply = await exported({ sql });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
  });

  it('answers an SQL error as the editor does, and 404 for no schema', async () => {
    const error = await exported({ sql: 'SELECT nope FROM people' });
    const missing = await call(query, {
      method: 'POST',
      path: '/api/query/export',
      body: { schema: 'no_such_schema', sql: 'SELECT 1' },
    });

    expect(error.status).toBe(400);
    expect(error.body.message).toMatch(/column "nope" does not exist/);
    expect(missing.status).toBe(404);
  });
});
