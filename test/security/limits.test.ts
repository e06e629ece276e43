import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { resetConfig } from '#lib/config';
import { closePool } from '#lib/db/pool';
import { asTenant, backendsStillRunning, createKey, sqlAs, tenantSchema } from '#test/security/tenant';
import { call, httpEvent, lambdaContext } from '#test/support/http';

/** Ceilings a key holder cannot raise: result size, statement time, export size. */

afterAll(closePool);

let schema: string;
let service: string;
beforeAll(async () => {
  schema = await tenantSchema('lim');
  service = (await createKey(schema, 'service_role')).key;
});

afterEach(() => {
  delete process.env.QUERY_MAX_ROWS;
  delete process.env.QUERY_MAX_BYTES;
  delete process.env.QUERY_TIMEOUT_MS;
  resetConfig();
});

describe('result size', () => {
  it('answers a jsonb nested thousands deep as its JSON text, and the host keeps serving', async () => {
    // Parsed in node, JSON of it would overflow the stack while pg reads the row, ending the whole
    // process: a json value leaves as its text (lib/db/json-rows), never parsed.
    const deep = "(repeat('[', 6000) || repeat(']', 6000))::jsonb";
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".deep (id int PRIMARY KEY, doc jsonb);
                            INSERT INTO "${schema}".deep VALUES (1, ${deep})`,
    );
    const started = Date.now();

    const adHoc = await sqlAs(service, `SELECT ${deep} AS doc`);
    const page = await call(tables, {
      path: '/api/table/deep',
      query: { schema },
      auth: null,
      headers: { authorization: `Bearer ${service}` },
    });

    expect([adHoc.status, page.status]).toEqual([200, 200]);
    expect(adHoc.body.rows).toEqual([{ doc: `${'['.repeat(6000)}${']'.repeat(6000)}` }]);
    expect(page.body.data).toEqual([{ id: 1, doc: `${'['.repeat(6000)}${']'.repeat(6000)}` }]);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect((await sqlAs(service, 'SELECT 1 AS one')).body.rows).toEqual([{ one: 1 }]);
  });

  it('answers 413 naming the byte limit when a result would be too large', async () => {
    const reply = await sqlAs(service, "SELECT repeat('x', 1000) AS filler FROM generate_series(1, 20000)");

    expect(reply.status).toBe(413);
    expect(reply.body.error).toBe('Result too large');
    expect(reply.body.message).toMatch(/QUERY_MAX_BYTES/);
  });

  it('answers 413 naming the row limit when a result has too many rows', async () => {
    process.env.QUERY_MAX_ROWS = '100';
    resetConfig();

    const reply = await sqlAs(service, 'SELECT g FROM generate_series(1, 1000) g');

    expect(reply.status).toBe(413);
    expect(reply.body.message).toMatch(/QUERY_MAX_ROWS/);
    expect((await sqlAs(service, 'SELECT g FROM generate_series(1, 100) g')).body.rowCount).toBe(100);
  });

  it('caps exports and page reads by the same byte limit', async () => {
    process.env.QUERY_MAX_BYTES = '100000';
    resetConfig();
    await asTenant(
      schema,
      `INSERT INTO "${schema}".items (name) SELECT repeat('y', 10000) FROM generate_series(1, 20)`,
    );

    const replies = [
      await call(tables, { path: '/api/table/items/export', query: { schema, format: 'json' } }),
      await call(tables, { path: '/api/table/items/export', query: { schema, format: 'csv' } }),
      await call(tables, { path: '/api/table/items', query: { schema, limit: '1000' } }),
    ];

    expect(replies.map((r) => [r.status, r.body.error])).toEqual([
      [413, 'Result too large'],
      [413, 'Result too large'],
      [413, 'Result too large'],
    ]);
  });
});

describe('Lambda’s 6 MB response limit', () => {
  const SIX_MIB = 6 * 1024 * 1024;

  it('is a 413 JSON naming the limit, never a host failure, however high QUERY_MAX_BYTES is set', async () => {
    process.env.QUERY_MAX_BYTES = String(50 * 1024 * 1024);
    resetConfig();
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".wide (id serial PRIMARY KEY, body text);
       INSERT INTO "${schema}".wide (body) SELECT repeat('"', 800) FROM generate_series(1, 10000)`,
    );

    const replies = [
      await call(tables, { path: '/api/table/wide/export', query: { schema, format: 'json' } }),
      await call(tables, { path: '/api/table/wide/export', query: { schema, format: 'csv' } }),
      await sqlAs(service, 'SELECT * FROM wide'),
    ];

    for (const reply of replies) {
      expect([reply.status, reply.body.error]).toEqual([413, 'Response too large']);
      expect(reply.body.message).toMatch(/6 MB/);
      expect(reply.headers['content-type']).toMatch(/^application\/json/);
    }
  });

  it('lets an answer just under it through', async () => {
    process.env.QUERY_MAX_BYTES = String(50 * 1024 * 1024);
    resetConfig();

    const reply = await sqlAs(service, "SELECT repeat('a', 1000) AS a FROM generate_series(1, 5000)");

    expect(reply.status).toBe(200);
    expect(reply.text.length).toBeGreaterThan(5_000_000);
    expect(reply.text.length).toBeLessThan(SIX_MIB);
  });
});

describe('a write whose stored row is too large to answer', () => {
  it('is a 413 that wrote nothing, whatever a tenant’s trigger made of the row', async () => {
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".inflated (id serial PRIMARY KEY, name text);
       CREATE FUNCTION "${schema}".inflate() RETURNS trigger LANGUAGE plpgsql
         AS $$ BEGIN NEW.name := repeat(chr(1), 1100000); RETURN NEW; END $$;
       CREATE TRIGGER inflate BEFORE INSERT OR UPDATE ON "${schema}".inflated
         FOR EACH ROW EXECUTE FUNCTION "${schema}".inflate();
       ALTER TABLE "${schema}".inflated DISABLE TRIGGER inflate;
       INSERT INTO "${schema}".inflated (name) VALUES ('kept');
       ALTER TABLE "${schema}".inflated ENABLE TRIGGER inflate;`,
    );

    const inserted = await call(rows, {
      method: 'POST',
      path: '/api/table/inflated/row',
      body: { schema, data: { name: 'admin-row' } },
    });
    const updated = await call(rows, {
      method: 'PATCH',
      path: '/api/table/inflated/1',
      body: { schema, column: 'name', value: 'changed' },
    });

    expect([inserted.status, inserted.body.error]).toEqual([413, 'Result too large']);
    expect([updated.status, updated.body.error]).toEqual([413, 'Result too large']);
    const stored = await sqlAs(service, 'SELECT id, name FROM inflated ORDER BY id');
    expect(stored.body.rows).toEqual([{ id: 1, name: 'kept' }]);
  });
});

describe('statement time', () => {
  /** Statements still running pg_sleep(7.77). */
  const sleepers = () => backendsStillRunning("query LIKE '%pg_sleep(7.77)%' AND state = 'active'", 500);

  it('a statement past QUERY_TIMEOUT_MS ends as the JSON Query timeout error', async () => {
    process.env.QUERY_TIMEOUT_MS = '300';
    resetConfig();

    const reply = await sqlAs(service, 'SELECT pg_sleep(7.77)');

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Query timeout');
    expect(await sleepers()).toBe(0);
  });

  it('a function about to time out answers Query timeout in JSON and cancels the statement in PostgreSQL', async () => {
    const started = Date.now();
    const context = { ...lambdaContext(), getRemainingTimeInMillis: () => 1500 - (Date.now() - started) };

    const response = (await query(
      httpEvent({ method: 'POST', path: '/api/query', body: { sql: 'SELECT pg_sleep(7.77)', schema } }),
      context,
    )) as { statusCode: number; body: string };

    expect(Date.now() - started).toBeLessThan(4000);
    expect(JSON.parse(response.body)).toMatchObject({ error: 'Query timeout' });
    expect(await sleepers()).toBe(0);
  });
});
