import { handler as keys } from '#functions/keys';
import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { withAdminClient, withOwnerClient } from '#test/support/db';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/** The SQL editor's answer (POST /api/query with maxRows): every statement's result, rows capped. */

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('qres');
  await withOwnerClient(schema, (c) =>
    c.query(`
      CREATE TABLE "${schema}".people (id int PRIMARY KEY, name text NOT NULL);
      INSERT INTO "${schema}".people SELECT i, 'person ' || i FROM generate_series(1, 50000) i;
      CREATE TABLE "${schema}".notes (id serial PRIMARY KEY, body text);
      CREATE TABLE "${schema}".calls (n int);
      CREATE FUNCTION "${schema}".counted(i int) RETURNS int LANGUAGE sql VOLATILE
        AS 'INSERT INTO "${schema}".calls VALUES (i) RETURNING i';`),
  );
});

/** The script as the SQL editor sends it; `maxRows` null: as any other client does. */
const run = (sql: string, maxRows: number | null = 1000) =>
  call(query, {
    method: 'POST',
    path: '/api/query',
    body: { sql, schema, ...(maxRows === null ? {} : { maxRows }) },
  });

describe('POST /api/query with maxRows', () => {
  it('answers each of a five-statement script’s results, in order, with its command and count', async () => {
    const reply = await run(`
      SELECT 1 AS one;
      INSERT INTO notes (body) VALUES ('a'), ('b') RETURNING id;
      UPDATE notes SET body = body || '!';
      CREATE TABLE scratch (x int);
      SELECT count(*)::int AS n FROM notes`);

    expect(reply.status).toBe(200);
    const results = reply.body.results as Array<Record<string, unknown>>;
    expect(results.map((r) => [r.command, r.rowCount, r.truncated])).toEqual([
      ['SELECT', 1, false],
      ['INSERT', 2, false],
      ['UPDATE', 2, false],
      ['CREATE', null, false],
      ['SELECT', 1, false],
    ]);
    expect(results[0]?.rows).toEqual([{ one: 1 }]);
    expect(results[1]?.fields).toEqual([{ name: 'id', dataTypeID: 23 }]);
    expect(results[4]?.rows).toEqual([{ n: 2 }]);
    // The last statement's rows are not sent twice: in its result only.
    expect(reply.body).not.toHaveProperty('rows');
    expect(reply.body.rowCount).toBe(1);
    expect(reply.body.truncated).toBe(false);
    // INSERT, UPDATE and CREATE went in one round trip: its time is the last one's.
    expect(results.map((r) => (Number.isInteger(r.duration) ? 'ms' : r.duration))).toEqual([
      'ms',
      null,
      null,
      'ms',
      'ms',
    ]);
  });

  it('sends the statements between queries in one round trip: a 2,000-INSERT script, each its own result', async () => {
    const inserts = Array.from({ length: 2000 }, (_, i) => `INSERT INTO notes (body) VALUES ('seed ${i}')`);
    const reply = await run(
      `${inserts.join(';\n')};\nSELECT count(*)::int AS n FROM notes WHERE body LIKE 'seed %'`,
    );

    expect(reply.status).toBe(200);
    const results = reply.body.results as Array<{
      command: string;
      rowCount: number;
      duration: number | null;
    }>;
    expect(results).toHaveLength(2001);
    expect(results.slice(0, 2000).every((r) => r.command === 'INSERT' && r.rowCount === 1)).toBe(true);
    expect(results.filter((r) => r.duration !== null)).toHaveLength(2);
    expect(results[2000]).toMatchObject({ rows: [{ n: 2000 }] });
  });

  it('maps an error in statements sent together back to its place in the script', async () => {
    const script = "SELECT 1;\nINSERT INTO notes (body) VALUES ('é');\nUPDATE notes SET nope = 1;\nSELECT 2";
    const reply = await run(script);

    expect(reply.status).toBe(400);
    expect(script.slice(Number(reply.body.position) - 1).startsWith('nope')).toBe(true);
  });

  it('shows the first rows of a 50,000-row SELECT instead of refusing it, and reads no further', async () => {
    const reply = await run('SELECT * FROM people ORDER BY id; SELECT counted(id) FROM people', 1000);

    expect(reply.status).toBe(200);
    const [people, counted] = reply.body.results as Array<Record<string, unknown> & { rows: unknown[] }>;
    expect(people?.rows).toHaveLength(1000);
    expect(people?.rows[999]).toEqual({ id: 1000, name: 'person 1000' });
    expect(people).toMatchObject({ command: 'SELECT', rowCount: null, truncated: true });
    // The second query stopped at its rows shown too: its function ran for those rows and one more.
    expect(counted).toMatchObject({ truncated: true, rowCount: null });
    const made = await withAdminClient((c) => c.query(`SELECT count(*)::int AS n FROM "${schema}".calls`));
    expect(made.rows[0].n).toBeLessThanOrEqual(1001);
    expect(made.rows[0].n).toBeGreaterThanOrEqual(1000);
    await withAdminClient((c) => c.query(`TRUNCATE "${schema}".calls`));
  });

  it('runs a statement other than a query to its end, with its exact count, however many rows it shows', async () => {
    const reply = await run(
      'UPDATE people SET name = name WHERE id <= 3000 RETURNING id; SELECT count(*)::int AS n FROM people',
      10,
    );

    expect(reply.status).toBe(200);
    const [updated] = reply.body.results as Array<Record<string, unknown> & { rows: unknown[] }>;
    expect(updated).toMatchObject({ command: 'UPDATE', rowCount: 3000, truncated: true });
    expect(updated?.rows).toHaveLength(10);
  });

  it('keeps the script atomic: a failing third statement leaves nothing of the first two', async () => {
    const reply = await run(`
      INSERT INTO notes (body) VALUES ('kept?');
      DELETE FROM notes WHERE body = 'a!';
      SELECT 1/0;
      SELECT 4`);

    expect(reply.status).toBe(400);
    const rows = await withAdminClient((c) =>
      c.query(`SELECT body FROM "${schema}".notes WHERE body IN ('kept?', 'a!') ORDER BY body`),
    );
    expect(rows.rows.map((r) => r.body)).toEqual(['a!']);
  });

  it('counts an error’s position from the script’s start, in characters', async () => {
    const script = "SELECT 'é';\nSELECT 'ü' AS x;\nSELECT nope FROM people";
    const reply = await run(script);

    expect(reply.status).toBe(400);
    expect(script.slice(Number(reply.body.position) - 1).startsWith('nope')).toBe(true);
  });

  it('answers a syntax error as PostgreSQL does, the script whole', async () => {
    const reply = await run('SELECT 1;\nSELEC 2');

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/syntax error at or near "SELEC"/);
    expect(Number(reply.body.position)).toBe(11);
  });

  it('shares QUERY_MAX_BYTES among the statements: later rows are cut, not refused', async () => {
    // Each row ~100 kB of JSON: 3 MB holds about thirty of them in all.
    const reply = await run(
      "SELECT i, repeat('x', 100000) AS big FROM generate_series(1, 25) i; SELECT i, repeat('y', 100000) FROM generate_series(1, 25) i",
      1000,
    );

    expect(reply.status).toBe(200);
    const [first, second] = reply.body.results as Array<{ rows: unknown[]; truncated: boolean }>;
    expect(first?.rows).toHaveLength(25);
    expect(first?.truncated).toBe(false);
    expect(second?.truncated).toBe(true);
    expect((first?.rows.length ?? 0) + (second?.rows.length ?? 0)).toBeLessThan(31);
  });

  it('shows as many wide rows as fit, reading them a few at a time, where their whole would be refused', async () => {
    // 300 rows of 200 kB: 60 MB, twenty times what one answer may carry.
    const reply = await run("SELECT i, repeat('w', 200000) AS wide FROM generate_series(1, 300) i");

    expect(reply.status).toBe(200);
    expect(reply.body.truncated).toBe(true);
    expect(reply.body.results[0].rows.length).toBeGreaterThan(10);
    expect(reply.body.results[0].rows.length).toBeLessThan(16);
  });

  it('reads one row of a statement once the bytes are spent, and sizes batches from the rows so far', async () => {
    const reply = await run(
      [
        "SELECT i, repeat('x', 100000) AS big FROM generate_series(1, 40) i",
        "SELECT repeat('y', 100000) FROM generate_series(1, 40)",
        "SELECT repeat('z', 100000) FROM generate_series(1, 40)",
        "SELECT repeat('a', 10000) FROM generate_series(1, 45); SELECT repeat('b', 10000) FROM generate_series(1, 5000)",
      ].join(';\n'),
    );

    expect(reply.status).toBe(200);
    const results = reply.body.results as Array<{ rows: unknown[]; truncated: boolean }>;
    expect(results.map((r) => r.truncated)).toEqual([true, true, true, true, true]);
    expect(results.slice(1).every((r) => r.rows.length === 0)).toBe(true);
  });

  it('shows the first of rows of 1.5 MB each instead of refusing them', async () => {
    const reply = await run("SELECT repeat('w', 1500000) AS huge FROM generate_series(1, 40)");

    expect(reply.status).toBe(200);
    expect(reply.body.truncated).toBe(true);
    expect(reply.body.results[0].rows.length).toBeGreaterThan(0);
  });

  it('shows nothing for COPY TO STDOUT, refuses COPY FROM STDIN naming the imports, and keeps the session', async () => {
    const reply = await run('COPY people TO STDOUT; SELECT 2 AS two');

    expect(reply.status).toBe(200);
    expect(reply.body.results[0]).toMatchObject({ command: 'COPY', rowCount: 50000, rows: [] });
    expect(reply.body.results[1].rows).toEqual([{ two: 2 }]);
    const copyIn = await run('COPY notes (body) FROM STDIN');
    expect(copyIn.status).toBe(400);
    expect(copyIn.body).toMatchObject({ error: 'COPY from the client' });
    expect((await run('SELECT 3 AS three')).body.results[0].rows).toEqual([{ three: 3 }]);
  });

  it('gives an anon key its one statement’s rows, capped, and still refuses a second statement', async () => {
    const made = await call(keys, {
      method: 'POST',
      path: `/api/project/${schema}/keys`,
      body: { keyType: 'anon', keyName: 'editor' },
    });
    expect(made.status).toBe(201);
    const asKey = { auth: null, headers: { authorization: `Bearer ${made.body.key}` } };
    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT id FROM people ORDER BY id', maxRows: 5 },
      ...asKey,
    });
    expect(reply.status).toBe(200);
    expect(reply.body.results).toHaveLength(1);
    expect(reply.body.results[0].rows).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }, { id: 4 }, { id: 5 }]);
    expect(reply.body.truncated).toBe(true);

    const two = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT 1; SELECT 2', maxRows: 5 },
      ...asKey,
    });
    expect(two.status).toBe(400);
  });

  it('still refuses past the limits without maxRows', async () => {
    const reply = await run('SELECT * FROM people', null);

    expect(reply.status).toBe(413);
  });

  it.each([0, -1, 1.5, '10'])('answers maxRows %p with 400 naming it', async (maxRows) => {
    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: 'SELECT 1', schema, maxRows },
    });
    expect(reply.status).toBe(400);
    expect(JSON.stringify(reply.body)).toMatch(/maxRows/);
  });
});

describe('POST /api/query with explain', () => {
  const explain = (sql: string, mode: 'plan' | 'analyze', as: object = {}) =>
    call(query, { method: 'POST', path: '/api/query', body: { sql, schema, explain: mode }, ...as });

  it('answers an explained DELETE’s plan, run with ANALYZE, and deletes nothing', async () => {
    const before = await withAdminClient((c) => c.query(`SELECT count(*)::int AS n FROM "${schema}".people`));
    const reply = await explain('DELETE FROM people WHERE id <= 100', 'analyze');

    expect(reply.status).toBe(200);
    const [top] = reply.body.plan as Array<{ Plan: Record<string, unknown>; 'Execution Time': number }>;
    expect(top?.Plan['Node Type']).toBe('ModifyTable');
    expect(top?.Plan.Operation).toBe('Delete');
    expect(top?.['Execution Time']).toBeGreaterThan(0);
    // Actual rows and buffers: it ran.
    const scan = (top?.Plan.Plans as Array<Record<string, unknown>> | undefined)?.[0];
    expect(scan?.['Actual Rows']).toBe(100);
    expect(scan).toHaveProperty('Shared Hit Blocks');
    const after = await withAdminClient((c) => c.query(`SELECT count(*)::int AS n FROM "${schema}".people`));
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('answers a plan without running it, and says what it cannot explain', async () => {
    const plan = await explain('SELECT * FROM people WHERE id = 7', 'plan');
    expect(plan.status).toBe(200);
    expect(plan.body.plan[0].Plan).not.toHaveProperty('Actual Rows');

    expect((await explain('SELECT 1; SELECT 2', 'plan')).body.error).toBe('One statement to explain');
    expect((await explain('CREATE TABLE nope (x int)', 'plan')).body.error).toBe('Nothing to explain');
    const wrong = await explain('SELECT nope FROM people', 'analyze');
    expect(wrong.status).toBe(400);
    expect(wrong.body.position).toBe(8);
  });
});
