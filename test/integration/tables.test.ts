import { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { withAdminClient, withOwnerClient } from '#test/support/db';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema();
});

const createTable = (tableName: string, columns: unknown[], inSchema = schema) =>
  call(tables, { method: 'POST', path: '/api/table/create', body: { tableName, schema: inSchema, columns } });

const insert = (table: string, data: Record<string, unknown>) =>
  call(rows, { method: 'POST', path: `/api/table/${table}/row`, body: { data, schema } });

describe('POST /api/table/create', () => {
  it('creates a table with the allowed types, defaults and a primary key, owned by the schema user', async () => {
    const reply = await createTable('products', [
      { name: 'id', type: 'SERIAL', primaryKey: true },
      { name: 'name', type: 'VARCHAR', length: 120, nullable: false },
      { name: 'price', type: 'DECIMAL(10,2)', defaultValue: '0' },
      { name: 'active', type: 'BOOLEAN', defaultValue: 'true' },
      { name: 'created_at', type: 'TIMESTAMPTZ', defaultValue: 'now()' },
      { name: 'uid', type: 'uuid', defaultValue: 'gen_random_uuid()' },
      { name: 'meta', type: 'JSONB' },
      { name: 'code', type: 'CHAR(3)', defaultValue: "it'" },
    ]);

    expect(reply.status).toBe(201);
    expect(reply.body).toEqual({ success: true, message: `Table "products" created in schema "${schema}"` });
    const owner = await withAdminClient((c) =>
      c.query(`SELECT tableowner FROM pg_tables WHERE schemaname = $1 AND tablename = 'products'`, [schema]),
    );
    expect(owner.rows[0].tableowner).toBe(`${schema}_owner`);
  });

  it('lists it, sorted', async () => {
    await createTable('aardvarks', [{ name: 'id', type: 'INTEGER', primaryKey: true }]);

    const reply = await call(tables, { path: '/api/tables', query: { schema } });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual(['aardvarks', 'products']);
  });

  it.each([
    ['a type off the allow-list', [{ name: 'a', type: 'MONEY' }], 'Invalid column type', /not supported/],
    [
      'SQL smuggled into the type',
      [{ name: 'a', type: 'TEXT); DROP TABLE x; --' }],
      'Invalid column type',
      /not supported/,
    ],
    [
      'a length on a type without one',
      [{ name: 'a', type: 'INTEGER', length: 5 }],
      'Invalid column type',
      /takes no length/,
    ],
    ['scale above precision', [{ name: 'a', type: 'NUMERIC(4,6)' }], 'Invalid column type', /scale/],
    [
      'a duplicate column',
      [
        { name: 'a', type: 'TEXT' },
        { name: 'a', type: 'TEXT' },
      ],
      'Invalid columns',
      /twice/,
    ],
    [
      'a bad column name',
      [{ name: 'a b', type: 'TEXT' }],
      'Invalid columns',
      /column name must start with a letter/,
    ],
    [
      'a default of the wrong type',
      [{ name: 'a', type: 'INTEGER', defaultValue: 'abc' }],
      'Invalid value',
      /invalid input syntax/,
    ],
    ['no columns', [], 'Invalid columns', /at least 1/],
  ])('refuses %s with 400 and creates nothing', async (_, columns, error, message) => {
    const reply = await createTable('refused', columns);

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe(error);
    expect(reply.body.message).toMatch(message);
    const exists = await withAdminClient((c) =>
      c.query(`SELECT to_regclass($1) AS t`, [`"${schema}".refused`]),
    );
    expect(exists.rows[0].t).toBeNull();
  });

  it('refuses an existing table name with 400', async () => {
    const reply = await createTable('products', [{ name: 'id', type: 'INTEGER' }]);

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Table exists');
  });

  it('answers 404 for a schema that does not exist', async () => {
    const reply = await createTable('t', [{ name: 'id', type: 'INTEGER' }], 'no_such_schema');

    expect(reply.status).toBe(404);
    expect(reply.body.error).toBe('Schema not found');
  });
});

describe('rows', () => {
  it('inserts a row and answers it as stored, defaults filled in', async () => {
    const reply = await insert('products', { name: 'Widget', meta: { tags: ['a', 'b'] } });

    expect(reply.status).toBe(201);
    expect(reply.body.row).toMatchObject({
      id: 1,
      name: 'Widget',
      price: '0.00',
      active: true,
      meta: '{"tags": ["a", "b"]}',
      code: "it'",
    });
    expect(reply.body.row.uid).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('updates one column of the row with that primary key', async () => {
    const reply = await call(rows, {
      method: 'PATCH',
      path: '/api/table/products/1',
      body: { column: 'price', value: 9.5, schema },
    });

    expect(reply.status).toBe(200);
    expect(reply.body.row).toMatchObject({ id: 1, price: '9.50' });
  });

  it.each([
    ['an unknown column', { nope: 1 }, 'Unknown column', /has no column "nope"/],
    [
      'a value of the wrong type',
      { name: 'x', price: 'cheap' },
      'Invalid value',
      /invalid input syntax for type numeric/,
    ],
    ['a missing NOT NULL value', { price: 1 }, 'Missing value', /null value in column "name"/],
    [
      'a hostile column name',
      { 'name"; DROP TABLE products; --': 1 },
      'Invalid data',
      /column name must start/,
    ],
  ])('refuses %s with the reason in plain words', async (_, data, error, message) => {
    const reply = await insert('products', data);

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe(error);
    expect(reply.body.message).toMatch(message);
  });

  it('answers 404 when no row has that key, and 400 for a key of the wrong type', async () => {
    const missing = await call(rows, {
      method: 'PATCH',
      path: '/api/table/products/999',
      body: { column: 'name', value: 'x', schema },
    });
    const malformed = await call(rows, {
      method: 'DELETE',
      path: '/api/table/products/row/abc',
      query: { schema },
    });

    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('Row not found');
    expect(malformed.status).toBe(400);
  });

  it('refuses row addressing on a table without a single-column primary key', async () => {
    await createTable('nokey', [{ name: 'a', type: 'TEXT' }]);

    const reply = await call(rows, { method: 'DELETE', path: '/api/table/nokey/row/1', query: { schema } });

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('No single-column primary key');
  });

  it('deletes one row, then several, counting them', async () => {
    const ids: number[] = [];
    for (const name of ['b', 'c', 'd']) ids.push((await insert('products', { name })).body.row.id);
    const [first, second, third] = ids;

    const one = await call(rows, {
      method: 'DELETE',
      path: `/api/table/products/row/${first}`,
      query: { schema },
    });
    const again = await call(rows, {
      method: 'DELETE',
      path: `/api/table/products/row/${first}`,
      query: { schema },
    });
    const many = await call(rows, {
      method: 'POST',
      path: '/api/table/products/rows/delete',
      body: { rowIds: [second, String(third), 99999], schema },
    });

    expect(one.status).toBe(200);
    expect(again.status).toBe(404);
    expect(many.status).toBe(200);
    expect(many.body).toEqual({ success: true, deletedCount: 2, message: '2 rows deleted from "products"' });
  });
});

describe('GET /api/table/:tableName', () => {
  beforeAll(async () => {
    await createTable('numbers', [
      { name: 'n', type: 'INTEGER', primaryKey: true },
      { name: 'label', type: 'TEXT' },
    ]);
    await withAdminClient((c) =>
      c.query(`INSERT INTO "${schema}".numbers SELECT g, 'n' || g FROM generate_series(120, 1, -1) g`),
    );
  });

  it('pages in primary-key order with the exact total, and the cursor of the next page', async () => {
    const first = await call(tables, { path: '/api/table/numbers', query: { schema } });
    const third = await call(tables, {
      path: '/api/table/numbers',
      query: { schema, page: '3', limit: '50' },
    });

    expect(first.body.total).toBe(120);
    expect(first.body.totalExact).toBe(true);
    expect(first.body.nextCursor).toBe('50');
    expect(third.body.total).toBe(120);
    expect(third.body.nextCursor).toBeNull();
    expect(first.body.columns).toEqual(['n', 'label']);
    expect(first.body.data).toHaveLength(50);
    expect(first.body.data[0]).toEqual({ n: 1, label: 'n1' });
    expect(third.body.page).toBe(3);
    expect(third.body.data.map((r: { n: number }) => r.n)).toEqual(
      Array.from({ length: 20 }, (_, i) => 101 + i),
    );
  });

  it('skips the count with count=false (total null), for page turns of big tables', async () => {
    const turned = await call(tables, {
      path: '/api/table/numbers',
      query: { schema, page: '2', count: 'false' },
    });

    expect(turned.status).toBe(200);
    expect(turned.body.total).toBeNull();
    expect(turned.body.totalExact).toBe(false);
    expect(turned.body.data[0]).toEqual({ n: 51, label: 'n51' });
  });

  it.each([
    [{ count: 'maybe' }, /expected true or false/],
    [{ limit: '0' }, /limit must be between 1 and 1000/],
    [{ limit: '1001' }, /limit must be between 1 and 1000/],
    [{ limit: 'ten' }, /limit must be a number/],
    [{ page: '0' }, /page must be between 1/],
    [{ page: '1.5' }, /page must be a whole number/],
    [{ pgae: '2' }, /unknown field pgae/],
    [{ after: 'one' }, /invalid input syntax for type integer/],
  ])('refuses %o with 400', async (query, message) => {
    const reply = await call(tables, { path: '/api/table/numbers', query: { schema, ...query } });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
  });

  it('answers 404 for a table that does not exist', async () => {
    const reply = await call(tables, { path: '/api/table/ghost', query: { schema } });

    expect(reply.status).toBe(404);
    expect(reply.body).toEqual({
      error: 'Table not found',
      message: `table "ghost" does not exist in schema "${schema}"`,
    });
  });
});

describe('POST /api/table/:tableName/column', () => {
  const addColumn = (table: string, body: Record<string, unknown>) =>
    call(tables, { method: 'POST', path: `/api/table/${table}/column`, body: { schema, ...body } });

  it('adds a column with the same type rules', async () => {
    const reply = await addColumn('numbers', {
      columnName: 'note',
      dataType: 'VARCHAR',
      length: 20,
      defaultValue: 'none',
    });

    expect(reply.status).toBe(201);
    const page = await call(tables, { path: '/api/table/numbers', query: { schema, limit: '1' } });
    expect(page.body.data[0]).toEqual({ n: 1, label: 'n1', note: 'none' });
  });

  it('answers 400 for an existing column, a bad type, and a NOT NULL column without default on a full table', async () => {
    expect((await addColumn('numbers', { columnName: 'label', dataType: 'TEXT' })).body.error).toBe(
      'Column exists',
    );
    expect((await addColumn('numbers', { columnName: 'x', dataType: 'BLOB' })).status).toBe(400);
    const notNull = await addColumn('numbers', { columnName: 'y', dataType: 'TEXT', nullable: false });
    expect(notNull.status).toBe(400);
    expect(notNull.body.message).toMatch(/contains null values/);
  });

  it('answers 404 for a missing table', async () => {
    expect((await addColumn('ghost', { columnName: 'x', dataType: 'TEXT' })).status).toBe(404);
  });
});

describe('POST /api/table/:tableName/clone', () => {
  const clone = (table: string, body: Record<string, unknown>) =>
    call(tables, { method: 'POST', path: `/api/table/${table}/clone`, body: { schema, ...body } });

  it('copies columns, defaults, primary key, indexes and, when asked, rows; serials get their own sequence', async () => {
    await withAdminClient((c) => c.query(`CREATE INDEX products_name_idx ON "${schema}".products (name)`));

    const reply = await clone('products', { newTableName: 'products_copy', copyData: true });

    expect(reply.status).toBe(201);
    const copied = await call(tables, { path: '/api/table/products_copy', query: { schema } });
    const original = await call(tables, { path: '/api/table/products', query: { schema } });
    expect(copied.body.data).toEqual(original.body.data);
    const indexes = await withAdminClient((c) =>
      c.query(
        `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'products_copy' ORDER BY indexname`,
        [schema],
      ),
    );
    const definitions = indexes.rows.map((r) => r.indexdef);
    expect(definitions).toContainEqual(expect.stringMatching(/UNIQUE INDEX products_copy_pkey .*\(id\)$/));
    expect(definitions).toContainEqual(expect.stringMatching(/INDEX .* \(name\)$/));
    const a = await insert('products_copy', { name: 'only in copy' });
    const b = await insert('products', { name: 'only in original' });
    expect(a.body.row.id).toBe(Math.max(...original.body.data.map((r: { id: number }) => r.id)) + 1);
    expect(b.status).toBe(201);
  });

  it('copies the structure without rows by default', async () => {
    await clone('products', { newTableName: 'products_empty' });

    const copied = await call(tables, { path: '/api/table/products_empty', query: { schema } });
    expect(copied.body.total).toBe(0);
  });

  it('refuses an existing target with 400 and a missing source with 404', async () => {
    expect((await clone('products', { newTableName: 'numbers' })).body.error).toBe('Table exists');
    expect((await clone('ghost', { newTableName: 'ghost2' })).status).toBe(404);
  });
});

describe('DELETE /api/table/:tableName', () => {
  it('refuses a table others reference, naming them, unless cascade=true', async () => {
    await createTable('parents', [{ name: 'id', type: 'INTEGER', primaryKey: true }]);
    await withOwnerClient(schema, (c) =>
      c.query(
        `CREATE TABLE "${schema}".children (id int PRIMARY KEY, parent int REFERENCES "${schema}".parents (id))`,
      ),
    );

    const refused = await call(tables, { method: 'DELETE', path: '/api/table/parents', query: { schema } });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('Table has dependants');
    expect(refused.body.message).toMatch(/children/);

    const cascaded = await call(tables, {
      method: 'DELETE',
      path: '/api/table/parents',
      query: { schema, cascade: 'true' },
    });
    expect(cascaded.status).toBe(200);
    expect((await call(tables, { path: '/api/tables', query: { schema } })).body).not.toContain('parents');
  });

  it('answers 404 for a table that does not exist', async () => {
    expect(
      (await call(tables, { method: 'DELETE', path: '/api/table/ghost', query: { schema } })).status,
    ).toBe(404);
  });
});
