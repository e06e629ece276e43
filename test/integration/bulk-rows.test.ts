import { handler as keys } from '#functions/keys';
import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { closePool } from '#lib/db/pool';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { withSetting } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

/** POST /api/table/:tableName/rows: many rows in one statement, all or nothing, and upserts. */

afterAll(closePool);

let schema: string;
let otherSchema: string;

/** The admin's SQL in the test's schema, as its role (tables owned by the schema). */
async function run(sql: string, inSchema = schema): Promise<void> {
  const reply = await call(query, { method: 'POST', path: '/api/query', body: { sql, schema: inSchema } });
  if (reply.status !== 200) throw new Error(`${sql}: ${reply.text}`);
}

const stored = (table: string, order = 'id') =>
  withAdminClient(
    async (c) => (await c.query(`SELECT * FROM "${schema}"."${table}" ORDER BY ${order}`)).rows,
  );

const bulk = (table: string, body: Record<string, unknown>, rest: Record<string, unknown> = {}) =>
  call(rows, { method: 'POST', path: `/api/table/${table}/rows`, body: { schema, ...body }, ...rest });

/** A table made for one test: `people (id serial pk, name text not null, email text unique, age int, ...)`. */
async function people(): Promise<string> {
  const name = uniqueName('people');
  await run(`
    CREATE TABLE ${name} (
      id serial PRIMARY KEY,
      name text NOT NULL,
      email text UNIQUE,
      age int CHECK (age >= 0),
      city text DEFAULT 'Berlin',
      joined date DEFAULT DATE '2020-01-01');
    INSERT INTO ${name} (id, name, email, age) VALUES (1, 'Ann', 'ann@example.com', 30);
    SELECT setval(pg_get_serial_sequence('${name}', 'id'), 100)`);
  return name;
}

beforeAll(async () => {
  schema = await freshSchema('bulk');
  otherSchema = await freshSchema('bulkother');
});

describe('inserting many rows', () => {
  it('writes rows that name different columns in one statement, a cell left out taking its default', async () => {
    const table = await people();

    const reply = await bulk(table, {
      rows: [
        { name: 'Bob', age: 40 },
        { name: 'Cy', city: 'Paris' },
        { id: 500, name: 'Di', email: 'di@example.com', joined: '2024-05-06' },
      ],
    });

    expect(reply.status).toBe(201);
    expect(reply.body).toEqual({
      count: 3,
      rows: [
        { id: 101, name: 'Bob', email: null, age: 40, city: 'Berlin', joined: '2020-01-01' },
        { id: 102, name: 'Cy', email: null, age: null, city: 'Paris', joined: '2020-01-01' },
        { id: 500, name: 'Di', email: 'di@example.com', age: null, city: 'Berlin', joined: '2024-05-06' },
      ],
    });
    expect(await stored(table)).toHaveLength(4);
  });

  it('writes rows that name no column at all, every column taking its default', async () => {
    const table = uniqueName('defaults');
    await run(`CREATE TABLE ${table} (id serial PRIMARY KEY, label text DEFAULT 'none')`);

    const reply = await bulk(table, { rows: [{}, {}, {}] });

    expect(reply.status).toBe(201);
    expect(reply.body.rows).toEqual([
      { id: 1, label: 'none' },
      { id: 2, label: 'none' },
      { id: 3, label: 'none' },
    ]);
  });

  it('tells a cell left out from a column named like an object property (constructor, toString)', async () => {
    const table = uniqueName('props');
    await run(
      `CREATE TABLE ${table} (id int PRIMARY KEY, constructor text DEFAULT 'c', "toString" text DEFAULT 't')`,
    );

    const reply = await bulk(table, {
      rows: [{ id: 1 }, { id: 2, constructor: 'given' }],
    });
    const partial = await bulk(table, {
      rows: [{ id: 1, toString: 'x' }, { id: 2 }],
      onConflict: 'update',
    });

    expect(reply.status).toBe(201);
    expect(reply.body.rows).toEqual([
      { id: 1, constructor: 'c', toString: 't' },
      { id: 2, constructor: 'given', toString: 't' },
    ]);
    expect(partial.status).toBe(400);
    expect(partial.body.message).toMatch(/rows\[1\] leaves out toString,/);
  });

  it('takes JSON text, or any other JSON, for json/jsonb columns and JSON arrays for array columns', async () => {
    const table = uniqueName('docs');
    await run(`CREATE TABLE ${table} (id int PRIMARY KEY, doc jsonb, raw json, tags text[], scores int[])`);

    const reply = await bulk(table, {
      rows: [
        { id: 1, doc: { a: [1, { b: null }] }, raw: [1, 'two'], tags: ['x', 'y, z', '"q"'], scores: [1, 2] },
        {
          id: 2,
          doc: [1, 2],
          raw: '{"big": 12345678901234567890,  "same": "text"}',
          tags: [],
          scores: [
            [1, 2],
            [3, 4],
          ],
        },
        { id: 3, doc: '"a string"', raw: 7 },
        { id: 4, doc: 42, tags: null },
      ],
    });

    // Answered as read: each json value its JSON text (a json value keeps its own spacing).
    expect(reply.status).toBe(201);
    expect(reply.body.rows).toEqual([
      { id: 1, doc: '{"a": [1, {"b": null}]}', raw: '[1,"two"]', tags: ['x', 'y, z', '"q"'], scores: [1, 2] },
      {
        id: 2,
        doc: '[1, 2]',
        raw: '{"big": 12345678901234567890,  "same": "text"}',
        tags: [],
        scores: [
          [1, 2],
          [3, 4],
        ],
      },
      { id: 3, doc: '"a string"', raw: '7', tags: null, scores: null },
      { id: 4, doc: '42', raw: null, tags: null, scores: null },
    ]);
  });

  it('refuses a string that is not JSON text for a json column, naming the row and column', async () => {
    const table = uniqueName('docs');
    await run(`CREATE TABLE ${table} (id int PRIMARY KEY, doc jsonb)`);

    const reply = await bulk(table, {
      rows: [
        { id: 1, doc: '{}' },
        { id: 2, doc: 'a string' },
      ],
    });

    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({
      error: expect.any(String),
      message: expect.stringMatching(/json.*rows\[1\]\.doc/),
    });
  });

  it('writes exactly as many values as one statement can bind', async () => {
    const table = uniqueName('wide');
    const columns = Array.from({ length: 255 }, (_, i) => `c${i}`);
    await run(`CREATE TABLE ${table} (${columns.map((name) => `${name} int`).join(', ')})`);
    const row = Object.fromEntries(columns.map((name, i) => [name, i]));

    const reply = await bulk(table, { rows: Array.from({ length: 257 }, () => row) });

    expect([reply.status, reply.body.count]).toEqual([201, 257]);
  });
});

describe('all or nothing', () => {
  it('a bad value in the last row writes nothing, and the answer names the reason and the cell', async () => {
    const table = await people();

    const reply = await bulk(table, {
      rows: [
        { name: 'Bob', age: 1 },
        { name: 'Cy', age: 2 },
        { name: 'Di', age: 'old' },
      ],
    });

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'Invalid value',
      message: 'invalid input syntax for type integer: "old", in rows[2].age',
    });
    expect(await stored(table)).toHaveLength(1);
  });

  it.each([
    ['a CHECK it fails', { name: 'Di', age: -1 }, 'Check violation', /violates check constraint/],
    ['a NOT NULL column left out', { age: 3 }, 'Missing value', /null value in column "name"/],
    [
      'a key another row holds',
      { name: 'Di', email: 'ann@example.com' },
      'Duplicate value',
      /Key \(email\)=\(ann@example.com\) already exists/,
    ],
  ])('%s in the last row writes nothing', async (_, last, error, message) => {
    const table = await people();

    const reply = await bulk(table, { rows: [{ name: 'Bob' }, { name: 'Cy' }, last] });

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe(error);
    expect(reply.body.message).toMatch(message);
    expect(await stored(table)).toHaveLength(1);
  });

  it('a trigger of the tenant that raises is a 400 with its message, and nothing is written', async () => {
    const table = await people();
    await run(`
      CREATE FUNCTION ${table}_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.name = 'Mallory' THEN RAISE EXCEPTION 'no Mallory here'; END IF; RETURN NEW; END $$;
      CREATE TRIGGER guard BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_guard()`);

    const reply = await bulk(table, { rows: [{ name: 'Bob' }, { name: 'Mallory' }] });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/no Mallory here/);
    expect(await stored(table)).toHaveLength(1);
  });

  describe('with QUERY_MAX_ROWS=2', () => {
    withSetting('QUERY_MAX_ROWS', '2');

    it('rows written past the result limits are a 413 that wrote nothing', async () => {
      const table = await people();

      const reply = await bulk(table, { rows: [{ name: 'Bob' }, { name: 'Cy' }, { name: 'Di' }] });

      expect(reply.status).toBe(413);
      expect(reply.body.message).toMatch(/QUERY_MAX_ROWS/);
      expect(await stored(table)).toHaveLength(1);
    });
  });
});

describe('upserts', () => {
  it('onConflict "update" by the primary key updates the rows that exist and inserts the others', async () => {
    const table = await people();

    const reply = await bulk(table, {
      rows: [
        { id: 1, name: 'Ann B.', age: 31 },
        { id: 2, name: 'Bob', age: 40 },
      ],
      onConflict: 'update',
    });

    expect(reply.status).toBe(201);
    expect(reply.body.rows).toEqual([
      { id: 1, name: 'Ann B.', email: 'ann@example.com', age: 31, city: 'Berlin', joined: '2020-01-01' },
      { id: 2, name: 'Bob', email: null, age: 40, city: 'Berlin', joined: '2020-01-01' },
    ]);
    expect(await stored(table)).toHaveLength(2);
  });

  it('takes a key’s own columns as its conflict target, never the columns an index only INCLUDEs', async () => {
    const table = uniqueName('included');
    await run(`CREATE TABLE ${table} (id int, code text, note text,
                 PRIMARY KEY (id) INCLUDE (note), UNIQUE (code) INCLUDE (note));
               INSERT INTO ${table} VALUES (1, 'a', 'first')`);

    const byKey = await bulk(table, { rows: [{ id: 1, code: 'b', note: 'by key' }], onConflict: 'update' });
    const byCode = await bulk(table, {
      rows: [{ id: 9, code: 'b', note: 'by code' }],
      onConflict: 'update',
      conflictColumns: ['code'],
    });

    expect([byKey.status, byCode.status]).toEqual([201, 201]);
    expect(await stored(table)).toEqual([{ id: 9, code: 'b', note: 'by code' }]);
  });

  it('onConflict "ignore" by the primary key keeps the stored row and answers only the rows inserted', async () => {
    const table = await people();

    const reply = await bulk(table, {
      rows: [
        { id: 1, name: 'Someone else' },
        { id: 2, name: 'Bob' },
      ],
      onConflict: 'ignore',
    });

    expect(reply.status).toBe(201);
    expect(reply.body).toEqual({
      count: 1,
      rows: [{ id: 2, name: 'Bob', email: null, age: null, city: 'Berlin', joined: '2020-01-01' }],
    });
    expect((await stored(table))[0]).toMatchObject({ id: 1, name: 'Ann' });
  });

  it('upserts by the columns of a unique constraint, in any order, with update and with ignore', async () => {
    const table = uniqueName('stock');
    await run(`
      CREATE TABLE ${table} (id serial PRIMARY KEY, shop text, sku text, qty int, UNIQUE (shop, sku));
      INSERT INTO ${table} (shop, sku, qty) VALUES ('a', 'x', 1)`);

    const updated = await bulk(table, {
      rows: [
        { shop: 'a', sku: 'x', qty: 5 },
        { shop: 'b', sku: 'x', qty: 7 },
      ],
      onConflict: 'update',
      conflictColumns: ['sku', 'shop'],
    });
    const ignored = await bulk(table, {
      rows: [
        { shop: 'a', sku: 'x', qty: 100 },
        { shop: 'c', sku: 'x', qty: 9 },
      ],
      onConflict: 'ignore',
      conflictColumns: ['shop', 'sku'],
    });

    expect(updated.status).toBe(201);
    expect(updated.body.rows).toEqual([
      { id: 1, shop: 'a', sku: 'x', qty: 5 },
      { id: 3, shop: 'b', sku: 'x', qty: 7 },
    ]);
    expect(ignored.status).toBe(201);
    expect(ignored.body.rows).toEqual([{ id: 5, shop: 'c', sku: 'x', qty: 9 }]);
    expect((await stored(table)).map((row) => row.qty)).toEqual([5, 7, 9]);
  });

  it('"update" of rows that name only the conflict target answers the conflicting rows as stored', async () => {
    const table = uniqueName('links');
    await run(`CREATE TABLE ${table} (a int, b int, note text DEFAULT 'n', PRIMARY KEY (a, b));
               INSERT INTO ${table} VALUES (1, 1, 'kept')`);

    const reply = await bulk(table, {
      rows: [
        { a: 1, b: 1 },
        { a: 1, b: 2 },
      ],
      onConflict: 'update',
    });

    expect(reply.status).toBe(201);
    expect(reply.body.rows).toEqual([
      { a: 1, b: 1, note: 'kept' },
      { a: 1, b: 2, note: 'n' },
    ]);
  });

  it.each([
    [
      'columns that are not a unique key',
      { onConflict: 'update', conflictColumns: ['name'] },
      /conflictColumns \(name\) are not the columns of a unique constraint or index.*its unique keys: \(email\), \(id\)$/,
    ],
    [
      'part of a unique key',
      { onConflict: 'ignore', conflictColumns: ['id', 'email'] },
      /conflictColumns \(id, email\) are not/,
    ],
    ['an unknown column', { onConflict: 'ignore', conflictColumns: ['nope'] }, /has no column "nope"/],
    ['conflictColumns without onConflict', { conflictColumns: ['id'] }, /conflictColumns needs onConflict/],
  ])('refuses %s as the conflict target with 400', async (_, options, message) => {
    const table = await people();

    const reply = await bulk(table, { rows: [{ id: 1, name: 'X' }], ...options });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
    expect(await stored(table)).toEqual([expect.objectContaining({ id: 1, name: 'Ann' })]);
  });

  it('refuses an upsert on a table without a primary key unless it names a unique key', async () => {
    const table = uniqueName('nokey');
    await run(`CREATE TABLE ${table} (code text UNIQUE, label text)`);

    const bare = await bulk(table, { rows: [{ code: 'a' }], onConflict: 'ignore' });
    const named = await bulk(table, {
      rows: [{ code: 'a' }],
      onConflict: 'ignore',
      conflictColumns: ['code'],
    });

    expect(bare.status).toBe(400);
    expect(bare.body.message).toMatch(
      /has no primary key; name the columns of one of its unique constraints/,
    );
    expect([named.status, named.body.count]).toEqual([201, 1]);
  });

  it('refuses "update" when rows name different columns: a cell left out would overwrite a stored value', async () => {
    const table = await people();

    const reply = await bulk(table, {
      rows: [
        { id: 1, name: 'Ann', age: 31 },
        { id: 2, name: 'Bob' },
      ],
      onConflict: 'update',
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/every row must name the same columns: rows\[1\] leaves out age/);
    expect((await stored(table))[0]).toMatchObject({ age: 30 });
  });

  it('refuses "update" that names the same key twice with PostgreSQL’s reason', async () => {
    const table = await people();

    const reply = await bulk(table, {
      rows: [
        { id: 7, name: 'A' },
        { id: 7, name: 'B' },
      ],
      onConflict: 'update',
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/cannot affect row a second time/);
    expect(await stored(table)).toHaveLength(1);
  });
});

describe('input', () => {
  it.each([
    ['an unknown column', { rows: [{ name: 'a' }, { name: 'b', nope: 1 }] }, /has no column "nope"/],
    ['no rows', { rows: [] }, /rows must hold at least one row/],
    [
      'more rows than one request may hold',
      { rows: Array.from({ length: 1001 }, () => ({ name: 'a' })) },
      /rows may hold at most 1000 rows/,
    ],
    ['a bare array', [{ name: 'a' }], /request body must be a JSON object/],
    ['a row that is not an object', { rows: [{ name: 'a' }, 'b'] }, /rows\.1 must be a JSON object/],
    ['a column name that is no identifier', { rows: [{ 'name"; --': 'a' }] }, /column name must start/],
    ['an unknown onConflict', { rows: [{ name: 'a' }], onConflict: 'merge' }, /onConflict/],
  ])('refuses %s with 400, writing nothing', async (_, body, message) => {
    const table = await people();

    const reply = await call(rows, {
      method: 'POST',
      path: `/api/table/${table}/rows`,
      body: Array.isArray(body) ? body : { schema, ...body },
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
    expect(await stored(table)).toHaveLength(1);
  });

  it('answers 404 for a table that does not exist', async () => {
    const reply = await bulk('missing', { rows: [{ a: 1 }] });

    expect(reply.status).toBe(404);
  });
});

describe('routing', () => {
  it('POST …/rows, …/row and …/rows/delete reach their own routes, even for a table named rows', async () => {
    await run('CREATE TABLE rows (id int PRIMARY KEY, v text)');

    const many = await bulk('rows', { rows: [{ id: 1 }, { id: 2 }, { id: 3 }] });
    const one = await call(rows, {
      method: 'POST',
      path: '/api/table/rows/row',
      body: { data: { id: 4 }, schema },
    });
    const deleted = await call(rows, {
      method: 'POST',
      path: '/api/table/rows/rows/delete',
      body: { rowIds: [1, 2], schema },
    });
    const patched = await call(rows, {
      method: 'PATCH',
      path: '/api/table/rows/3',
      body: { column: 'v', value: 'x', schema },
    });

    expect([many.status, one.status, deleted.status, patched.status]).toEqual([201, 201, 200, 200]);
    expect(deleted.body.deletedCount).toBe(2);
    expect((await stored('rows')).map((row) => row.id)).toEqual([3, 4]);
  });
});

describe('API keys', () => {
  const key = async (keyType: 'anon' | 'service_role', inSchema = schema) => {
    const reply = await call(keys, {
      method: 'POST',
      path: `/api/project/${inSchema}/keys`,
      body: { keyName: uniqueName(keyType), keyType },
    });
    return { auth: null, headers: { authorization: `Bearer ${reply.body.key}` } };
  };

  it('a service_role key inserts in its own schema (schema optional), an anon key gets 403', async () => {
    const table = await people();
    const service = await key('service_role');
    const anon = await key('anon');
    const send = (as: object) =>
      call(rows, {
        method: 'POST',
        path: `/api/table/${table}/rows`,
        body: { rows: [{ name: 'K' }] },
        ...as,
      });

    const written = await send(service);
    const refused = await send(anon);

    expect(written.status).toBe(201);
    expect(refused.status).toBe(403);
    expect(refused.body.message).toMatch(/anon keys are read-only/);
    expect(await stored(table)).toHaveLength(2);
  });

  it('a service_role key of another schema gets 403 and writes nothing', async () => {
    const table = await people();
    const other = await key('service_role', otherSchema);

    const reply = await bulk(table, { rows: [{ name: 'K' }] }, other);

    expect(reply.status).toBe(403);
    expect(await stored(table)).toHaveLength(1);
  });
});
