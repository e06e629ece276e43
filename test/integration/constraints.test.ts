import { handler as constraints } from '#functions/constraints';
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
 * A table's constraints and the table itself, changed safely: each change through the real
 * handler, its dryRun (the SQL, the locks PostgreSQL takes on each table, scan), failures that
 * change nothing and say which rows, the lock each change waits for in pg_locks, and a change
 * behind another session's lock that answers 409 naming it instead of queuing.
 */
afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('cons');
});

async function sql(text: string): Promise<void> {
  const made = await call(query, { method: 'POST', path: '/api/query', body: { schema, sql: text } });
  if (made.status !== 200) throw new Error(made.text);
}

/**
 * `people (id int primary key, email text, age int, team int)` with four rows (two share an
 * email, two are under 18, one has no email) and `teams (id int primary key)`: their names.
 */
async function people(): Promise<{ table: string; teams: string }> {
  const table = uniqueName('people');
  const teams = uniqueName('teams');
  await sql(`CREATE TABLE ${teams} (id int PRIMARY KEY, name text);
             INSERT INTO ${teams} VALUES (1, 'a'), (2, 'b');
             CREATE TABLE ${table} (id int PRIMARY KEY, email text, age int, team int);
             INSERT INTO ${table} VALUES (1, 'a@x', 30, 1), (2, 'b@x', 12, 2), (3, 'a@x', 15, 1), (4, NULL, 40, 1);`);
  return { table, teams };
}

const add = (table: string, body: Record<string, unknown>) =>
  call(constraints, { method: 'POST', path: `/api/table/${table}/constraints`, body: { schema, ...body } });
const drop = (table: string, name: string, query: Record<string, string> = {}) =>
  call(constraints, {
    method: 'DELETE',
    path: `/api/table/${table}/constraints/${name}`,
    query: { schema, ...query },
  });
const change = (table: string, body: Record<string, unknown>) =>
  call(constraints, { method: 'PATCH', path: `/api/table/${table}`, body: { schema, ...body } });
const list = async (table: string) =>
  (await call(constraints, { path: `/api/table/${table}/constraints`, query: { schema } })).body
    .constraints as {
    name: string;
  }[];
const names = async (table: string) => (await list(table)).map((c) => c.name);

describe('GET /api/table/:tableName/constraints', () => {
  it('lists every kind with its columns, definition, references and actions', async () => {
    const { table, teams } = await people();
    await sql(`ALTER TABLE ${table} ADD CONSTRAINT adult CHECK (age >= 0) NOT VALID,
                 ADD CONSTRAINT member FOREIGN KEY (team) REFERENCES ${teams} (id) ON DELETE CASCADE ON UPDATE SET NULL,
                 ADD COLUMN during tsrange, ADD CONSTRAINT apart EXCLUDE USING gist (during WITH &&),
                 ADD CONSTRAINT one_age UNIQUE (age, team)`);

    const reply = await call(constraints, { path: `/api/table/${table}/constraints`, query: { schema } });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      schema,
      table,
      constraints: [
        {
          name: 'adult',
          type: 'check',
          columns: ['age'],
          definition: 'CHECK ((age >= 0)) NOT VALID',
          validated: false,
          references: null,
          onDelete: null,
          onUpdate: null,
        },
        expect.objectContaining({
          name: 'apart',
          type: 'exclusion',
          columns: ['during'],
          definition: 'EXCLUDE USING gist (during WITH &&)',
        }),
        {
          name: 'member',
          type: 'foreign key',
          columns: ['team'],
          definition: `FOREIGN KEY (team) REFERENCES ${schema}.${teams}(id) ON UPDATE SET NULL ON DELETE CASCADE`,
          validated: true,
          references: { schema, table: teams, columns: ['id'] },
          onDelete: 'cascade',
          onUpdate: 'set null',
        },
        expect.objectContaining({ name: 'one_age', type: 'unique', columns: ['age', 'team'] }),
        expect.objectContaining({
          name: `${table}_pkey`,
          type: 'primary key',
          definition: 'PRIMARY KEY (id)',
        }),
      ],
    });
  });

  it('answers 404 for an unknown table', async () => {
    const reply = await call(constraints, { path: '/api/table/nowhere/constraints', query: { schema } });

    expect(reply.status).toBe(404);
  });
});

describe('POST /api/table/:tableName/constraints', () => {
  it('adds a foreign key with its actions; dryRun first shows both tables’ locks and the scan', async () => {
    const { table, teams } = await people();
    const body = {
      type: 'foreign key',
      name: 'member',
      columns: ['team'],
      references: { table: teams },
      onDelete: 'set null',
      onUpdate: 'cascade',
    };

    const preview = await add(table, { ...body, dryRun: true });
    const before = await names(table);
    const done = await add(table, body);

    expect(preview.body).toMatchObject({
      dryRun: true,
      sql: [
        `ALTER TABLE "${schema}"."${table}" ADD CONSTRAINT "member" FOREIGN KEY ("team") REFERENCES "${schema}"."${teams}" ON DELETE SET NULL ON UPDATE CASCADE`,
      ],
      locks: [
        { table: `${schema}.${table}`, level: 'SHARE ROW EXCLUSIVE' },
        { table: `${schema}.${teams}`, level: 'SHARE ROW EXCLUSIVE' },
      ],
      rewrites: false,
      scans: true,
      blockers: [],
    });
    expect(before).not.toContain('member');
    expect(done.status).toBe(200);
    expect(await list(table)).toContainEqual(
      expect.objectContaining({ name: 'member', onDelete: 'set null', onUpdate: 'cascade', validated: true }),
    );
  });

  it('NOT VALID skips the scan and leaves the key unvalidated', async () => {
    const { table, teams } = await people();
    const body = {
      type: 'foreign key',
      name: 'loose',
      columns: ['team'],
      references: { table: teams },
      notValid: true,
    };

    const preview = await add(table, { ...body, dryRun: true });
    const done = await add(table, body);

    expect(preview.body).toMatchObject({ scans: false });
    expect(done.status).toBe(200);
    expect(await list(table)).toContainEqual(expect.objectContaining({ name: 'loose', validated: false }));
  });

  it('a key some rows break is a 400 from PostgreSQL, and changes nothing', async () => {
    const { table, teams } = await people();
    await sql(`DELETE FROM ${teams} WHERE id = 2`);

    const reply = await add(table, { type: 'foreign key', columns: ['team'], references: { table: teams } });

    expect([reply.status, reply.body.error]).toEqual([400, 'Foreign key violation']);
    expect(await names(table)).toEqual([`${table}_pkey`]);
  });

  it('a unique constraint over duplicates is a 400 naming the values, and changes nothing', async () => {
    const { table } = await people();

    const preview = await add(table, { type: 'unique', columns: ['email'], dryRun: true });
    const reply = await add(table, { type: 'unique', columns: ['email'] });

    expect(preview.body).toMatchObject({ locks: [{ level: 'ACCESS EXCLUSIVE' }], scans: true });
    expect([reply.status, reply.body.error]).toEqual([400, 'Rows are not unique']);
    expect(reply.body.message).toMatch(
      /^1 value is held by more than one row of "people_\w+" in \(email\), 2 rows in all: "a@x"; nothing was changed/,
    );
    expect(await names(table)).toEqual([`${table}_pkey`]);
  });

  it('a check some rows fail is a 400 naming them, and changes nothing; NOT VALID adds it', async () => {
    const { table } = await people();

    const preview = await add(table, { type: 'check', name: 'adult', check: 'age >= 18', dryRun: true });
    const reply = await add(table, { type: 'check', name: 'adult', check: 'age >= 18' });
    const loose = await add(table, { type: 'check', name: 'adult', check: 'age >= 18', notValid: true });

    expect(preview.body).toMatchObject({
      sql: [`ALTER TABLE "${schema}"."${table}" ADD CONSTRAINT "adult" CHECK (age >= 18)`],
      locks: [{ level: 'ACCESS EXCLUSIVE' }],
      scans: true,
    });
    expect([reply.status, reply.body.error]).toEqual([400, 'Rows fail the check']);
    expect(reply.body.message).toMatch(
      /^2 rows of "people_\w+" \(id "2", "3"\) fail the check \(age >= 18\)/,
    );
    expect(loose.status).toBe(200);
    expect(await list(table)).toContainEqual(expect.objectContaining({ name: 'adult', validated: false }));
  });

  it.each([
    [{ type: 'unique' }, /needs "columns"/],
    [{ type: 'check' }, /needs "check"/],
    [{ type: 'foreign key', columns: ['team'] }, /needs "references"/],
    [{ type: 'unique', columns: ['email'], notValid: true }, /only a foreign key or a check/],
    [{ type: 'unique', columns: ['nope'] }, /nope/],
    [{ type: 'check', check: 'age >= ' }, /syntax/],
    [{ type: 'check', check: 'true); DROP TABLE victim; --' }, /./],
  ])('%j is a 400', async (body, message) => {
    const { table } = await people();

    const reply = await add(table, body);

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
    expect(await names(table)).toEqual([`${table}_pkey`]);
  });
  it('an unknown column, its own or the referenced table’s, is a 400 before anything runs, dryRun too', async () => {
    const { table, teams } = await people();
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ type: 'unique', columns: ['email', 'nope'] }, new RegExp(`table "${table}" has no column "nope"`)],
      [
        { type: 'foreign key', columns: ['nope'], references: { table: teams } },
        new RegExp(`table "${table}" has no column "nope"`),
      ],
      [
        { type: 'foreign key', columns: ['team'], references: { table: teams, columns: ['gone'] } },
        new RegExp(`table "${teams}" has no column "gone"`),
      ],
    ];
    for (const [body, message] of cases) {
      for (const dryRun of [true, false]) {
        const reply = await add(table, { ...body, dryRun });
        expect({ status: reply.status, error: reply.body.error }).toEqual({
          status: 400,
          error: 'Unknown column',
        });
        expect(reply.body.message).toMatch(message);
      }
    }
    expect(await names(table)).toEqual([`${table}_pkey`]);
  });
});

describe('DELETE /api/table/:tableName/constraints/:constraintName', () => {
  it('drops the constraint; dryRun first shows it, with the referenced table’s lock for a foreign key', async () => {
    const { table, teams } = await people();
    await sql(`ALTER TABLE ${table} ADD CONSTRAINT member FOREIGN KEY (team) REFERENCES ${teams}`);

    const preview = await drop(table, 'member', { dryRun: 'true' });
    const done = await drop(table, 'member');

    expect(preview.body).toMatchObject({
      sql: [`ALTER TABLE "${schema}"."${table}" DROP CONSTRAINT "member"`],
      locks: [
        { table: `${schema}.${table}`, level: 'ACCESS EXCLUSIVE' },
        { table: `${schema}.${teams}`, level: 'ACCESS EXCLUSIVE' },
      ],
      scans: false,
    });
    expect(done.status).toBe(200);
    expect(await names(table)).toEqual([`${table}_pkey`]);
  });

  it('a key others reference needs cascade, which also locks and drops their foreign keys', async () => {
    const { table, teams } = await people();
    await sql(`ALTER TABLE ${table} ADD CONSTRAINT member FOREIGN KEY (team) REFERENCES ${teams}`);

    const refused = await drop(teams, `${teams}_pkey`);
    const preview = await drop(teams, `${teams}_pkey`, { cascade: 'true', dryRun: 'true' });
    const done = await drop(teams, `${teams}_pkey`, { cascade: 'true' });

    expect([refused.status, refused.body.error]).toEqual([400, 'Dependent objects exist']);
    expect(preview.body.locks).toEqual([
      expect.objectContaining({ table: `${schema}.${teams}`, level: 'ACCESS EXCLUSIVE' }),
      expect.objectContaining({ table: `${schema}.${table}`, level: 'ACCESS EXCLUSIVE' }),
    ]);
    expect(done.status).toBe(200);
    expect(await names(table)).toEqual([`${table}_pkey`]);
  });

  it('an unknown constraint or table is a 404', async () => {
    const { table } = await people();

    expect((await drop(table, 'nope')).body.message).toMatch(/has no constraint "nope"/);
    expect((await drop('nowhere', 'nope')).status).toBe(404);
  });
});

describe('PATCH /api/table/:tableName', () => {
  it('changes the primary key, the comment and the name in one transaction', async () => {
    const { table } = await people();
    await sql(`UPDATE ${table} SET email = id || '@y'; ALTER TABLE ${table} ALTER email SET NOT NULL`);
    const renamed = uniqueName('persons');

    const reply = await change(table, { primaryKey: ['email'], comment: 'who', rename: renamed });

    expect(reply.status).toBe(200);
    expect(reply.body.sql).toEqual([
      `ALTER TABLE "${schema}"."${table}" DROP CONSTRAINT "${table}_pkey", ADD PRIMARY KEY ("email")`,
      `COMMENT ON TABLE "${schema}"."${table}" IS 'who'`,
      `ALTER TABLE "${schema}"."${table}" RENAME TO "${renamed}"`,
    ]);
    const facts = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT obj_description($1::regclass, 'pg_class') AS comment,
                    (SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1::regclass AND contype = 'p') AS key`,
            [`"${schema}"."${renamed}"`],
          )
        ).rows[0],
    );
    expect(facts).toEqual({ comment: 'who', key: 'PRIMARY KEY (email)' });
  });

  it('dryRun shows the lock: SHARE UPDATE EXCLUSIVE for a comment alone, else ACCESS EXCLUSIVE', async () => {
    const { table } = await people();

    const comment = await change(table, { comment: 'c', dryRun: true });
    const key = await change(table, { primaryKey: ['id', 'age'], dryRun: true });
    const rename = await change(table, { rename: uniqueName('r'), dryRun: true });

    expect(comment.body).toMatchObject({ locks: [{ level: 'SHARE UPDATE EXCLUSIVE' }], scans: false });
    expect(key.body).toMatchObject({ locks: [{ level: 'ACCESS EXCLUSIVE' }], scans: true, rewrites: false });
    expect(rename.body).toMatchObject({ locks: [{ level: 'ACCESS EXCLUSIVE' }], scans: false });
    expect(await names(table)).toEqual([`${table}_pkey`]);
  });

  it('a key over NULLs or duplicates is a 400 naming the rows, and the old key stays', async () => {
    const { table } = await people();
    await sql(`UPDATE ${table} SET email = 'c@x' WHERE id = 3`);

    const nulls = await change(table, { primaryKey: ['email'] });
    const duplicates = await change(table, { primaryKey: ['team'] });

    expect([nulls.status, nulls.body.error]).toEqual([400, 'Rows are NULL']);
    expect(nulls.body.message).toMatch(/^1 row of "people_\w+" \(id "4"\) hold NULL in \(email\)/);
    expect([duplicates.status, duplicates.body.error]).toEqual([400, 'Rows are not unique']);
    expect(duplicates.body.message).toMatch(/^1 value is held by more than one row .* 3 rows in all: "1"/);
    expect(await list(table)).toEqual([expect.objectContaining({ name: `${table}_pkey`, columns: ['id'] })]);
  });

  it.each([
    [{}, /name at least one/],
    [{ primaryKey: ['nope'] }, /has no column "nope"/],
    [{ rename: 'TEAMS_TAKEN' }, /already has a relation/],
  ])('%j is a 400', async (body, message) => {
    const { table } = await people();
    await sql('CREATE TABLE IF NOT EXISTS "TEAMS_TAKEN" (id int)');

    const reply = await change(table, body);

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
  });

  it('leaves GET and DELETE /api/table/:tableName where they were: the tables function', async () => {
    const { table } = await people();

    const get = await call(constraints, { path: `/api/table/${table}`, query: { schema } });
    const patch = await call(tables, { method: 'PATCH', path: `/api/table/${table}`, body: { schema } });
    const page = await call(tables, { path: `/api/table/${table}`, query: { schema } });

    const allow = Object.entries(get.headers).find(([name]) => name.toLowerCase() === 'allow')?.[1];
    expect([get.status, allow]).toEqual([405, 'PATCH']);
    expect(patch.status).toBe(405);
    expect(page.body.data).toHaveLength(4);
  });
});

describe('behind another session’s lock', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '400');

  it('answers 409 within the lock timeout, naming the session, and readers are not stalled meanwhile', async () => {
    const { table, teams } = await people();
    const tenant = loginAs(`${schema}_user`, 'schema-pass-1');
    await tenant.connect();
    // Its transaction wrote to the referenced table: ROW EXCLUSIVE, which SHARE ROW EXCLUSIVE waits for.
    await tenant.query(`BEGIN; UPDATE "${schema}"."${teams}" SET name = name`);
    try {
      const pid = (await tenant.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
      const body = { type: 'foreign key', columns: ['team'], references: { table: teams } };
      const preview = await add(table, { ...body, dryRun: true });
      const started = Date.now();
      const adding = add(table, body);
      const reader = await withAdminClient(async (c) => {
        const at = Date.now();
        await c.query(`SELECT count(*) FROM "${schema}"."${table}"`);
        return Date.now() - at;
      });
      const reply = await adding;

      expect(preview.body.blockers).toEqual([
        expect.objectContaining({ pid, role: `${schema}_user`, lock: 'RowExclusiveLock' }),
      ]);
      expect([reply.status, reply.body.error]).toEqual([409, 'Table locked']);
      expect(reply.body.message).toMatch(new RegExp(`session ${pid} \\(${schema}_user, idle in transaction`));
      expect(Date.now() - started).toBeLessThan(3000);
      expect(reader).toBeLessThan(2000);
      expect(await names(table)).toEqual([`${table}_pkey`]);
    } finally {
      await tenant.end();
    }
  });
});

describe('the lock each change takes, as PostgreSQL takes it', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '10000');

  /** The level a dryRun plans on the table named `on`. */
  const planned = (reply: { body: { locks: { table: string; level: string }[] } }, on: string) =>
    LOCK_MODE[reply.body.locks.find((l) => l.table === `${schema}.${on}`)?.level ?? 'none'];

  type Tables = { table: string; teams: string };
  const fk = ({ teams }: Tables) => ({
    type: 'foreign key',
    columns: ['team'],
    references: { table: teams },
  });
  const ADDS: [string, (t: Tables) => Record<string, unknown>, 'table' | 'teams'][] = [
    ['a foreign key, on its table', fk, 'table'],
    ['a foreign key, on the referenced table', fk, 'teams'],
    ['a NOT VALID foreign key, on the referenced table', (t) => ({ ...fk(t), notValid: true }), 'teams'],
    ['a unique', () => ({ type: 'unique', columns: ['id', 'email'] }), 'table'],
    ['a check', () => ({ type: 'check', check: 'age > 0' }), 'table'],
    ['a NOT VALID check', () => ({ type: 'check', check: 'age > 0', notValid: true }), 'table'],
  ];

  it.each(ADDS)('adding %s takes what its dryRun says', async (_kind, body, on) => {
    const tables = await people();
    const plan = await add(tables.table, { ...body(tables), dryRun: true });

    const taken = await waitingLock(schema, tables[on], () => add(tables.table, body(tables)));

    expect(taken).toBe(planned(plan, tables[on]));
  });

  it.each([
    ['a check', 'table'],
    ['a foreign key, on its table', 'table'],
    ['a foreign key, on the referenced table', 'teams'],
  ] as const)('dropping %s takes what its dryRun says', async (kind, on) => {
    const tables = await people();
    const name = kind === 'a check' ? 'adult' : 'member';
    await sql(
      kind === 'a check'
        ? `ALTER TABLE ${tables.table} ADD CONSTRAINT adult CHECK (age > 0)`
        : `ALTER TABLE ${tables.table} ADD CONSTRAINT member FOREIGN KEY (team) REFERENCES ${tables.teams}`,
    );
    const plan = await drop(tables.table, name, { dryRun: 'true' });

    const taken = await waitingLock(schema, tables[on], () => drop(tables.table, name));

    expect(taken).toBe(planned(plan, tables[on]));
  });

  it.each([
    ['rename', () => ({ rename: uniqueName('renamed') })],
    ['comment', () => ({ comment: 'c' })],
    ['primary key', () => ({ primaryKey: ['id', 'age'] })],
  ])('changing the table’s %s takes what its dryRun says', async (_kind, body) => {
    const { table } = await people();
    const plan = await change(table, { ...body(), dryRun: true });

    const taken = await waitingLock(schema, table, () => change(table, body()));

    expect(taken).toBe(planned(plan, table));
  });
});
