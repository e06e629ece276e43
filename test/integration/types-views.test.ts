import { handler as constraints } from '#functions/constraints';
import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('typesviews');
});

const createType = (body: Record<string, unknown>) =>
  call(constraints, { method: 'POST', path: '/api/types', body: { schema, ...body } });
const addValue = (type: string, body: Record<string, unknown>) =>
  call(constraints, { method: 'POST', path: `/api/types/${type}/values`, body: { schema, ...body } });
const listTypes = async () => (await call(constraints, { path: '/api/types', query: { schema } })).body;

describe('enum types', () => {
  it('dryRun shows CREATE TYPE with its values as literals, locks no table, and creates nothing', async () => {
    const reply = await createType({ name: 'dry', values: ['a', "b'c"], dryRun: true });

    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({
      dryRun: true,
      sql: [`CREATE TYPE "${schema}"."dry" AS ENUM ('a', 'b''c')`],
      locks: [],
      rewrites: false,
      scans: false,
    });
    expect((await listTypes()).types).toEqual([]);
  });

  it('creates a type as the schema’s role and lists its values in order', async () => {
    const reply = await createType({ name: 'mood', values: ['sad', 'ok', 'happy'] });

    expect(reply.status).toBe(200);
    expect(reply.body.sql).toEqual([`CREATE TYPE "${schema}"."mood" AS ENUM ('sad', 'ok', 'happy')`]);
    expect(await listTypes()).toEqual({
      schema,
      types: [{ name: 'mood', values: ['sad', 'ok', 'happy'], comment: null }],
    });
    const owner = await withAdminClient((c) =>
      c.query(`SELECT pg_get_userbyid(typowner) AS owner FROM pg_type WHERE oid = $1::regtype`, [
        `"${schema}".mood`,
      ]),
    );
    expect(owner.rows[0].owner).toBe(`${schema}_owner`);
  });

  it('adds values last, before and after a value, usable at once', async () => {
    await createType({ name: 'size', values: ['m'] });

    const replies = [
      await addValue('size', { value: 'xl' }),
      await addValue('size', { value: 's', before: 'm' }),
      await addValue('size', { value: 'l', after: 'm' }),
    ];

    expect(replies.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(replies[1]?.body.sql).toEqual([`ALTER TYPE "${schema}"."size" ADD VALUE 's' BEFORE 'm'`]);
    expect((await listTypes()).types.find((t: { name: string }) => t.name === 'size').values).toEqual([
      's',
      'm',
      'l',
      'xl',
    ]);
    const used = await withAdminClient((c) => c.query(`SELECT 'xl'::"${schema}".size::text AS v`));
    expect(used.rows[0].v).toBe('xl');
  });

  it('refuses what PostgreSQL would, with a reason, and changes nothing', async () => {
    await createType({ name: 'level', values: ['low', 'high'] });

    const replies = [
      await createType({ name: 'level', values: ['x'] }),
      await createType({ name: 'twice', values: ['a', 'a'] }),
      await createType({ name: 'long', values: ['é'.repeat(32)] }),
      await createType({ name: 'none', values: [] }),
      await addValue('level', { value: 'low' }),
      await addValue('level', { value: 'mid', before: 'high', after: 'low' }),
      await addValue('level', { value: 'mid', before: 'nope' }),
    ];

    expect(replies.map((r) => [r.status, r.body.error])).toEqual([
      [400, 'Already exists'],
      [400, 'Duplicate value'],
      [400, 'Invalid value'],
      [400, expect.any(String)],
      [400, 'Already exists'],
      [400, 'Invalid placement'],
      [400, 'Unknown value'],
    ]);
    expect((await listTypes()).types.map((t: { name: string }) => t.name)).toEqual(['level', 'mood', 'size']);
    expect((await listTypes()).types[0].values).toEqual(['low', 'high']);
  });

  it('answers 404 for a type that does not exist, or a schema', async () => {
    const missingType = await addValue('nothing', { value: 'a' });
    const missingSchema = await call(constraints, {
      path: '/api/types',
      query: { schema: 'no_such_schema' },
    });

    expect([missingType.status, missingType.body.error]).toEqual([404, 'Type not found']);
    expect(missingSchema.status).toBe(404);
  });
});

describe('an enum type as a column’s type', () => {
  it('is taken by create table, add column and a type change, by its name, as the schema’s own', async () => {
    await createType({ name: 'state', values: ['new', 'done'] });

    const created = await call(tables, {
      method: 'POST',
      path: '/api/table/create',
      body: {
        schema,
        tableName: 'tasks',
        columns: [
          { name: 'id', type: 'INTEGER', primaryKey: true },
          { name: 'state', type: 'state', defaultValue: 'new' },
          { name: 'note', type: 'TEXT' },
        ],
      },
    });
    const added = await call(tables, {
      method: 'POST',
      path: '/api/table/tasks/column',
      body: { schema, columnName: 'was', dataType: 'state' },
    });
    await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: "INSERT INTO tasks (id, note) VALUES (1, 'done')" },
    });
    const changed = await call(tables, {
      method: 'PATCH',
      path: '/api/table/tasks/column/note',
      body: { schema, type: 'state', using: 'note::state' },
    });
    const unknown = await call(tables, {
      method: 'PATCH',
      path: '/api/table/tasks/column/note',
      body: { schema, type: 'nosuch' },
    });

    expect([created.status, added.status, changed.status]).toEqual([201, 201, 200]);
    expect(changed.body.sql).toEqual([
      `ALTER TABLE "${schema}"."tasks" ALTER COLUMN "note" TYPE "${schema}"."state" USING note::state`,
    ]);
    expect(unknown.status).toBe(400);
    expect(unknown.body.message).toMatch(
      /type "nosuch" is not supported; use one of .*, or an enum type of the schema/,
    );
    const types = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT attname, format_type(atttypid, atttypmod) AS type FROM pg_attribute
            WHERE attrelid = $1::regclass AND attnum > 0 ORDER BY attnum`,
            [`"${schema}".tasks`],
          )
        ).rows,
    );
    expect(types.map((t) => `${t.attname} ${t.type}`)).toEqual([
      'id integer',
      `state ${schema}.state`,
      `note ${schema}.state`,
      `was ${schema}.state`,
    ]);
  });
});

describe('views', () => {
  it('lists views and materialized views with their definitions, columns and comments', async () => {
    const own = await freshSchema('views');
    await withAdminClient((c) =>
      c.query(`
        CREATE TABLE "${own}".items (id int PRIMARY KEY, name text);
        CREATE VIEW "${own}".named AS SELECT id, name FROM "${own}".items WHERE name IS NOT NULL;
        CREATE MATERIALIZED VIEW "${own}".counted AS SELECT count(*) AS n FROM "${own}".items WITH NO DATA;
        COMMENT ON VIEW "${own}".named IS 'with a name';`),
    );

    const reply = await call(constraints, { path: '/api/views', query: { schema: own } });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      schema: own,
      definitionsRead: true,
      views: [
        {
          name: 'counted',
          materialized: true,
          populated: false,
          columns: [{ name: 'n', type: 'bigint' }],
          comment: null,
          definition: expect.stringMatching(/SELECT count\(\*\) AS n\s+FROM items;?/),
        },
        {
          name: 'named',
          materialized: false,
          populated: true,
          columns: [
            { name: 'id', type: 'integer' },
            { name: 'name', type: 'text' },
          ],
          comment: 'with a name',
          definition: expect.stringMatching(/WHERE \(?(items\.)?name IS NOT NULL\)?/),
        },
      ],
    });
  });

  it('answers an empty list for a schema without views, and 404 for no schema', async () => {
    const empty = await call(constraints, { path: '/api/views', query: { schema } });
    const missing = await call(constraints, { path: '/api/views', query: { schema: 'no_such_schema' } });

    expect(empty.body).toEqual({ schema, definitionsRead: true, views: [] });
    expect(missing.status).toBe(404);
  });
});

describe('functions', () => {
  it('lists the schema’s functions, procedures and aggregates with their arguments and results', async () => {
    const own = await freshSchema('routines');
    await withAdminClient((c) =>
      c.query(`
        CREATE FUNCTION "${own}".add(a integer, b integer DEFAULT 1) RETURNS integer LANGUAGE sql AS 'SELECT a + b';
        CREATE FUNCTION "${own}".rows_of(n integer) RETURNS TABLE(id integer) LANGUAGE sql AS 'SELECT generate_series(1, n)';
        CREATE PROCEDURE "${own}".tidy() LANGUAGE sql AS 'SELECT 1';
        CREATE AGGREGATE "${own}".total(integer) (SFUNC = int4pl, STYPE = integer);`),
    );

    const reply = await call(constraints, { path: '/api/functions', query: { schema: own } });
    const missing = await call(constraints, { path: '/api/functions', query: { schema: 'no_such_schema' } });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      schema: own,
      functions: [
        { name: 'add', arguments: 'a integer, b integer DEFAULT 1', result: 'integer', kind: 'function' },
        { name: 'rows_of', arguments: 'n integer', result: 'TABLE(id integer)', kind: 'function' },
        { name: 'tidy', arguments: '', result: null, kind: 'procedure' },
        { name: 'total', arguments: 'integer', result: 'integer', kind: 'aggregate' },
      ],
    });
    expect(missing.status).toBe(404);
  });
});
