import { createHash, randomUUID } from 'node:crypto';
import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { closePool } from '#lib/db/pool';
import { asTenant, bearer, createKey, loginAs, sqlAs, tenantSchema } from '#test/security/tenant';
import { entriesOf, entryCount } from '#test/support/audit';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * The audit log against a hostile tenant: its own database login, a service_role key's SQL, the
 * admin's SQL as the schema's role, and code planted where the API writes. None of them may read
 * the log, change or delete an entry, or forge one through the append function the tenant's
 * sessions can call; a planted trigger cannot keep a change's entry from being written.
 */
afterAll(closePool);

let schema: string;
let key: string;
beforeAll(async () => {
  schema = await tenantSchema('audsec');
  key = (await createKey(schema, 'service_role')).key;
});

/** What the tenant's own login gets for `sql`: the error's message, or 'ran'. */
const tenantTries = (sql: string) =>
  asTenant(schema, sql).then(
    () => 'ran',
    (error: Error) => error.message,
  );

/** An entry as the append function takes it, sealed the way a tenant without the key could. */
const forged = (action: string) =>
  JSON.stringify({ id: randomUUID(), requestId: 'forged', actor: 'admin', schema, action, status: 200 });
const sha256hex = (text: string) => createHash('sha256').update(text).digest('hex');

/**
 * `bytes` sealed with the service's own key, as if it had leaked: worked out here from the
 * migration's definition, not with the service's code.
 */
async function sealedWithTheKey(bytes: Buffer): Promise<string> {
  const {
    rows: [{ key: hex }],
  } = await withAdminClient((c) => c.query("SELECT encode(key, 'hex') AS key FROM _dbadmin.audit_seal"));
  const k = Buffer.from(hex, 'hex');
  const inner = createHash('sha256')
    .update(Buffer.concat([k, bytes]))
    .digest();
  return createHash('sha256')
    .update(Buffer.concat([k, inner]))
    .digest('hex');
}

describe('the tenant’s own database login', () => {
  it.each([
    'SELECT * FROM _dbadmin.audit_log',
    "INSERT INTO _dbadmin.audit_log (id, request_id, actor, action, status) VALUES (gen_random_uuid(), 'x', 'admin', 'forged', 200)",
    "UPDATE _dbadmin.audit_log SET action = 'nothing'",
    'DELETE FROM _dbadmin.audit_log',
    'TRUNCATE _dbadmin.audit_log',
    'DROP TABLE _dbadmin.audit_log',
    'SELECT key FROM _dbadmin.audit_seal',
    'CREATE FUNCTION _dbadmin_audit.sneak() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$',
    'CREATE OR REPLACE FUNCTION _dbadmin_audit.append(entry text, seal text) RETURNS void LANGUAGE sql AS $$ SELECT $$',
    'ALTER FUNCTION _dbadmin_audit.append(text, text) OWNER TO CURRENT_USER',
  ])('is refused: %s', async (sql) => {
    const before = await entryCount();
    expect(await tenantTries(sql)).toMatch(/permission denied|must be owner/);
    expect(await entryCount()).toBe(before);
  });

  it.each([
    ['no seal', () => `'${forged('a')}', NULL`],
    ['a seal of zeros', () => `'${forged('b')}', '${'0'.repeat(64)}'`],
    [
      'the entry’s own hash',
      () => {
        const entry = forged('c');
        return `'${entry}', '${sha256hex(entry)}'`;
      },
    ],
    ['a seal that is not hex', () => `'${forged('d')}', 'zz'`],
  ])('cannot forge an entry through the append function with %s', async (_, args) => {
    const before = await entryCount();
    expect(await tenantTries(`SELECT _dbadmin_audit.append(${args()})`)).toMatch(
      /audit entry refused|permission/,
    );
    expect(await entryCount()).toBe(before);
  });

  it('cannot replay an entry it saw: each is taken once', async () => {
    const entry = forged('replayed');
    const seal = await sealedWithTheKey(Buffer.from(entry));
    const call = `SELECT _dbadmin_audit.append('${entry}', '${seal}')`;
    expect(await tenantTries(call)).toBe('ran');
    expect(await tenantTries(call)).toMatch(/duplicate key/);
  });
});

describe('the append function, called with the tenant’s own temporary objects', () => {
  it.each(['bytea', 'jsonb', 'uuid', 'xid8', 'int8', 'int4', 'int2', 'text'])(
    'never runs a pg_temp domain named %s as its owner',
    async (type) => {
      const client = loginAs(`${schema}_user`, 'schema-pass-1');
      const notices: string[] = [];
      client.on('notice', (n) => notices.push(n.message ?? ''));
      await client.connect();
      try {
        await client.query(`
          CREATE FUNCTION pg_temp.spy(v pg_catalog.${type}) RETURNS bool LANGUAGE plpgsql AS $$
          BEGIN RAISE NOTICE 'ran as % with %', current_user, v::pg_catalog.text; RETURN true; END $$;
          CREATE DOMAIN pg_temp.${type} AS pg_catalog.${type} CHECK (pg_temp.spy(VALUE))`);
        const sealed = JSON.stringify({
          id: randomUUID(),
          requestId: 'x',
          actor: 'admin',
          action: 'a',
          status: 200,
        });
        const refused = await client
          .query(`SELECT _dbadmin_audit.append($1, $2)`, [sealed, '0'.repeat(64)])
          .then(
            () => 'ran',
            (error: Error) => error.message,
          );
        expect(refused).toMatch(/audit entry refused/);
        expect(notices).toEqual([]);
      } finally {
        await client.end();
      }
    },
  );
});

describe('an entry’s text, seen by code running in its transaction', () => {
  /** A tenant table whose deferred trigger runs `body` at the API's COMMIT (current_query() is ours). */
  const watch = (table: string, body: string) =>
    asTenant(
      schema,
      `CREATE TABLE IF NOT EXISTS captured (statement text);
       CREATE FUNCTION ${table}_late() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN ${body} RETURN NULL; END $$;
       CREATE TABLE ${table} (id serial PRIMARY KEY, note text);
       CREATE CONSTRAINT TRIGGER ${table}_late AFTER INSERT ON ${table} DEFERRABLE INITIALLY DEFERRED
         FOR EACH ROW EXECUTE FUNCTION ${table}_late()`,
    );
  const insertInto = (table: string) =>
    call(rows, {
      method: 'POST',
      path: `/api/table/${table}/row`,
      body: { data: { note: 'n' } },
      ...bearer(key),
    });
  /** Our statement as the trigger saw it, without its COMMIT: the insert into the inbox. */
  const captured = async () => {
    const found = await withAdminClient(
      async (c) => (await c.query(`SELECT statement FROM "${schema}".captured`)).rows,
    );
    expect(found).toHaveLength(1);
    return String(found[0].statement).replace(/;\s*COMMIT\s*$/i, '');
  };

  it('is refused in any other transaction', async () => {
    await watch('watched', 'INSERT INTO captured VALUES (current_query());');
    expect((await insertInto('watched')).status).toBe(201);
    const replay = await captured();
    expect(replay).toContain('_dbadmin_audit.inbox');
    const before = await entryCount();
    // The inbox takes the row (anyone may write to it); the log never takes the entry.
    expect(await tenantTries(replay)).toBe('ran');
    expect(await entryCount()).toBe(before);
  });

  it('is one entry however often it is written in its own transaction', async () => {
    await withAdminClient((c) => c.query(`TRUNCATE "${schema}".captured`));
    await watch(
      'twice',
      `INSERT INTO captured VALUES (current_query());
       EXECUTE pg_catalog.regexp_replace(current_query(), ';\\s*COMMIT\\s*$', '');
       EXECUTE pg_catalog.regexp_replace(current_query(), ';\\s*COMMIT\\s*$', '');`,
    );
    const before = await entryCount();
    const reply = await insertInto('twice');
    expect(reply.status).toBe(201);
    expect(await captured()).toContain('_dbadmin_audit.inbox');
    expect(await entriesOf(reply)).toHaveLength(1);
    expect(await entryCount()).toBe(before + 1);
  });
});

describe('the inbox a change’s entry is written to', () => {
  it.each([
    'SELECT * FROM _dbadmin_audit.inbox',
    "INSERT INTO _dbadmin_audit.inbox (entry, seal) VALUES ('e', repeat('0', 64)) RETURNING *",
    "UPDATE _dbadmin_audit.inbox SET seal = repeat('0', 64)",
    'DELETE FROM _dbadmin_audit.inbox',
    'TRUNCATE _dbadmin_audit.inbox',
    'BEGIN; LOCK TABLE _dbadmin_audit.inbox IN ACCESS EXCLUSIVE MODE; COMMIT',
    'DROP TABLE _dbadmin_audit.inbox',
    'ALTER TABLE _dbadmin_audit.inbox ALTER xact DROP DEFAULT',
    // Nothing bigger than an entry: a compressible giant row would cost the drain its memory.
    "INSERT INTO _dbadmin_audit.inbox (entry, seal) VALUES (repeat('A', 300000), repeat('0', 64))",
    // Its time and its transaction are the database's to say, never the writer's.
    "INSERT INTO _dbadmin_audit.inbox (entry, seal, at) VALUES ('e', repeat('0', 64), now() - interval '1 day')",
    "INSERT INTO _dbadmin_audit.inbox (entry, seal, xact) VALUES ('e', repeat('0', 64), '1')",
  ])('refuses the tenant’s own login: %s', async (sql) => {
    expect(await tenantTries(sql)).toMatch(/permission denied|must be owner|violates check constraint/);
  });

  const base64 = (text: string) => Buffer.from(text).toString('base64');
  /** Sealed with the service's own key (as if it had leaked) for transaction `xid`. */
  const leakedRowFor = async (xid: string) => {
    const entry = JSON.parse(forged('leaked')) as Record<string, unknown>;
    const bytes = Buffer.from(JSON.stringify({ ...entry, xid }));
    return `'${bytes.toString('base64')}', '${await sealedWithTheKey(bytes)}'`;
  };

  it.each([
    ['a seal of zeros', async () => `'${base64(forged('e'))}', '${'0'.repeat(64)}'`],
    [
      'the entry’s own hash',
      async () => {
        const entry = forged('f');
        return `'${base64(entry)}', '${sha256hex(entry)}'`;
      },
    ],
    ['text that is not base64', async () => `'not base64 at all!', '${'0'.repeat(64)}'`],
    ['the key’s seal for another transaction', () => leakedRowFor('1')],
  ])('takes a row forged with %s, and never makes it an entry', async (_, values) => {
    const row = await values();
    const before = await entryCount();
    expect(await tenantTries(`INSERT INTO _dbadmin_audit.inbox (entry, seal) VALUES (${row})`)).toBe('ran');
    expect(await entryCount()).toBe(before);
    // Refused, not left waiting: the forged row is gone from the inbox too.
    const [{ n }] = await withAdminClient(
      async (c) =>
        (
          await c.query('SELECT count(*)::int AS n FROM _dbadmin_audit.inbox WHERE seal = $1', [
            row.split("'")[3],
          ])
        ).rows,
    );
    expect(n).toBe(0);
  });
});

describe('SQL through the API', () => {
  it.each([
    'DELETE FROM _dbadmin.audit_log',
    "UPDATE _dbadmin.audit_log SET target = 'x'",
    'SELECT count(*) FROM _dbadmin.audit_log',
  ])('of a service_role key is refused: %s', async (sql) => {
    const before = await entryCount();
    const reply = await sqlAs(key, sql);
    expect(reply.status).toBe(403);
    expect(reply.body.message).toMatch(/permission denied/);
    expect(await entryCount()).toBe(before);
  });

  it('of the admin as the schema’s role is refused', async () => {
    const before = await entryCount();
    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: 'DELETE FROM _dbadmin.audit_log' },
    });
    expect(reply.status).toBe(403);
    expect(reply.body.message).toMatch(/permission denied/);
    expect(await entryCount()).toBe(before);
  });
});

describe('code planted where the API writes', () => {
  it('can neither remove nor forge entries, nor keep the change’s own from being written', async () => {
    await asTenant(
      schema,
      `CREATE TABLE tries (what text, outcome text);
       CREATE FUNCTION meddle() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         BEGIN DELETE FROM _dbadmin.audit_log; INSERT INTO tries VALUES ('delete', 'ran');
         EXCEPTION WHEN OTHERS THEN INSERT INTO tries VALUES ('delete', SQLERRM); END;
         BEGIN PERFORM _dbadmin_audit.append('{"id":"${randomUUID()}","requestId":"x","actor":"admin","action":"forged","status":200}', repeat('0', 64));
           INSERT INTO tries VALUES ('append', 'ran');
         EXCEPTION WHEN OTHERS THEN INSERT INTO tries VALUES ('append', SQLERRM); END;
         RETURN NEW;
       END $$;
       CREATE TRIGGER meddle AFTER INSERT ON items FOR EACH ROW EXECUTE FUNCTION meddle();
       CREATE CONSTRAINT TRIGGER meddle_late AFTER INSERT ON items DEFERRABLE INITIALLY DEFERRED
         FOR EACH ROW EXECUTE FUNCTION meddle()`,
    );
    const before = await entryCount();
    const reply = await call(rows, {
      method: 'POST',
      path: '/api/table/items/row',
      body: { data: { name: 'watched' } },
      ...bearer(key),
    });

    expect(reply.status).toBe(201);
    expect(await entriesOf(reply)).toEqual([
      expect.objectContaining({ action: 'row.insert', schema_name: schema }),
    ]);
    expect(await entryCount()).toBe(before + 1);
    const tries = await withAdminClient(
      async (c) => (await c.query(`SELECT what, outcome FROM "${schema}".tries ORDER BY what`)).rows,
    );
    expect(tries).toHaveLength(4);
    for (const attempt of tries) expect(attempt.outcome).toMatch(/permission denied|audit entry refused/);
  });
});
