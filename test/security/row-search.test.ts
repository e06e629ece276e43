import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { asTenant, bearer, createKey, tenantSchema } from '#test/security/tenant';
import { call } from '#test/support/http';

/**
 * Finding rows hands a caller names and values that reach SQL: column names (filter, order,
 * select), operators, values, and cursors. Names must only ever be the table's own columns, values
 * only bound parameters, cursors only what we signed: none of them may reach another schema's data.
 */
afterAll(closePool);

let schema: string;
let other: string;
let anon: string;
beforeAll(async () => {
  schema = await tenantSchema('rowfind');
  await asTenant(schema, `INSERT INTO "${schema}".items (name) VALUES ('second')`);
  other = await tenantSchema('rowvictim');
  await asTenant(other, `INSERT INTO "${other}".items (name) VALUES ('victim secret')`);
  ({ key: anon } = await createKey(schema, 'anon', 'finder'));
});

const find = (query: Record<string, string | string[]>) =>
  call(tables, { path: '/api/table/items', query, ...bearer(anon) });

describe('a hostile caller finding rows', () => {
  it.each([
    [{ filter: `"name"" = name OR true OR ""x".eq.1` }],
    [{ filter: `name.eq.x') OR (SELECT true FROM "rowvictim".items) --` }],
    [{ order: `name; SELECT * FROM pg_authid --` }],
    [{ order: `"name"" DESC, (SELECT 1)--"` }],
    [{ select: `name, (SELECT name FROM items LIMIT 1) AS x` }],
    [{ or: `(name.eq.a),(id.gt.0` }],
  ])('gets a 400 or its own rows only for %j', async (query) => {
    const reply = await find(query);

    expect([200, 400]).toContain(reply.status);
    expect(reply.text).not.toContain('victim secret');
    if (reply.status === 200)
      expect(reply.body.data.every((row: { name: string }) => row.name !== 'victim secret')).toBe(true);
  });

  it('cannot name another schema’s table as a column', async () => {
    const reply = await find({ filter: `"${other}.items.name".eq.victim secret` });

    expect([reply.status, reply.body.error]).toEqual([400, 'Unknown column']);
  });

  it('cannot turn the anon key to another schema with a filter', async () => {
    const reply = await call(tables, {
      path: '/api/table/items',
      query: { schema: other, filter: 'name.eq.victim secret' },
      ...bearer(anon),
    });

    expect(reply.status).toBe(403);
  });

  it('cannot forge a cursor whose values would break out of their cast', async () => {
    const page = await find({ order: 'name', limit: '1' });
    const [, mac] = (page.body.nextCursor as string).split('.');
    const payload = Buffer.from(JSON.stringify(["z') OR true --", '1'])).toString('base64url');

    const reply = await find({ order: 'name', after: `${payload}.${mac}` });

    expect([reply.status, reply.body.error]).toEqual([400, 'Invalid cursor']);
  });
});
