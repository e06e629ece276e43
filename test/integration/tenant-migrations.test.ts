import { handler as schemas } from '#functions/schemas';
import { runMigration } from '#lib/admin/tenant-migrations';
import { adminAccess, schemaAccess } from '#lib/db/executor';
import { closePool, getDatabase } from '#lib/db/pool';
import { asTenant, loginAs } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call, type Reply } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freshSchema } from '#test/support/tables';

afterAll(closePool);

const post = (path: string, body: unknown) => call(schemas, { method: 'POST', path, body });
const get = (path: string, query?: Record<string, string>) => call(schemas, { path, query });

/** Schemas made through the API, each with `items (id int, name text)` holding one row. */
async function tenants(prefix: string, count: number): Promise<string[]> {
  const made: string[] = [];
  for (let i = 0; i < count; i++) {
    const schema = await freshSchema(prefix);
    await asTenant(
      schema,
      `CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'a')`,
    );
    made.push(schema);
  }
  return made;
}

/** Runs slices until the migration is done (or a bound of calls, should it never be). */
async function runToEnd(id: string): Promise<Reply> {
  let reply = await post(`/api/migrations/${id}/run`, {});
  for (let calls = 1; reply.status === 200 && !reply.body.done && calls < 50; calls++)
    reply = await post(`/api/migrations/${id}/run`, {});
  return reply;
}

const columnsOf = (schema: string) =>
  withAdminClient(async (c) => {
    const { rows } = await c.query(
      `SELECT (SELECT array_agg(attname::text ORDER BY attnum) FROM pg_attribute
                WHERE attrelid = to_regclass($1 || '.items') AND attnum > 0 AND NOT attisdropped) AS columns,
              to_regclass($1 || '.items_note') IS NOT NULL AS indexed`,
      [schema],
    );
    return rows[0] as { columns: string[] | null; indexed: boolean };
  });

const MIGRATION = 'ALTER TABLE items ADD COLUMN note text; CREATE INDEX items_note ON items (note)';

describe('a migration across tenant schemas', () => {
  it('changes every schema in its own transaction, fails some with their error, and leaves none half-changed', async () => {
    const reached = await tenants('mig', 12);
    const [missing1, missing2, locked] = reached as [string, string, string];
    // Two schemas without the table (the first statement fails), one whose tenant holds a lock.
    await asTenant(missing1, 'DROP TABLE items');
    await asTenant(missing2, 'ALTER TABLE items RENAME TO things');
    const holder = loginAs(`${locked}_user`, 'schema-pass-1');
    await holder.connect();
    await holder.query('BEGIN; LOCK TABLE items IN ACCESS SHARE MODE');

    const created = await post('/api/migrations', {
      name: uniqueName('add-note'),
      sql: MIGRATION,
      target: { schemas: reached },
      lockTimeoutMs: 200,
      concurrency: 3,
    });
    expect(created.status).toBe(201);
    expect(created.body.counts).toEqual({ pending: 12, running: 0, applied: 0, failed: 0, skipped: 0 });

    const done = await runToEnd(created.body.id);
    await holder.query('ROLLBACK');
    await holder.end();

    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({
      done: true,
      counts: { applied: 9, failed: 3, pending: 0, running: 0 },
    });
    expect(done.body.schemasPerSecond).toBeGreaterThan(0);
    const failed = await get(`/api/migrations/${created.body.id}`, { state: 'failed' });
    const reasons = Object.fromEntries(failed.body.schemas.map((s: { schema: string }) => [s.schema, s]));
    expect(reasons[missing1]).toMatchObject({
      sqlstate: '42P01',
      reason: expect.stringContaining('"items" does not exist'),
    });
    expect(reasons[missing2]).toMatchObject({ sqlstate: '42P01' });
    expect(reasons[locked]).toMatchObject({
      sqlstate: '55P03',
      reason: expect.stringMatching(/lock timeout/),
    });
    for (const schema of reached) {
      const after = await columnsOf(schema);
      if (schema === missing1 || schema === missing2) expect(after.indexed).toBe(false);
      else if (schema === locked) expect(after).toEqual({ columns: ['id', 'name'], indexed: false });
      else expect(after).toEqual({ columns: ['id', 'name', 'note'], indexed: true });
    }

    // The lock is gone: the failed are retried alone; the schemas without the table fail again.
    const retried = await post(`/api/migrations/${created.body.id}/retry`, { schemas: [locked] });
    expect(retried.body.counts).toMatchObject({ pending: 1, failed: 2 });
    const again = await runToEnd(created.body.id);
    expect(again.body.counts).toMatchObject({ applied: 10, failed: 2 });
    expect(await columnsOf(locked)).toEqual({ columns: ['id', 'name', 'note'], indexed: true });

    // Run once more: nothing changes; the same name again is refused.
    const twice = await post(`/api/migrations/${created.body.id}/run`, {});
    expect(twice.body.counts).toEqual(again.body.counts);
    const sameName = await post('/api/migrations', {
      name: created.body.name,
      sql: MIGRATION,
      target: { schemas: reached },
    });
    expect([sameName.status, sameName.body.error]).toEqual([409, 'Migration exists']);
  });

  it("refuses the service's own rights: a migration runs as each schema's role", async () => {
    const reached = await tenants('asadm', 1);

    const reply = await post('/api/migrations', {
      name: uniqueName('asadmin'),
      sql: 'ALTER TABLE items ADD COLUMN note text',
      target: { schemas: reached },
      runAs: 'admin',
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/runAs must be schema/);
  });

  it('previews the statements with their locks and what each schema would get', async () => {
    const reached = await tenants('prev', 2);

    const preview = await post('/api/migrations/preview', {
      name: uniqueName('prev'),
      sql: MIGRATION,
      target: { schemas: reached },
    });

    expect(preview.status).toBe(200);
    expect(preview.body.statements).toEqual([
      {
        sql: 'ALTER TABLE items ADD COLUMN note text',
        kind: 'ALTER TABLE',
        locks: [{ table: 'items', level: 'ACCESS EXCLUSIVE' }],
        mayRewrite: false,
      },
      {
        sql: 'CREATE INDEX items_note ON items (note)',
        kind: 'INDEX',
        locks: [{ table: 'items', level: 'SHARE' }],
        mayRewrite: false,
      },
    ]);
    expect(preview.body.schemas).toEqual(reached.sort().map((schema) => ({ schema, state: 'pending' })));
    expect(await columnsOf(reached[0] as string)).toEqual({ columns: ['id', 'name'], indexed: false });
  });

  it.each([
    ['BEGIN; ALTER TABLE items ADD COLUMN x int; COMMIT', /leave out BEGIN, COMMIT/],
    ['CREATE INDEX CONCURRENTLY i ON items (name)', /CONCURRENTLY/],
    ['ALTER TABLE acme.items ADD COLUMN x int', /names schema "acme": name objects unqualified/],
    ['SET search_path = public', /leave out SET search_path/],
    ['ALTER TABLE items ADD COLUMN', /does not parse/],
  ])('refuses %s before it reaches any schema', async (sql, message) => {
    const [schema] = await tenants('refuse', 1);

    const reply = await post('/api/migrations', {
      name: uniqueName('bad'),
      sql,
      target: { schemas: [schema] },
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
  });

  it('reaches a template and its copies, copies made later included, skipping what they hold', async () => {
    const [template] = await tenants('tmig', 1);
    const copy = uniqueName('tcopy');
    expect(
      (await post('/api/schema/create', { schemaName: copy, password: 'x-pass-123', template })).status,
    ).toBe(201);
    const other = (await tenants('tother', 1))[0] as string;
    const created = await post('/api/migrations', {
      name: uniqueName('tmpl'),
      sql: MIGRATION,
      target: { template },
    });
    expect(created.body.counts.pending).toBe(2);
    await runToEnd(created.body.id);
    // A copy of the migrated template holds the change, and its ledger says so.
    const later = uniqueName('tlater');
    expect(
      (await post('/api/schema/create', { schemaName: later, password: 'x-pass-123', template })).status,
    ).toBe(201);

    const rerun = await post(`/api/migrations/${created.body.id}/run`, {});

    expect(rerun.body.counts).toMatchObject({ applied: 2, skipped: 1, pending: 0 });
    const page = await get(`/api/migrations/${created.body.id}`, { state: 'skipped' });
    expect(page.body.schemas).toEqual([
      expect.objectContaining({
        schema: later,
        reason: expect.stringMatching(/^already applied by migration/),
      }),
    ]);
    expect(await columnsOf(later)).toEqual({ columns: ['id', 'name', 'note'], indexed: true });
    expect(await columnsOf(other)).toEqual({ columns: ['id', 'name'], indexed: false });

    // A migration that wrote rows is not a structure-only copy's: its copy has none of them.
    const seed = await post('/api/migrations', {
      name: uniqueName('seed'),
      sql: "INSERT INTO items (id, name) VALUES (2, 'seeded')",
      target: { template },
    });
    await runToEnd(seed.body.id);
    const bare = uniqueName('tbare');
    const full = uniqueName('tfull');
    await post('/api/schema/create', { schemaName: bare, password: 'x-pass-123', template });
    await post('/api/schema/create', { schemaName: full, password: 'x-pass-123', template, withData: true });
    const seeded = await post(`/api/migrations/${seed.body.id}/run`, {});
    const states = await get(`/api/migrations/${seed.body.id}`);
    const stateOf = (schema: string) =>
      states.body.schemas.find((s: { schema: string }) => s.schema === schema)?.state;
    expect([stateOf(bare), stateOf(full)]).toEqual(['applied', 'skipped']);
    expect(seeded.body.counts.failed).toBe(0);
  });

  it('settles a crashed run by the transaction each schema recorded, and resumes the rest', async () => {
    const [committed, aborted, unstarted, untouched] = (await tenants('crash', 4)) as [
      string,
      string,
      string,
      string,
    ];
    const created = await post('/api/migrations', {
      name: uniqueName('crash'),
      sql: 'ALTER TABLE items ADD COLUMN note text',
      target: { schemas: [committed, aborted, unstarted, untouched] },
    });
    const id = created.body.id as string;
    // What a host killed mid-slice leaves: a schema whose change committed before its ledger row
    // said so, one whose transaction died with the host, one claimed but never begun.
    const xidOf = async (schema: string, commit: boolean) => {
      const client = loginAs(`${schema}_user`, 'schema-pass-1');
      await client.connect();
      try {
        await client.query('BEGIN');
        if (commit) await client.query('ALTER TABLE items ADD COLUMN note text');
        const { rows } = await client.query('SELECT pg_current_xact_id()::text AS xid');
        await client.query(commit ? 'COMMIT' : 'ROLLBACK');
        return rows[0].xid as string;
      } finally {
        await client.end();
      }
    };
    const leftRunning = async (schema: string, xid: string | null) =>
      withAdminClient((c) =>
        c.query(
          `UPDATE _dbadmin.tenant_migration_schemas SET state = 'running', claim = gen_random_uuid(),
                  claimed_until = now() + interval '5 minutes', started_at = now(), attempts = 1, xact_id = $3::xid8
            WHERE migration_id = $1 AND schema_name = $2`,
          [id, schema, xid],
        ),
      );
    await leftRunning(committed, await xidOf(committed, true));
    await leftRunning(aborted, await xidOf(aborted, false));
    await leftRunning(unstarted, null);
    const db = await getDatabase();
    const options = {
      budgetMs: 20_000,
      schemaAccess: (schema: string) => schemaAccess(undefined, schema),
      adminAccess: (schema: string) => adminAccess(schema),
    };

    const resumed = await runMigration(db, id, options);

    // The committed one is applied without running again; the aborted one ran; the claimed one
    // waits for its claim to lapse.
    expect(resumed.counts).toMatchObject({ applied: 3, running: 1, failed: 0 });
    const settled = await get(`/api/migrations/${id}`, { state: 'applied' });
    expect(settled.body.schemas.find((s: { schema: string }) => s.schema === committed)).toMatchObject({
      attempts: 1,
      reason: 'applied (recorded after its run ended)',
    });
    const later = await runMigration(db, id, { ...options, now: () => new Date(Date.now() + 10 * 60_000) });
    expect(later.counts).toMatchObject({ applied: 4, running: 0, pending: 0, failed: 0 });
    for (const schema of [committed, aborted, unstarted, untouched])
      expect((await columnsOf(schema)).columns).toEqual(['id', 'name', 'note']);
  });
});
