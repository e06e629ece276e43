import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { jsonRowTypes } from '#lib/db/json-rows';
import { closePool } from '#lib/db/pool';
import { boundedQuery } from '#lib/db/result-limits';
import { withAdminClient, withServiceClient } from '#test/support/db';
import { call } from '#test/support/http';
import { TcpProxy } from '#test/support/tcp-proxy';

/**
 * A result is capped before it is in memory: a single huge row stops arriving at the limit, and a
 * script keeps no rows of statements before its last.
 */

// This file's own module registry gets its own config and pools, pointed at a counting proxy.
const target = new URL(process.env.DATABASE_URL as string);
const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));

beforeAll(async () => {
  await proxy.up();
  const viaProxy = new URL(target);
  viaProxy.port = String(proxy.port);
  process.env.DATABASE_URL = viaProxy.toString();
});

afterAll(async () => {
  await closePool();
  await proxy.down();
  process.env.DATABASE_URL = target.toString();
});

describe('result memory', () => {
  it('stops reading a single 100 MB row soon after QUERY_MAX_BYTES', async () => {
    jest.setTimeout(60_000);
    await call(query, { method: 'POST', path: '/api/query', body: { sql: 'SELECT 1' } });
    const before = proxy.bytesToClients;

    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: "SELECT repeat('x', 100000000) AS huge" },
    });

    expect(reply.status).toBe(413);
    expect(proxy.bytesToClients - before).toBeLessThan(30_000_000);
  });

  it.each(['csv', 'json'])(
    'stops reading a 100 MB row of a %s export soon after QUERY_MAX_BYTES',
    async (format) => {
      jest.setTimeout(60_000);
      const table = `huge_${format}_${Date.now()}`;
      // The service's own, in public: as the admin's runAs admin SQL makes them.
      await withServiceClient((c) =>
        c.query(`CREATE TABLE public.${table} (id int PRIMARY KEY, v text);
               INSERT INTO public.${table} VALUES (1, repeat('x', 100000000))`),
      );
      try {
        const before = proxy.bytesToClients;

        const reply = await call(tables, { path: `/api/table/${table}/export`, query: { format } });

        expect(reply.status).toBe(413);
        expect(proxy.bytesToClients - before).toBeLessThan(30_000_000);
      } finally {
        await withServiceClient((c) => c.query(`DROP TABLE public.${table}`));
      }
    },
  );

  it('holds QUERY_MAX_BYTES to the exact size of the rows’ JSON, however loosely it is bounded on the way', async () => {
    // Escapes, astral characters and instants: each row's bound is well above its JSON (as the
    // rows leave: lib/db/json-rows).
    const text = `SELECT g, pg_catalog.repeat(E'\\"\\n😀é', g) AS s, timestamptz '2026-01-02 03:04:05+00' + g * interval '1 day' AS at
                    FROM pg_catalog.generate_series(1, 2000) g`;
    const exact = await withAdminClient(async (client) =>
      (await client.query({ text, types: jsonRowTypes })).rows.reduce(
        (bytes, row) => bytes + Buffer.byteLength(JSON.stringify(row)) + 1,
        0,
      ),
    );
    const run = (maxBytes: number) =>
      withAdminClient((client) =>
        boundedQuery(client, { text }, { maxRows: 10_000, maxBytes }, () => undefined),
      );

    expect((await run(exact))[0]?.rows).toHaveLength(2000);
    await expect(run(exact - 1)).rejects.toThrow('QUERY_MAX_BYTES');
  });

  it('keeps no rows of a script’s earlier statements', async () => {
    const results = await withAdminClient((client) =>
      boundedQuery(
        client,
        { text: 'SELECT g FROM generate_series(1, 1000) g; SELECT 1 AS last' },
        { maxRows: 10_000, maxBytes: 3_000_000 },
        () => undefined,
      ),
    );

    expect(results.map((result) => result.rows.length)).toEqual([0, 1]);
  });
});

describe('what a tenant session returns', () => {
  it('a row a planted trigger blows up on insert is refused, not held', async () => {
    const { handler: rows } = await import('#functions/rows');
    const schema = `big_${Date.now()}`;
    await call(query, {
      method: 'POST',
      path: '/api/query',
      body: {
        runAs: 'admin',
        sql: `CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.items (id serial PRIMARY KEY, v text);
              CREATE FUNCTION ${schema}.blow() RETURNS trigger LANGUAGE plpgsql AS $$
              BEGIN NEW.v := repeat('x', 100000000); RETURN NEW; END $$;
              CREATE TRIGGER blow BEFORE INSERT ON ${schema}.items FOR EACH ROW EXECUTE FUNCTION ${schema}.blow()`,
      },
    });
    try {
      const before = proxy.bytesToClients;

      const reply = await call(rows, {
        method: 'POST',
        path: '/api/table/items/row',
        body: { data: {}, schema },
      });

      expect(reply.status).toBe(413);
      expect(proxy.bytesToClients - before).toBeLessThan(30_000_000);
    } finally {
      await withAdminClient((c) => c.query(`DROP SCHEMA ${schema} CASCADE`));
    }
  });

  it('a huge error message is cut to a few KB in the answer', async () => {
    const reply = await call(query, {
      method: 'POST',
      path: '/api/query',
      body: { sql: "DO $$ BEGIN RAISE EXCEPTION '%', repeat('e', 5000000); END $$" },
    });

    expect(reply.status).toBe(400);
    expect(reply.text.length).toBeLessThan(10_000);
  });
});
