import pg from 'pg';
import { handler as imports } from '#functions/imports';
import { closePool } from '#lib/db/pool';
import { asTenant, loginAs } from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freshSchema } from '#test/support/tables';

/**
 * The door through which an import's commit, running as the schema's role, marks its import
 * committed in the transaction that writes its rows (_dbadmin_audit.import_committed): every login
 * may call it, so it must mark nothing but from that very transaction, and code a tenant planted
 * on the table must not be able to make a commit report what it did not write.
 */
afterAll(closePool);

const TENANT_PASSWORD = 'schema-pass-1';
let schema: string;
beforeAll(async () => {
  schema = await freshSchema('impdoor');
});

const FORGED = JSON.stringify({ success: true, message: 'forged', rows: 999, mode: 'insert' });

async function table(): Promise<string> {
  const name = uniqueName('items');
  await asTenant(schema, `CREATE TABLE "${schema}".${name} (id int PRIMARY KEY, name text)`);
  return name;
}

async function opened(name: string, csv: string): Promise<string> {
  const id = (
    await call(imports, {
      method: 'POST',
      path: `/api/table/${name}/imports`,
      body: { schema, format: 'csv' },
    })
  ).body.id as string;
  await call(imports, {
    method: 'PUT',
    path: `/api/table/${name}/imports/${id}/parts/1`,
    query: { schema },
    headers: { 'content-type': 'text/csv' },
    body: csv,
  });
  return id;
}

const commit = (name: string, id: string) =>
  call(imports, {
    method: 'POST',
    path: `/api/table/${name}/imports/${id}/commit`,
    body: { schema, parts: 1 },
  });
const status = (name: string, id: string) =>
  call(imports, { path: `/api/table/${name}/imports/${id}`, query: { schema } });
const rowsOf = async (name: string) =>
  (await withAdminClient((c) => c.query(`SELECT id FROM "${schema}".${name} ORDER BY id`))).rows.map(
    (r) => r.id as number,
  );

/** The door called by the tenant's own login, in a transaction of its own. */
async function knock(id: string): Promise<boolean> {
  const client = loginAs(`${schema}_user`, TENANT_PASSWORD);
  await client.connect();
  try {
    const { rows } = await client.query('SELECT _dbadmin_audit.import_committed($1, $2) AS marked', [
      id,
      FORGED,
    ]);
    return rows[0].marked as boolean;
  } finally {
    await client.end();
  }
}

describe('the door an import’s commit marks its import committed through', () => {
  it('marks nothing from another transaction: an open import, or one whose commit is running', async () => {
    const name = await table();
    const key = Math.floor(Math.random() * 1_000_000_000);
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".${name}_gate() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM pg_advisory_xact_lock(${key}); RETURN NEW; END $$;
       CREATE TRIGGER gate BEFORE INSERT ON "${schema}".${name} FOR EACH ROW EXECUTE FUNCTION "${schema}".${name}_gate()`,
    );
    const open = await opened(name, 'id,name\n1,real\n');
    const running = await opened(name, 'id,name\n2,real\n');
    const held = new pg.Client({ connectionString: directUrl() });
    await held.connect();
    await held.query('SELECT pg_advisory_lock($1)', [key]);
    const committing = commit(name, running);
    for (;;) {
      const { rowCount } = await held.query(
        `SELECT 1 FROM _dbadmin.import_sessions WHERE id = $1 AND commit_xid IS NOT NULL`,
        [running],
      );
      if (rowCount) break;
      await new Promise((next) => setTimeout(next, 20));
    }

    const onOpen = await knock(open);
    const onRunning = await knock(running);
    await held.end();
    const done = await committing;

    expect([onOpen, onRunning]).toEqual([false, false]);
    expect((await status(name, open)).body).toMatchObject({ state: 'open' });
    expect(done.body).toMatchObject({ success: true, rows: 1 });
    expect((await status(name, running)).body.outcome).toEqual(done.body);
  });

  it('marked first by code planted on the table, in the commit’s own transaction, makes the commit write nothing', async () => {
    const name = await table();
    const id = await opened(name, 'id,name\n1,real\n2,real\n');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".${name}_forge() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM _dbadmin_audit.import_committed('${id}', '${FORGED}'); RETURN NEW; END $$;
       CREATE TRIGGER forge BEFORE INSERT ON "${schema}".${name} FOR EACH ROW EXECUTE FUNCTION "${schema}".${name}_forge()`,
    );

    const forged = await commit(name, id);
    const read = await status(name, id);
    await asTenant(schema, `DROP TRIGGER forge ON "${schema}".${name}`);
    const done = await commit(name, id);

    expect(forged.status).toBe(409);
    expect(forged.body.error).toBe('Import not recorded');
    expect(read.body).toMatchObject({ state: 'open', parts: [{ part: 1 }] });
    expect(read.body).not.toHaveProperty('outcome');
    expect(done.body).toMatchObject({ success: true, rows: 2 });
    expect(await rowsOf(name)).toEqual([1, 2]);
  });
});

describe('locks a tenant can hold on the imports’ records', () => {
  const openOne = async (name: string) =>
    call(imports, { method: 'POST', path: `/api/table/${name}/imports`, body: { schema, format: 'csv' } });
  /** Resolves to the reply, or to 'blocked' when it has not come after `ms`. */
  const within = <T>(ms: number, reply: Promise<T>) =>
    Promise.race([reply, new Promise<'blocked'>((done) => setTimeout(() => done('blocked'), ms))]);

  /** Opens an import of `name` while `holder` keeps a transaction open after `sql`. */
  const openWhileHeld = async (holder: pg.Client, name: string, sql: string, values: unknown[]) => {
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(sql, values);
      return await within(5000, openOne(name));
    } finally {
      await holder.end();
    }
  };

  it('the door called in the tenant’s own transaction, left open, holds up no one’s new import', async () => {
    const name = await table();
    const tenant = loginAs(`${schema}_user`, TENANT_PASSWORD);

    const reply = await openWhileHeld(
      tenant,
      name,
      'SELECT _dbadmin_audit.import_committed(gen_random_uuid(), $1)',
      [FORGED],
    );

    expect(reply).toMatchObject({ status: 201 });
  });

  it('an expired import whose record a transaction holds is skipped by the sweep, not waited for', async () => {
    const name = await table();
    const expired = await opened(name, 'id,name\n1,kept\n');
    await withAdminClient((c) =>
      c.query(`UPDATE _dbadmin.import_sessions SET expires_at = now() - interval '1 hour' WHERE id = $1`, [
        expired,
      ]),
    );
    // As a commit's transaction holds it from the door on, until it ends.
    const holder = new pg.Client({ connectionString: directUrl() });

    const reply = await openWhileHeld(
      holder,
      name,
      'SELECT 1 FROM _dbadmin.import_sessions WHERE id = $1 FOR UPDATE',
      [expired],
    );

    expect(reply).toMatchObject({ status: 201 });
  });
});
