import type pg from 'pg';
import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { loginAs } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { LOCK_MODE, waitingLock } from '#test/support/locks';
import { uniqueName } from '#test/support/names';
import { withSetting } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

/**
 * Changing a column safely: each change through the real handler, its dryRun (the SQL, the lock
 * PostgreSQL takes, rewrite and scan), failures that change nothing and say which rows, and a
 * change behind another session's lock that answers 409 naming it instead of queuing.
 */
afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('colchg');
});

/** A table `people (id int primary key, name text, age text, note text)` with four rows. */
async function people(): Promise<string> {
  const table = uniqueName('people');
  const made = await call(query, {
    method: 'POST',
    path: '/api/query',
    body: {
      schema,
      sql: `CREATE TABLE ${table} (id int PRIMARY KEY, name text, age text, note text);
            INSERT INTO ${table} VALUES (1, 'Ada', '36', NULL), (2, 'Bob', 'old', 'x'), (3, 'Cy', '41', NULL), (4, NULL, 'n/a', 'y');`,
    },
  });
  if (made.status !== 200) throw new Error(made.text);
  return table;
}

const change = (table: string, column: string, body: Record<string, unknown>) =>
  call(tables, { method: 'PATCH', path: `/api/table/${table}/column/${column}`, body: { schema, ...body } });

const columns = (table: string) =>
  withAdminClient(
    async (c) =>
      (
        await c.query(
          `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS "notNull",
                  pg_get_expr(d.adbin, d.adrelid) AS "default", col_description(a.attrelid, a.attnum) AS comment
             FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
          [`"${schema}"."${table}"`],
        )
      ).rows,
  );

describe('PATCH /api/table/:tableName/column/:columnName', () => {
  it('renames, retypes, sets a default, NOT NULL and a comment, in one transaction', async () => {
    const table = await people();

    const reply = await change(table, 'note', {
      rename: 'remark',
      type: 'VARCHAR',
      length: 20,
      default: 'none',
      comment: 'what we know',
    });

    expect(reply.status).toBe(200);
    expect(reply.body.sql).toEqual([
      `ALTER TABLE "${schema}"."${table}" ALTER COLUMN "note" TYPE varchar(20), ALTER COLUMN "note" SET DEFAULT 'none'`,
      `COMMENT ON COLUMN "${schema}"."${table}"."note" IS 'what we know'`,
      `ALTER TABLE "${schema}"."${table}" RENAME COLUMN "note" TO "remark"`,
    ]);
    expect((await columns(table))[3]).toEqual({
      name: 'remark',
      type: 'character varying(20)',
      notNull: false,
      default: "'none'::character varying",
      comment: 'what we know',
    });
  });

  it('dryRun answers the SQL, the lock, rewrite and scan, the table’s size, and changes nothing', async () => {
    const table = await people();
    const before = await columns(table);

    const reply = await change(table, 'age', { type: 'INTEGER', dryRun: true });

    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({
      dryRun: true,
      sql: [`ALTER TABLE "${schema}"."${table}" ALTER COLUMN "age" TYPE integer`],
      locks: [
        {
          table: `${schema}.${table}`,
          level: 'ACCESS EXCLUSIVE',
          blocks: 'every read and write of the table',
        },
      ],
      rewrites: true,
      scans: true,
      tables: [
        { table: `${schema}.${table}`, sizeBytes: expect.any(Number), estimatedRows: expect.any(Number) },
      ],
      blockers: [],
    });
    expect(await columns(table)).toEqual(before);
  });

  it('dryRun of a type PostgreSQL does not convert by itself says a USING is needed, and offers one', async () => {
    const table = await people();
    const before = await columns(table);

    const needs = await change(table, 'age', { type: 'INTEGER', dryRun: true });
    const given = await change(table, 'age', { type: 'INTEGER', using: 'length(age)', dryRun: true });
    const widening = await change(table, 'id', { type: 'BIGINT', dryRun: true });
    const toText = await change(table, 'id', { type: 'VARCHAR', length: 12, dryRun: true });

    expect(needs.status).toBe(200);
    expect(needs.body.needsUsing).toEqual({
      message:
        'PostgreSQL does not convert text to integer by itself (column "age" cannot be cast automatically to type integer): a USING expression must compute each new value, such as "age"::integer',
      using: '"age"::integer',
    });
    // The offer is one a run takes: the same change with it previews clean.
    const offered = await change(table, 'age', {
      type: 'INTEGER',
      using: needs.body.needsUsing.using,
      dryRun: true,
    });
    for (const reply of [given, widening, toText, offered]) {
      expect(reply.status).toBe(200);
      expect(reply.body.needsUsing).toBeUndefined();
    }
    expect(offered.body.sql).toEqual([
      `ALTER TABLE "${schema}"."${table}" ALTER COLUMN "age" TYPE integer USING "age"::integer`,
    ]);
    expect(await columns(table)).toEqual(before);
  });

  it('a comment alone takes SHARE UPDATE EXCLUSIVE, and rewrites and scans nothing', async () => {
    const table = await people();

    const reply = await change(table, 'name', { comment: 'given name', dryRun: true });

    expect(reply.body).toMatchObject({
      locks: [{ level: 'SHARE UPDATE EXCLUSIVE' }],
      rewrites: false,
      scans: false,
    });
  });

  it('a type some rows do not fit is a 400 naming how many and which, and changes nothing', async () => {
    const table = await people();
    const before = await columns(table);

    const needsUsing = await change(table, 'age', { type: 'INTEGER' });
    const reply = await change(table, 'age', { type: 'INTEGER', using: 'age::integer', rename: 'years' });

    expect([needsUsing.status, needsUsing.body.error]).toEqual([400, 'Type needs a conversion']);
    expect(needsUsing.body.message).toMatch(/send "using" .* "\\"age\\"::integer"/);
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Rows do not fit the type');
    expect(reply.body.message).toMatch(
      /^2 rows of "people_\w+" \(id "2", "4"\) cannot be made integer in \(age\); nothing was changed/,
    );
    expect(await columns(table)).toEqual(before);
  });

  it('NOT NULL over NULL rows is a 400 naming them, and changes nothing', async () => {
    const table = await people();

    const reply = await change(table, 'note', { nullable: false });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(
      /^2 rows of "people_\w+" \(id "1", "3"\) hold NULL in \(note\); nothing was changed/,
    );
    expect((await columns(table))[3].notNull).toBe(false);
  });

  it('a USING expression computes the new values', async () => {
    const table = await people();

    const reply = await change(table, 'age', {
      type: 'INTEGER',
      using: `CASE WHEN age ~ '^[0-9]+$' THEN age::integer END`,
    });

    expect(reply.status).toBe(200);
    const ages = await withAdminClient(
      async (c) => (await c.query(`SELECT age FROM "${schema}"."${table}" ORDER BY id`)).rows,
    );
    expect(ages).toEqual([{ age: 36 }, { age: null }, { age: 41 }, { age: null }]);
  });

  it.each([
    [{ rename: 'name' }, 400, /already has a column "name"/],
    [{ type: 'GEOMETRY' }, 400, /type/i],
    [{ default: 'now(); DROP TABLE x' }, 200, /./],
    [{}, 400, /name at least one/],
  ])('%j answers %d', async (body, status, message) => {
    const table = await people();

    const reply = await change(table, 'note', body);

    expect(reply.status).toBe(status);
    if (status !== 200) expect(reply.body.message).toMatch(message);
  });

  it('an unknown column or table is named', async () => {
    const table = await people();

    expect((await change(table, 'nope', { nullable: true })).body.message).toMatch(/has no column "nope"/);
    expect((await change('nowhere', 'id', { nullable: true })).status).toBe(404);
  });
});

describe('DELETE /api/table/:tableName/column/:columnName', () => {
  it('drops the column; dryRun first shows it', async () => {
    const table = await people();
    const path = `/api/table/${table}/column/note`;

    const preview = await call(tables, { method: 'DELETE', path, query: { schema, dryRun: 'true' } });
    const done = await call(tables, { method: 'DELETE', path, query: { schema } });

    expect(preview.body).toMatchObject({
      sql: [`ALTER TABLE "${schema}"."${table}" DROP COLUMN "note"`],
      rewrites: false,
    });
    expect(done.status).toBe(200);
    expect((await columns(table)).map((c) => c.name)).toEqual(['id', 'name', 'age']);
  });
});

describe('DELETE /api/table/:tableName/column/:columnName: what goes with the column', () => {
  /** `t (id serial key, email text unique, code text)`, an index, a check, a view and a key to it. */
  async function withDependents() {
    const table = uniqueName('owned');
    const view = uniqueName('emails');
    const other = uniqueName('refs');
    const made = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: {
        schema,
        sql: `CREATE TABLE ${table} (id serial PRIMARY KEY, email text UNIQUE, code text, CHECK (email <> ''));
              CREATE INDEX ${table}_lower ON ${table} (lower(email));
              CREATE VIEW ${view} AS SELECT email FROM ${table};
              CREATE TABLE ${other} (id int PRIMARY KEY, email text REFERENCES ${table} (email));`,
      },
    });
    if (made.status !== 200) throw new Error(made.text);
    return { table, view, other };
  }
  const dropPath = (table: string, column: string) => `/api/table/${table}/column/${column}`;

  it('dryRun names what goes with it, and what only cascade drops, with the locks cascade takes', async () => {
    const { table, view, other } = await withDependents();

    const plain = await call(tables, {
      method: 'DELETE',
      path: dropPath(table, 'email'),
      query: { schema, dryRun: 'true' },
    });
    const cascade = await call(tables, {
      method: 'DELETE',
      path: dropPath(table, 'email'),
      query: { schema, dryRun: 'true', cascade: 'true' },
    });

    expect(plain.status).toBe(200);
    const drops = plain.body.drops as { what: string; cascade: boolean }[];
    expect(drops.filter((d) => !d.cascade).map((d) => d.what)).toEqual(
      expect.arrayContaining([
        `index ${schema}.${table}_lower`,
        `constraint ${table}_email_key on table ${schema}.${table}`,
        `constraint ${table}_email_check on table ${schema}.${table}`,
      ]),
    );
    expect(drops.filter((d) => d.cascade).map((d) => d.what)).toEqual(
      expect.arrayContaining([
        `view ${schema}.${view}`,
        `constraint ${other}_email_fkey on table ${schema}.${other}`,
      ]),
    );
    expect(drops).toHaveLength(5);
    expect(plain.body.locks).toEqual([expect.objectContaining({ table: `${schema}.${table}` })]);
    expect(
      cascade.body.locks.map((l: { table: string; level: string }) => `${l.table} ${l.level}`).sort(),
    ).toEqual(
      [`${schema}.${table}`, `${schema}.${view}`, `${schema}.${other}`]
        .map((t) => `${t} ACCESS EXCLUSIVE`)
        .sort(),
    );

    const refused = await call(tables, {
      method: 'DELETE',
      path: dropPath(table, 'email'),
      query: { schema },
    });
    expect(refused.status).toBe(400);
    expect((await columns(table)).map((c) => c.name)).toEqual(['id', 'email', 'code']);
  });

  it('a serial key takes its sequence with it, and a column nothing uses lists nothing', async () => {
    const { table } = await withDependents();

    const key = await call(tables, {
      method: 'DELETE',
      path: dropPath(table, 'id'),
      query: { schema, dryRun: 'true' },
    });
    const code = await call(tables, {
      method: 'DELETE',
      path: dropPath(table, 'code'),
      query: { schema, dryRun: 'true' },
    });

    expect(key.body.drops).toEqual(
      expect.arrayContaining([
        { what: `sequence ${schema}.${table}_id_seq`, cascade: false },
        { what: `constraint ${table}_pkey on table ${schema}.${table}`, cascade: false },
      ]),
    );
    expect(code.body.drops).toEqual([]);
  });
});

describe('behind another session’s lock', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '400');

  /** The tenant's own login, in a transaction that read the table and stays open. */
  async function holdingTable(table: string): Promise<pg.Client> {
    const tenant = loginAs(`${schema}_user`, 'schema-pass-1');
    await tenant.connect();
    await tenant.query(`BEGIN; SELECT count(*) FROM "${schema}"."${table}"`);
    return tenant;
  }

  it('answers 409 within the lock timeout, naming the session, and readers are not stalled meanwhile', async () => {
    const table = await people();
    const tenant = await holdingTable(table);
    try {
      const pid = (await tenant.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
      const preview = await change(table, 'note', { nullable: true, dryRun: true });
      const started = Date.now();
      const changing = change(table, 'note', { nullable: true });
      const reader = await withAdminClient(async (c) => {
        const at = Date.now();
        await c.query(`SELECT count(*) FROM "${schema}"."${table}"`);
        return Date.now() - at;
      });
      const reply = await changing;

      expect(preview.body.blockers).toEqual([
        expect.objectContaining({
          pid,
          role: `${schema}_user`,
          state: 'idle in transaction',
          lock: 'AccessShareLock',
        }),
      ]);
      expect(reply.status).toBe(409);
      expect(reply.body.error).toBe('Table locked');
      expect(reply.body.message).toMatch(new RegExp(`session ${pid} \\(${schema}_user, idle in transaction`));
      expect(reply.body.blockers).toEqual([expect.objectContaining({ pid })]);
      expect(Date.now() - started).toBeLessThan(3000);
      expect(reader).toBeLessThan(2000);
    } finally {
      await tenant.end();
    }
  });
});

describe('the lock each change takes, as PostgreSQL takes it', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '10000');

  it.each([
    ['rename', 'name', { rename: 'title' }],
    ['type', 'age', { type: 'TEXT' }],
    ['default', 'name', { default: 'x' }],
    ['NOT NULL', 'id', { nullable: false }],
    ['nullable', 'name', { nullable: true }],
    ['comment', 'name', { comment: 'c' }],
  ])('%s takes what its dryRun says', async (_kind, column, body) => {
    const table = await people();
    const planned = (await change(table, column, { ...body, dryRun: true })).body.locks[0].level as string;

    const taken = await waitingLock(schema, table, () => change(table, column, body));

    expect(taken).toBe(LOCK_MODE[planned]);
  });

  it('drop takes what its dryRun says', async () => {
    const table = await people();
    const path = `/api/table/${table}/column/note`;
    const planned = (await call(tables, { method: 'DELETE', path, query: { schema, dryRun: 'true' } })).body
      .locks[0].level as string;

    const taken = await waitingLock(schema, table, () =>
      call(tables, { method: 'DELETE', path, query: { schema } }),
    );

    expect(taken).toBe(LOCK_MODE[planned]);
  });
});
