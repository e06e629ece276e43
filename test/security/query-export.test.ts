import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, serviceRole, tenantSchema } from '#test/security/tenant';
import { withAdminClient, withOwnerClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * POST /api/query/export runs the caller's query inside our COPY, sent with the simple protocol,
 * as the schema's role in a READ ONLY transaction that is always rolled back: nothing the query or
 * the tenant's code it calls does is kept, it never runs with the service's rights, and SQL that
 * tries to close our COPY and add statements of its own is refused before anything runs.
 */

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await tenantSchema('qexportsec');
  await withOwnerClient(schema, (c) =>
    c.query(`
      CREATE FUNCTION "${schema}".whoami() RETURNS text LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'ran as %', session_user; END $$;`),
  );
});

const state = () =>
  withAdminClient(async (c) => {
    const { rows } = await c.query(
      `SELECT (SELECT count(*) FROM "${schema}".items)::int AS items,
              (SELECT count(*) FROM pg_catalog.pg_largeobject_metadata)::int AS large_objects`,
    );
    return rows[0];
  });

describe('a hostile query sent to the export', () => {
  it.each([
    ['the admin', () => ({})],
    ['a service key', async () => bearer((await createKey(schema, 'service_role', 'exporter')).key)],
  ])('keeps nothing it writes, for %s', async (_, auth) => {
    const as = await auth();
    const before = await state();
    const replies = [
      await call(query, {
        method: 'POST',
        path: '/api/query/export',
        body: { schema, sql: 'WITH gone AS (DELETE FROM items RETURNING *) SELECT * FROM gone' },
        ...as,
      }),
      await call(query, {
        method: 'POST',
        path: '/api/query/export',
        body: { schema, sql: 'SELECT lo_create(0)' },
        ...as,
      }),
      await call(query, {
        method: 'POST',
        path: '/api/query/export',
        body: { schema, sql: 'SELECT * FROM items FOR UPDATE' },
        ...as,
      }),
    ];

    expect(replies.map((r) => r.status).every((status) => status < 500)).toBe(true);
    expect(await state()).toEqual(before);
  });

  it('runs the tenant’s function as the schema’s login, never the service’s', async () => {
    const reply = await call(query, {
      method: 'POST',
      path: '/api/query/export',
      body: { schema, sql: `SELECT "${schema}".whoami()` },
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/ran as /);
    expect(reply.body.message).not.toContain(`ran as ${serviceRole()}`);
  });

  it.each([
    ['closing our COPY', 'SELECT 1) AS q) TO STDOUT; DROP TABLE items; COPY (SELECT * FROM (SELECT 1'],
    ['a comment to the end', 'SELECT 1 --'],
    ['a block comment left open', 'SELECT 1 /*'],
    ['a quote left open', "SELECT 'a"],
  ])('refuses %s, or keeps it inside the one query, and drops nothing', async (_, sql) => {
    const before = await state();
    const reply = await call(query, { method: 'POST', path: '/api/query/export', body: { schema, sql } });

    expect(reply.status).toBeLessThan(500);
    if (reply.status === 200) expect(reply.text).toBe('?column?\n1\n');
    expect(await state()).toEqual(before);
  });

  it('another schema’s key reaches none of it', async () => {
    const other = await tenantSchema('qexportother');
    const { key } = await createKey(other, 'service_role', 'other');

    const reply = await call(query, {
      method: 'POST',
      path: '/api/query/export',
      body: { schema, sql: 'SELECT * FROM items' },
      ...bearer(key),
    });

    expect(reply.status).toBe(403);
  });
});
