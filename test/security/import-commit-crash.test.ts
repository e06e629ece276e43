import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { supervisedHost } from '#test/support/host';
import { ADMIN, basic } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { gone } from '../../bin/processes';

/**
 * An import's commit whose host is killed (SIGKILL) in the middle of it, as `npm start` runs the
 * host: built, supervised, its own embedded PostgreSQL. The commit records its transaction before
 * it writes, so once the host is back the import says what became of it, with no person and no
 * clock: open again, parts kept, when the transaction never committed; committed, with its
 * outcome, when it did. Committed again, its rows are written exactly once.
 */

jest.setTimeout(240_000);

const supervised = supervisedHost('import-crash');

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

/** One request to the host; status 0 when nothing answered (the host is down). */
async function request(
  method: string,
  path: string,
  body?: unknown,
  type = 'application/json',
): Promise<Answer> {
  try {
    const response = await fetch(`${supervised.host.base}${path}`, {
      method,
      headers: { authorization: basic(ADMIN), ...(body === undefined ? {} : { 'content-type': type }) },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  } catch {
    return { status: 0, body: {} };
  }
}

async function ok(method: string, path: string, body?: unknown, type?: string): Promise<Answer> {
  const answer = await request(method, path, body, type);
  if (answer.status >= 300)
    throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer;
}

/** Until `pid` has ended: gone, or a zombie its stopped supervisor has not reaped yet. */
async function ended(pid: number): Promise<void> {
  for (;;) {
    let state: string | undefined;
    try {
      state = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0];
    } catch {
      return;
    }
    if (state === 'Z') return;
    await pause(20);
  }
}

/** Until the host answers again. */
async function servedAgain(): Promise<void> {
  for (let tries = 0; tries < 600; tries++) {
    if ((await request('GET', '/api/schemas')).status === 200) return;
    await pause(100);
  }
  throw new Error(`not served again:\n${supervised.host.output().slice(-3000)}`);
}

/** The host's database as the service logs in (runtime.json, written by the running host). */
async function database(): Promise<pg.Client> {
  const { databaseUrl } = JSON.parse(readFileSync(join(supervised.dataDir, 'runtime.json'), 'utf8')) as {
    databaseUrl: string;
  };
  const client = new pg.Client({ connectionString: databaseUrl });
  // Its server is stopped when the host is started again: that ends this connection.
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Until `sql` (on `db`) answers a row. */
async function until(db: pg.Client, sql: string, values: unknown[]): Promise<Record<string, unknown>> {
  for (;;) {
    const { rows } = await db.query(sql, values);
    if (rows[0]) return rows[0];
    await pause(20);
  }
}

const waitingFor = (db: pg.Client, key: number) =>
  until(db, `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, [key]);

/** A schema, and in it `items` with a trigger that waits for the advisory lock `key` (`when`). */
async function gatedTable(key: number, when: 'each row written' | 'commit'): Promise<string> {
  const schema = uniqueName('crash');
  await ok('POST', '/api/schema/create', { schemaName: schema, password: 'schema-pass-1' });
  const trigger =
    when === 'commit'
      ? 'CREATE CONSTRAINT TRIGGER gate AFTER INSERT ON items DEFERRABLE INITIALLY DEFERRED'
      : 'CREATE TRIGGER gate BEFORE INSERT ON items';
  await ok('POST', '/api/query', {
    schema,
    sql: `CREATE TABLE items (id int PRIMARY KEY, name text);
          CREATE FUNCTION gate() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM pg_advisory_xact_lock(${key}); RETURN NEW; END $$;
          ${trigger} FOR EACH ROW EXECUTE FUNCTION gate()`,
  });
  return schema;
}

/** An import of two rows in two parts, sent. */
async function sentImport(schema: string): Promise<string> {
  const id = (await ok('POST', '/api/table/items/imports', { schema, format: 'csv' })).body.id as string;
  await ok('PUT', `/api/table/items/imports/${id}/parts/1?schema=${schema}`, 'id,name\n1,Ann\n', 'text/csv');
  await ok('PUT', `/api/table/items/imports/${id}/parts/2?schema=${schema}`, '2,Bo\n', 'text/csv');
  return id;
}

const commit = (schema: string, id: string) =>
  request('POST', `/api/table/items/imports/${id}/commit`, { schema, parts: 2 });
const status = (schema: string, id: string) =>
  request('GET', `/api/table/items/imports/${id}?schema=${schema}`);
const rows = async (schema: string) =>
  (await ok('POST', '/api/query', { schema, sql: 'SELECT id, name FROM items ORDER BY id' })).body.rows;

/**
 * An import of two parts whose commit is sent and held by our lock `key` (a trigger waits on it,
 * on each row written or at the COMMIT), once its transaction is recorded: the commit's answer
 * to come, the transaction's id, and our connection holding the lock.
 */
async function heldCommit(key: number, when: 'each row written' | 'commit') {
  const schema = await gatedTable(key, when);
  const id = await sentImport(schema);
  const db = await database();
  await db.query('SELECT pg_advisory_lock($1)', [key]);
  const answered = commit(schema, id);
  await waitingFor(db, key);
  const { xid } = await until(
    db,
    'SELECT commit_xid::text AS xid FROM _dbadmin.import_sessions WHERE id = $1 AND commit_xid IS NOT NULL',
    [id],
  );
  return { schema, id, db, answered, xid };
}

describe('an import whose host is killed during its commit', () => {
  it('before its transaction committed: reads open again, nothing written, parts kept; committed again, its rows are there once', async () => {
    const { schema, id, db, answered, xid } = await heldCommit(7301, 'each row written');
    const killed = supervised.hostPid();
    process.kill(killed, 'SIGKILL');
    await gone([killed]);
    // Started again, the host stops the PostgreSQL the killed one left running (ending the commit's
    // session, and this test's) and starts its own.
    await servedAgain();
    await db.end().catch(() => undefined);
    const after = await database();
    const xactStatus = (await after.query('SELECT pg_xact_status($1::xid8) AS status', [xid])).rows[0].status;
    await after.end();

    const read = await status(schema, id);
    const again = await commit(schema, id);
    const repeated = await commit(schema, id);

    expect((await answered).status).toBe(0);
    expect(xactStatus).toBe('aborted');
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      state: 'open',
      parts: [
        { part: 1, bytes: 14 },
        { part: 2, bytes: 5 },
      ],
      message: `the last commit was interrupted (its transaction ${xid} ended without committing): nothing was written, the parts are kept: commit again`,
    });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ success: true, rows: 2 });
    expect(repeated.body).toEqual(again.body);
    expect(await rows(schema)).toEqual([
      { id: 1, name: 'Ann' },
      { id: 2, name: 'Bo' },
    ]);
  });

  it('after its transaction committed, before it answered: reads committed with its outcome; committed again, writes nothing twice', async () => {
    // The commit's COMMIT waits for the deferred trigger: its rows and its record are written.
    const key = 7302;
    const { schema, id, db, answered, xid } = await heldCommit(key, 'commit');
    // The supervisor held, so no host starts (and stops this PostgreSQL) until the commit has ended.
    const supervisor = supervised.host.pid;
    process.kill(supervisor, 'SIGSTOP');
    let xactStatus: unknown;
    try {
      const killed = supervised.hostPid();
      process.kill(killed, 'SIGKILL');
      await ended(killed);
      await db.query('SELECT pg_advisory_unlock($1)', [key]);
      ({ status: xactStatus } = await until(
        db,
        `SELECT pg_xact_status($1::xid8) AS status WHERE pg_xact_status($1::xid8) <> 'in progress'`,
        [xid],
      ));
    } finally {
      process.kill(supervisor, 'SIGCONT');
    }
    await servedAgain();
    await db.end().catch(() => undefined);

    const read = await status(schema, id);
    const again = await commit(schema, id);

    expect((await answered).status).toBe(0);
    expect(xactStatus).toBe('committed');
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({
      state: 'committed',
      parts: [],
      outcome: { success: true, rows: 2, mode: 'insert' },
    });
    expect(read.body).not.toHaveProperty('message');
    expect(again.status).toBe(200);
    expect(again.body).toEqual(read.body.outcome);
    expect(await rows(schema)).toEqual([
      { id: 1, name: 'Ann' },
      { id: 2, name: 'Bo' },
    ]);
  });
});
