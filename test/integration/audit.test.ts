import { handler as audit } from '#functions/audit';
import { handler as keys } from '#functions/keys';
import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { sweepAuditLog } from '#lib/admin/audit';
import { type AuditDraft, newEntryId, readSealKey } from '#lib/db/audit-log';
import { closePool, getDatabase } from '#lib/db/pool';
import { inTransaction } from '#lib/db/transaction';
import { asTenant, bearer, createKey, sqlAs, tenantSchema } from '#test/security/tenant';
import { drained, entriesOf } from '#test/support/audit';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { withSetting } from '#test/support/settings';

/**
 * The audit log through the real handlers: what an entry says (and never says), entries written
 * with their change and never for one that rolled back, the admin's SQL fingerprinted, reading
 * with filters and pages, retention. The entry for every changing route is held by the OpenAPI
 * test, which drives every route to its success; the tenant's attacks on the log are in
 * test/security/audit.
 */
afterAll(closePool);

let schema: string;
let service: { id: number; key: string };
beforeAll(async () => {
  schema = await tenantSchema('aud');
  service = await createKey(schema, 'service_role', 'writer');
});

const insert = (data: Record<string, unknown>, auth = {}) =>
  call(rows, { method: 'POST', path: '/api/table/items/row', body: { schema, data }, ...auth });

describe('an entry', () => {
  it('says who, where, what, the status and the rows, and never a value, key or password', async () => {
    const reply = await insert({ name: 'secret-value-8812' }, bearer(service.key));
    expect(reply.status).toBe(201);

    const [entry, ...more] = await entriesOf(reply);
    expect(more).toEqual([]);
    expect(entry).toMatchObject({
      actor: 'key',
      key_id: service.id,
      key_name: 'writer',
      key_type: 'service_role',
      schema_name: schema,
      action: 'row.insert',
      target: 'table items',
      status: 201,
      row_count: 1,
    });
    expect(JSON.stringify(entry)).not.toContain('secret-value-8812');
  });

  it('of a key made keeps its id and name, never the key', async () => {
    const reply = await call(keys, {
      method: 'POST',
      path: `/api/project/${schema}/keys`,
      body: { keyName: 'reader', keyType: 'anon' },
    });
    const [entry] = await entriesOf(reply);
    expect(entry).toMatchObject({
      actor: 'admin',
      action: 'key.create',
      target: `key ${reply.body.id} (reader)`,
    });
    expect(JSON.stringify(entry)).not.toContain(reply.body.key);
    expect(JSON.stringify(entry)).not.toContain(reply.body.key.slice(0, 8));
  });

  it('of a schema made never holds its password', async () => {
    const { handler: schemas } = await import('#functions/schemas');
    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: `aud_pw_${Date.now()}`, password: 'password-never-logged-77' },
    });
    expect(reply.status).toBe(201);
    const [entry] = await entriesOf(reply);
    expect(entry).toMatchObject({ action: 'schema.create' });
    expect(JSON.stringify(entry)).not.toContain('password-never-logged-77');
  });

  it('is not written for a read, a dry run or an anon key’s SQL', async () => {
    const anon = await createKey(schema, 'anon', 'peek');
    const replies = [
      await call(tables, { path: '/api/table/items', query: { schema } }),
      await call(tables, {
        method: 'PATCH',
        path: '/api/table/items/column/name',
        body: { schema, dryRun: true, rename: 'title' },
      }),
      await sqlAs(anon.key, 'SELECT 1'),
    ];
    for (const reply of replies) {
      expect(reply.status).toBe(200);
      expect(await entriesOf(reply)).toEqual([]);
    }
  });
});

describe('with its change', () => {
  it('is not written when the change rolls back at its commit', async () => {
    await asTenant(
      schema,
      `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.name = 'refused-at-commit' THEN RAISE EXCEPTION 'no, at commit'; END IF; RETURN NEW; END $$;
       CREATE CONSTRAINT TRIGGER refuse_late AFTER INSERT ON items DEFERRABLE INITIALLY DEFERRED
         FOR EACH ROW EXECUTE FUNCTION refuse()`,
    );
    const reply = await insert({ name: 'refused-at-commit' });
    expect(reply.status).toBe(400);
    expect(reply.body.message).toContain('no, at commit');
    expect(await entriesOf(reply)).toEqual([]);
  });

  it('is the tenant’s error when its own code calls the append function wrongly, not the log’s 503', async () => {
    await asTenant(
      schema,
      `CREATE TABLE noisy (id serial PRIMARY KEY);
       CREATE FUNCTION noise() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN PERFORM _dbadmin_audit.append('{}', repeat('0', 64)); RETURN NEW; END $$;
       CREATE TRIGGER noise AFTER INSERT ON noisy FOR EACH ROW EXECUTE FUNCTION noise()`,
    );
    const reply = await call(rows, {
      method: 'POST',
      path: '/api/table/noisy/row',
      body: { schema, data: {} },
    });
    expect(reply.status).toBeLessThan(500);
    expect(reply.body.message).toMatch(/audit entry refused/);
  });

  it('refused by the tenant’s own doing is the tenant’s error (403 read-only), not the log’s 503', async () => {
    await asTenant(
      schema,
      `CREATE TABLE sealed_off (id serial PRIMARY KEY, note text);
       CREATE FUNCTION read_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN PERFORM set_config('transaction_read_only', 'on', true); RETURN NEW; END $$;
       CREATE TRIGGER read_only AFTER INSERT ON sealed_off FOR EACH ROW EXECUTE FUNCTION read_only()`,
    );
    const reply = await call(rows, {
      method: 'POST',
      path: '/api/table/sealed_off/row',
      body: { schema, data: { note: 'n' } },
    });
    expect(reply.status).toBe(403);
    expect(reply.body.message).toMatch(/read-only transaction/);
    expect(await entriesOf(reply)).toEqual([]);
  });

  it('is a precondition of the change: no entry, no change (503)', async () => {
    await withAdminClient((c) =>
      c.query(
        "ALTER TABLE _dbadmin_audit.inbox ADD CONSTRAINT test_refuses CHECK (strpos(convert_from(decode(entry, 'base64'), 'UTF8'), 'refused_t') = 0) NOT VALID",
      ),
    );
    try {
      await call(tables, {
        method: 'POST',
        path: '/api/table/create',
        body: { schema, tableName: 'refused_t', columns: [{ name: 'id', type: 'INTEGER' }] },
      }).then((reply) => expect(reply.status).toBe(503));
      const [{ n }] = await withAdminClient(
        async (c) =>
          (
            await c.query(
              'SELECT count(*)::int AS n FROM pg_class WHERE relname = $1 AND relnamespace = $2::regnamespace',
              ['refused_t', schema],
            )
          ).rows,
      );
      expect(n).toBe(0);
    } finally {
      await withAdminClient((c) => c.query('ALTER TABLE _dbadmin_audit.inbox DROP CONSTRAINT test_refuses'));
    }
  });
});

describe('the admin’s SQL', () => {
  it('is kept as its kinds and a fingerprint that values do not change, without its text', async () => {
    const one = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: "INSERT INTO items (name) VALUES ('v-one')" },
    });
    const two = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: "insert into items (name)\n values ('v-two')" },
    });
    const other = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: 'SELECT count(*) FROM items' },
    });
    const [a] = await entriesOf(one);
    const [b] = await entriesOf(two);
    const [c] = await entriesOf(other);

    expect(a).toMatchObject({
      action: 'sql.run',
      sql_kind: 'INSERT',
      row_count: 1,
      sql_text: null,
      schema_name: schema,
    });
    // Written in the script's own transaction, sealed for it.
    expect(a.xact_id).toEqual(expect.any(Number));
    expect(a.sql_fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(b.sql_fingerprint).toBe(a.sql_fingerprint);
    expect(c).toMatchObject({ sql_kind: 'SELECT', row_count: 0 });
    expect(c.sql_fingerprint).not.toBe(a.sql_fingerprint);
    expect(JSON.stringify([a, b])).not.toMatch(/v-one|v-two/);
  });

  describe('with AUDIT_SQL_TEXT=on', () => {
    withSetting('AUDIT_SQL_TEXT', 'on');

    it('keeps text jsonb cannot hold as its replacement character, and long text cut short', async () => {
      const odd = 'SELECT 1 /* \ud800 */';
      const reply = await call(query, { method: 'POST', path: '/api/query', body: { schema, sql: odd } });
      expect(reply.status).toBe(200);
      const [entry] = await entriesOf(reply);
      expect(entry.sql_text).toBe('SELECT 1 /* \ufffd */');
      const long = `SELECT 1 ${'-- x\n'.repeat(5000)}`;
      const [cut] = await entriesOf(
        await call(query, { method: 'POST', path: '/api/query', body: { schema, sql: long } }),
      );
      expect(cut.sql_text).toBe(`${long.slice(0, 16 * 1024)}… (${long.length} characters in all)`);
    });

    it('keeps the text too', async () => {
      const sql = 'CREATE TABLE kept_text (id int); DROP TABLE kept_text';
      const [entry] = await entriesOf(
        await call(query, { method: 'POST', path: '/api/query', body: { schema, sql } }),
      );
      expect(entry).toMatchObject({ sql_text: sql, sql_kind: 'CREATE TABLE, DROP TABLE' });
    });
  });
});

/**
 * An entry written the way a change writes it, and left in the inbox (no request drains it);
 * how many rows the inbox holds after.
 */
async function leftInInbox(schema: string, requestId: string): Promise<number> {
  return withAdminClient(async (c) => {
    const draft: AuditDraft = {
      key: await readSealKey(c),
      settled: false,
      entry: { id: newEntryId(), requestId, actor: 'admin', schema, action: 'row.insert', status: 201 },
    };
    await inTransaction(c, () => c.query('SELECT 1'), { audit: draft });
    return (await c.query('SELECT count(*)::int AS n FROM _dbadmin_audit.inbox')).rows[0].n;
  });
}

describe('GET /api/audit', () => {
  it('finds entries by schema, who and action, newest first, a page at a time', async () => {
    const mine = await tenantSchema('audpage');
    const key = await createKey(mine, 'service_role', 'pager');
    for (let i = 0; i < 5; i++) {
      const reply = await call(rows, {
        method: 'POST',
        path: '/api/table/items/row',
        body: { data: { name: `p${i}` } },
        ...bearer(key.key),
      });
      expect(reply.status).toBe(201);
    }
    const read = (extra: Record<string, string>) =>
      call(audit, {
        path: '/api/audit',
        query: { schema: mine, keyId: String(key.id), action: 'row', ...extra },
      });

    const first = await read({ limit: '3' });
    expect(first.status).toBe(200);
    expect(first.body.entries.map((e: { action: string }) => e.action)).toEqual([
      'row.insert',
      'row.insert',
      'row.insert',
    ]);
    const second = await read({ limit: '3', before: first.body.nextCursor });
    expect(second.body.entries).toHaveLength(2);
    expect(second.body.nextCursor).toBeNull();
    const seqs = [...first.body.entries, ...second.body.entries].map((e: { seq: number }) => e.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => b - a));

    expect((await read({ action: 'table' })).body.entries).toEqual([]);
    expect((await read({ from: '2999-01-01T00:00:00Z' })).body.entries).toEqual([]);
    expect((await read({ to: '2999-01-01T00:00:00Z' })).body.entries).toHaveLength(5);
  });

  it('holds an entry still waiting in the inbox: the read drains it first', async () => {
    const mine = await tenantSchema('audwait');
    const requestId = `waiting-${Date.now()}`;
    expect(await leftInInbox(mine, requestId)).toBeGreaterThan(0);

    const reply = await call(audit, { path: '/api/audit', query: { schema: mine, action: 'row' } });
    expect(reply.status).toBe(200);
    expect(reply.body.entries).toEqual([
      expect.objectContaining({ requestId, action: 'row.insert', schema: mine }),
    ]);
  });

  it('waits for entries another drain has taken, rather than answering without them', async () => {
    const mine = await tenantSchema('audlock');
    const requestId = `locked-${Date.now()}`;
    expect(await leftInInbox(mine, requestId)).toBeGreaterThan(0);
    // Another process's drain, mid-batch: it holds the inbox's rows until it ends.
    const other = await withAdminClient(async (c) => {
      await c.query('BEGIN');
      await c.query('SELECT 1 FROM _dbadmin_audit.inbox FOR UPDATE');
      const read = call(audit, { path: '/api/audit', query: { schema: mine, action: 'row' } });
      await new Promise((done) => setTimeout(done, 300));
      await c.query('ROLLBACK');
      return read;
    });
    expect(other.status).toBe(200);
    expect(other.body.entries).toEqual([expect.objectContaining({ requestId })]);
  });

  it('is the admin’s alone', async () => {
    const reply = await call(audit, { path: '/api/audit', ...bearer(service.key) });
    expect(reply.status).toBe(403);
  });

  it('says what to fix in a bad filter', async () => {
    const reply = await call(audit, { path: '/api/audit', query: { from: 'yesterday' } });
    expect(reply.status).toBe(400);
    expect(reply.body.message).toContain('from must be an ISO 8601 time');
  });
});

describe('retention', () => {
  it('deletes entries older than AUDIT_RETENTION_DAYS, by the database’s clock', async () => {
    const reply = await insert({ name: 'old one' });
    await drained((c) =>
      c.query("UPDATE _dbadmin.audit_log SET at = now() - interval '40 days' WHERE request_id = $1", [
        reply.headers['x-request-id'],
      ]),
    );
    const recent = await insert({ name: 'recent one' });

    expect(await sweepAuditLog(await getDatabase(), 30, Number.POSITIVE_INFINITY)).toBeGreaterThanOrEqual(1);
    expect(await entriesOf(reply)).toEqual([]);
    expect(await entriesOf(recent)).toHaveLength(1);
  });
});

describe('with AUDIT_LOG=off', () => {
  withSetting('AUDIT_LOG', 'off');

  it('writes nothing', async () => {
    const reply = await insert({ name: 'unaudited' });
    expect(reply.status).toBe(201);
    expect(await entriesOf(reply)).toEqual([]);
  });
});
