import type pg from 'pg';
import { handler as indexes } from '#functions/indexes';
import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { loginAs } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { LOCK_MODE, waitingLock } from '#test/support/locks';
import { uniqueName } from '#test/support/names';
import { withSetting } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

/**
 * A table's indexes through the real handlers: listed with size, validity and use; built (plain,
 * unique, partial, concurrently) and dropped, each with its dryRun and the lock PostgreSQL takes;
 * failed builds that leave no index; a concurrent build's progress; 409 behind another session.
 */
afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('idx');
});

/** `people (id int primary key, name text, email text unique, age int)` with four rows, Ada twice. */
async function people(): Promise<string> {
  const table = uniqueName('people');
  const made = await call(query, {
    method: 'POST',
    path: '/api/query',
    body: {
      schema,
      sql: `CREATE TABLE ${table} (id int PRIMARY KEY, name text, email text UNIQUE, age int);
            INSERT INTO ${table} VALUES (1, 'Ada', 'a@x', 36), (2, 'Bob', 'b@x', 41), (3, 'Ada', 'c@x', 20), (4, 'Cy', NULL, NULL);`,
    },
  });
  if (made.status !== 200) throw new Error(made.text);
  return table;
}

const list = (table: string) => call(indexes, { path: `/api/table/${table}/indexes`, query: { schema } });
const create = (table: string, body: Record<string, unknown>) =>
  call(indexes, { method: 'POST', path: `/api/table/${table}/indexes`, body: { schema, ...body } });
const drop = (table: string, index: string, q: Record<string, string> = {}) =>
  call(indexes, { method: 'DELETE', path: `/api/table/${table}/indexes/${index}`, query: { schema, ...q } });

/** The table's indexes as the catalog has them: name and whether valid. */
const catalogIndexes = (table: string) =>
  withAdminClient(
    async (c) =>
      (
        await c.query(
          `SELECT ic.relname AS name, i.indisvalid AS valid FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
            WHERE i.indrelid = $1::regclass ORDER BY 1`,
          [`"${schema}"."${table}"`],
        )
      ).rows,
  );

describe('GET /api/table/:tableName/indexes', () => {
  it('lists each index with its key, method, flags, predicate, size, validity, use and definition', async () => {
    const table = await people();
    await create(table, { name: 'by_lower', columns: ['name'], where: 'age > 18' });
    await withAdminClient((c) =>
      c.query(
        `CREATE INDEX by_expr ON "${schema}"."${table}" USING hash (lower(email)) WHERE (name <> 'x WHERE y')`,
      ),
    );

    const reply = await list(table);

    expect(reply.status).toBe(200);
    expect(reply.body.definitionsRead).toBe(true);
    const byName = Object.fromEntries(reply.body.indexes.map((i: { name: string }) => [i.name, i]));
    expect(Object.keys(byName)).toEqual(['by_expr', 'by_lower', `${table}_email_key`, `${table}_pkey`]);
    expect(byName[`${table}_pkey`]).toMatchObject({
      columns: [{ column: 'id', expression: null }],
      method: 'btree',
      unique: true,
      primary: true,
      constraint: `${table}_pkey`,
      partial: false,
      where: null,
      valid: true,
      scans: expect.any(Number),
    });
    expect(byName[`${table}_pkey`].sizeBytes).toBeGreaterThan(0);
    expect(byName[`${table}_email_key`]).toMatchObject({
      unique: true,
      primary: false,
      constraint: `${table}_email_key`,
    });
    expect(byName.by_lower).toMatchObject({
      columns: [{ column: 'name', expression: null }],
      partial: true,
      where: '(age > 18)',
      constraint: null,
      definition: `CREATE INDEX by_lower ON ${schema}.${table} USING btree (name) WHERE (age > 18)`,
    });
    expect(byName.by_expr).toMatchObject({
      columns: [{ column: null, expression: 'lower(email)' }],
      method: 'hash',
      where: `(name <> 'x WHERE y'::text)`,
    });
  });

  it('an unknown table is 404', async () => {
    expect((await list('nowhere')).status).toBe(404);
  });
});

describe('POST /api/table/:tableName/indexes', () => {
  it('dryRun answers the SQL, SHARE, a scan and no rewrite, and builds nothing', async () => {
    const table = await people();

    const reply = await create(table, { columns: ['name', 'age'], dryRun: true });

    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({
      dryRun: true,
      sql: [`CREATE INDEX "${table}_name_age_idx" ON "${schema}"."${table}" USING btree ("name", "age")`],
      locks: [
        {
          table: `${schema}.${table}`,
          level: 'SHARE',
          blocks: 'writes (INSERT, UPDATE, DELETE); reads go on',
        },
      ],
      rewrites: false,
      scans: true,
      blockers: [],
    });
    expect(await catalogIndexes(table)).toHaveLength(2);
  });

  it('concurrently: dryRun says SHARE UPDATE EXCLUSIVE; the build leaves a valid index', async () => {
    const table = await people();
    const body = { columns: ['age'], method: 'brin', concurrently: true };

    const preview = await create(table, { ...body, dryRun: true });
    const built = await create(table, body);

    expect(preview.body).toMatchObject({
      sql: [`CREATE INDEX CONCURRENTLY "${table}_age_idx" ON "${schema}"."${table}" USING brin ("age")`],
      locks: [{ level: 'SHARE UPDATE EXCLUSIVE' }],
    });
    expect(built.status).toBe(200);
    expect(await catalogIndexes(table)).toContainEqual({ name: `${table}_age_idx`, valid: true });
  });

  it('names an index as PostgreSQL would, numbered past the names taken, and builds a partial unique one', async () => {
    const table = await people();

    const first = await create(table, { columns: ['name'] });
    const second = await create(table, { columns: ['name'], unique: true, where: "name <> 'Ada'" });

    expect([first.status, second.status]).toEqual([200, 200]);
    expect(second.body.sql[0]).toBe(
      `CREATE UNIQUE INDEX "${table}_name_idx1" ON "${schema}"."${table}" USING btree ("name") WHERE name <> 'Ada'`,
    );
  });

  it.each([false, true])(
    'a unique build over duplicates is a 400 naming one, and leaves no index (concurrently: %s)',
    async (concurrently) => {
      const table = await people();
      const before = await catalogIndexes(table);

      const reply = await create(table, { name: 'one_name', columns: ['name'], unique: true, concurrently });

      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('Duplicate values');
      expect(reply.body.message).toContain('Key (name)=(Ada) is duplicated');
      expect(reply.body.message).toMatch(
        concurrently
          ? /the invalid index "one_name" the failed build left was dropped/
          : /nothing was changed/,
      );
      expect(await catalogIndexes(table)).toEqual(before);
    },
  );

  it.each([
    [{ columns: ['nope'] }, 400, /has no column "nope"/],
    [{ columns: ['name'], name: 'by_name', where: 'no_such_column > 1' }, 400, /no_such_column/],
    [{ columns: ['name'], where: 'true; DROP TABLE x' }, 400, /cannot insert multiple commands/],
    [{ columns: ['name'], method: 'hash', unique: true }, 400, /does not support unique/],
    [{ columns: [] }, 400, /at least 1 column/],
  ])('%j answers %d', async (body, status, message) => {
    const table = await people();

    const reply = await create(table, body);

    expect(reply.status).toBe(status);
    expect(reply.body.message).toMatch(message);
    expect(await catalogIndexes(table)).toHaveLength(2);
  });

  it('a name taken is a 400 that names it', async () => {
    const table = await people();

    const reply = await create(table, { name: table, columns: ['name'] });

    expect([reply.status, reply.body.message]).toEqual([
      400,
      `schema "${schema}" already has a relation "${table}"`,
    ]);
  });
});

describe('DELETE /api/table/:tableName/indexes/:indexName', () => {
  it('drops an index; dryRun first shows ACCESS EXCLUSIVE, or SHARE UPDATE EXCLUSIVE concurrently', async () => {
    const table = await people();
    await create(table, { name: 'by_name', columns: ['name'] });
    await create(table, { name: 'by_age', columns: ['age'] });

    const preview = await drop(table, 'by_name', { dryRun: 'true' });
    const concurrentPreview = await drop(table, 'by_age', { dryRun: 'true', concurrently: 'true' });
    const dropped = await drop(table, 'by_name');
    const droppedConcurrently = await drop(table, 'by_age', { concurrently: 'true' });

    expect(preview.body).toMatchObject({
      sql: [`DROP INDEX "${schema}"."by_name"`],
      locks: [{ level: 'ACCESS EXCLUSIVE' }],
      rewrites: false,
      scans: false,
    });
    expect(concurrentPreview.body).toMatchObject({
      sql: [`DROP INDEX CONCURRENTLY "${schema}"."by_age"`],
      locks: [{ level: 'SHARE UPDATE EXCLUSIVE' }],
    });
    expect([dropped.status, droppedConcurrently.status]).toEqual([200, 200]);
    expect((await catalogIndexes(table)).map((i) => i.name)).toEqual([`${table}_email_key`, `${table}_pkey`]);
  });

  it('refuses the primary key’s index and a unique constraint’s, saying what to change instead', async () => {
    const table = await people();

    const primary = await drop(table, `${table}_pkey`);
    const unique = await drop(table, `${table}_email_key`);

    expect([primary.status, primary.body.error]).toEqual([400, 'Primary key index']);
    expect(primary.body.message).toMatch(/change the table's primary key instead/);
    expect([unique.status, unique.body.error]).toEqual([400, 'Constraint index']);
    expect(unique.body.message).toBe(
      `"${table}_email_key" backs the unique constraint "${table}_email_key" of "${table}": drop the constraint instead, which drops its index`,
    );
    expect(await catalogIndexes(table)).toHaveLength(2);
  });

  it('an unknown index is 404', async () => {
    const table = await people();

    expect((await drop(table, 'nope')).status).toBe(404);
  });
});

/** The tenant's own login, in a transaction that ran `sql` and stays open. */
async function holding(sql: string): Promise<pg.Client> {
  const tenant = loginAs(`${schema}_user`, 'schema-pass-1');
  await tenant.connect();
  await tenant.query(`BEGIN; ${sql}`);
  return tenant;
}

describe('behind another session’s open transaction', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '400');

  it.each([
    ['a build, behind a writer', 'UPDATE', (t: string) => create(t, { columns: ['age'] })],
    ['a drop, behind a reader', 'SELECT', (t: string) => drop(t, `${t}_by_age`)],
  ])(
    '%s answers 409 within the lock timeout naming the session; readers go on',
    async (_what, kind, change) => {
      const table = await people();
      await create(table, { name: `${table}_by_age`, columns: ['age'] });
      const tenant = await holding(
        kind === 'UPDATE'
          ? `UPDATE "${schema}"."${table}" SET age = age WHERE id = 1`
          : `SELECT count(*) FROM "${schema}"."${table}"`,
      );
      try {
        const pid = (await tenant.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
        const started = Date.now();
        const changing = change(table);
        const reader = await withAdminClient(async (c) => {
          const at = Date.now();
          await c.query(`SELECT count(*) FROM "${schema}"."${table}"`);
          return Date.now() - at;
        });
        const reply = await changing;

        expect(reply.status).toBe(409);
        expect(reply.body.error).toBe('Table locked');
        expect(reply.body.message).toMatch(
          new RegExp(`session ${pid} \\(${schema}_user, idle in transaction`),
        );
        expect(Date.now() - started).toBeLessThan(3000);
        expect(reader).toBeLessThan(2000);
      } finally {
        await tenant.end();
      }
    },
  );
});

describe('a concurrent build behind a writer', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '400');

  it('answers 409 naming the writer, and says the invalid index it left could not be dropped yet', async () => {
    const table = await people();
    const writer = await holding(`UPDATE "${schema}"."${table}" SET age = age WHERE id = 1`);
    let reply: Awaited<ReturnType<typeof create>>;
    try {
      const pid = (await writer.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;

      reply = await create(table, { name: 'waiting', columns: ['age'], concurrently: true });

      expect(reply.status).toBe(409);
      expect(reply.body.blockers).toEqual([expect.objectContaining({ pid, lock: 'RowExclusiveLock' })]);
    } finally {
      await writer.end();
    }
    expect(reply.body.message).toMatch(
      /the invalid index "waiting" the failed build left could not be dropped now: drop it with DELETE \/api\/table\/\w+\/indexes\/waiting$/,
    );
    expect(await catalogIndexes(table)).toContainEqual({ name: 'waiting', valid: false });
    expect((await drop(table, 'waiting')).status).toBe(200);
  });
});

describe('the lock each change takes, as PostgreSQL takes it', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '10000');

  it.each([
    ['CREATE INDEX', {}],
    ['CREATE INDEX CONCURRENTLY', { concurrently: true }],
  ])('%s takes what its dryRun says', async (_kind, options) => {
    const table = await people();
    const body = { columns: ['name'], ...options };
    const planned = (await create(table, { ...body, dryRun: true })).body.locks[0].level as string;

    const taken = await waitingLock(schema, table, () => create(table, body));

    expect(taken).toBe(LOCK_MODE[planned]);
  });

  it.each([
    ['DROP INDEX', {}],
    ['DROP INDEX CONCURRENTLY', { concurrently: 'true' }],
  ])('%s takes what its dryRun says', async (_kind, options) => {
    const table = await people();
    await create(table, { name: `${table}_n`, columns: ['name'] });
    const planned = (await drop(table, `${table}_n`, { ...options, dryRun: 'true' })).body.locks[0]
      .level as string;

    const taken = await waitingLock(schema, table, () => drop(table, `${table}_n`, options));

    expect(taken).toBe(LOCK_MODE[planned]);
  });
});

describe('a concurrent build behind an older transaction on another table', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '400');

  it('answers 409 naming the older transaction it waited for, not a session that let go', async () => {
    const table = await people();
    const old = await holding('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT 1');
    try {
      const pid = (await old.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;

      const reply = await create(table, { name: `${table}_late`, columns: ['name'], concurrently: true });

      expect(reply.status).toBe(409);
      expect(reply.body.message).toMatch(
        /transactions older than the build, which it waits for: session \d+/,
      );
      expect(reply.body.blockers).toEqual(
        expect.arrayContaining([expect.objectContaining({ pid, lock: 'snapshot' })]),
      );
    } finally {
      await old.query('ROLLBACK');
      await old.end();
    }
  });
});

describe('GET /api/table/:tableName/indexes/progress', () => {
  withSetting('SCHEMA_LOCK_TIMEOUT_MS', '10000');

  it('shows a concurrent build waiting out an older transaction, then none once it is built', async () => {
    const table = await people();
    // A transaction whose snapshot is older than the build's holds its last wait.
    const old = await holding('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; SELECT 1');
    let built = false;
    const building = create(table, { name: `${table}_slow`, columns: ['name'], concurrently: true }).finally(
      () => {
        built = true;
      },
    );
    let seen: Record<string, unknown> | undefined;
    try {
      for (let tries = 0; tries < 500 && !seen; tries++) {
        const reply = await call(indexes, {
          path: `/api/table/${table}/indexes/progress`,
          query: { schema },
        });
        expect(reply.status).toBe(200);
        seen = reply.body.builds.find((b: { phase: string }) => /waiting for old snapshots/.test(b.phase));
      }
      expect(built).toBe(false);
    } finally {
      await old.query('ROLLBACK');
      await old.end();
    }

    expect(seen).toMatchObject({
      pid: expect.any(Number),
      index: `${table}_slow`,
      command: 'CREATE INDEX CONCURRENTLY',
      lockersTotal: expect.any(Number),
      percent: expect.any(Number),
    });
    expect((await building).status).toBe(200);
    const after = await call(indexes, { path: `/api/table/${table}/indexes/progress`, query: { schema } });
    expect(after.body.builds).toEqual([]);
  });
});
