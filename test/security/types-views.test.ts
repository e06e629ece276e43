import { handler as constraints } from '#functions/constraints';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import {
  asTenant,
  bearer,
  createKey,
  expectTenantRightsOnly,
  loginAs,
  sightings,
  tenantSchema,
} from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * Enum types are made and grown as the schema's role, their values written into CREATE TYPE and
 * ALTER TYPE as literals (neither takes parameters): a value must stay a value, whatever quotes it
 * holds. Types and views are listed on the service's pool or in the schema's session, never
 * another schema's, and a tenant holding a view's table locked must not stall the list.
 */
afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await tenantSchema('typesec');
  await asTenant(
    schema,
    `CREATE TYPE "${schema}".mood AS ENUM ('calm');
     CREATE VIEW "${schema}".named AS SELECT id, name FROM "${schema}".items WHERE id > 0;`,
  );
});

const createType = (body: Record<string, unknown>, auth: object = {}) =>
  call(constraints, { method: 'POST', path: '/api/types', body: { schema, ...body }, ...auth });
const addValue = (type: string, body: Record<string, unknown>, auth: object = {}) =>
  call(constraints, {
    method: 'POST',
    path: `/api/types/${type}/values`,
    body: { schema, ...body },
    ...auth,
  });

const labels = (type: string) =>
  withAdminClient(async (c) =>
    (
      await c.query(
        `SELECT e.enumlabel FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid
          JOIN pg_namespace n ON n.oid = t.typnamespace
         WHERE n.nspname = $1 AND t.typname = $2 ORDER BY e.enumsortorder`,
        [schema, type],
      )
    ).rows.map((r) => r.enumlabel as string),
  );

describe('a hostile tenant and its types and views', () => {
  it('a key of another schema gets 403, on every type and view route', async () => {
    const other = await tenantSchema('typeother');
    const { key } = await createKey(other, 'service_role', 'other');
    const auth = bearer(key);

    const replies = [
      await call(constraints, { path: '/api/types', query: { schema }, ...auth }),
      await call(constraints, { path: '/api/views', query: { schema }, ...auth }),
      await call(constraints, { path: '/api/functions', query: { schema }, ...auth }),
      await createType({ name: 'stolen', values: ['a'], dryRun: true }, auth),
      await addValue('mood', { value: 'angry', dryRun: true }, auth),
    ];

    expect(replies.map((r) => r.status)).toEqual([403, 403, 403, 403, 403]);
    expect(await labels('mood')).toEqual(['calm']);
  });

  it('an anon key lists types and views but creates and grows no type', async () => {
    const { key } = await createKey(schema, 'anon', 'type-anon');
    const auth = bearer(key);

    const types = await call(constraints, { path: '/api/types', query: { schema }, ...auth });
    const views = await call(constraints, { path: '/api/views', query: { schema }, ...auth });
    const created = await createType({ name: 'anon_made', values: ['a'] }, auth);
    const grown = await addValue('mood', { value: 'anon' }, auth);

    expect([types.status, views.status, created.status, grown.status]).toEqual([200, 200, 403, 403]);
    expect(await labels('anon_made')).toEqual([]);
    expect(await labels('mood')).toEqual(['calm']);
  });

  it.each([`x'); DROP TABLE items; --`, `x', 'y`, `a\\'); DROP TABLE items; --`, `it''s`])(
    'an enum value with quotes stays one value and runs nothing: %s',
    async (value) => {
      const name = `inj_${Math.random().toString(36).slice(2, 8)}`;

      const created = await createType({ name, values: [value] });
      const added = await addValue(name, { value: `${value}2`, before: value });

      expect([created.status, added.status]).toEqual([200, 200]);
      expect(await labels(name)).toEqual([`${value}2`, value]);
      const items = await withAdminClient((c) =>
        c.query(`SELECT to_regclass($1) AS t`, [`"${schema}".items`]),
      );
      expect(items.rows[0].t).not.toBeNull();
    },
  );

  it('holding a view’s table in ACCESS EXCLUSIVE stalls neither the view list nor the type list', async () => {
    const holder = loginAs(`${schema}_user`, 'schema-pass-1');
    await holder.connect();
    await holder.query(`BEGIN; LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`);
    try {
      const started = Date.now();
      const views = await call(constraints, { path: '/api/views', query: { schema } });
      const types = await call(constraints, { path: '/api/types', query: { schema } });

      expect(views.status).toBe(200);
      expect(views.body.definitionsRead).toBe(false);
      expect(views.body.views).toEqual([
        expect.objectContaining({ name: 'named', materialized: false, definition: null }),
      ]);
      expect(types.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      await holder.end();
    }
  });
});

describe('a hostile tenant’s planted view, read and refreshed', () => {
  let own: string;
  beforeAll(async () => {
    own = await tenantSchema('viewspy');
    await asTenant(
      own,
      `CREATE VIEW "${own}".watched AS SELECT id, "${own}".spy() AS seen FROM "${own}".items;
       CREATE MATERIALIZED VIEW "${own}".kept AS SELECT id, "${own}".spy() AS seen FROM "${own}".items;`,
    );
    await sightings(own);
  });

  it.each([
    ['the admin', () => ({})],
    ['a service key', async () => bearer((await createKey(own, 'service_role', 'refresher')).key)],
  ])('refreshing runs the view’s query with the schema’s rights only, for %s', async (_, auth) => {
    const reply = await call(constraints, {
      method: 'POST',
      path: '/api/view/kept/refresh',
      body: { schema: own },
      ...(await auth()),
    });

    expect(reply.status).toBe(200);
    expectTenantRightsOnly(await sightings(own));
  });

  it('reading a view’s rows in the grid runs its functions with the schema’s rights only', async () => {
    const reply = await call(tables, { path: '/api/table/watched', query: { schema: own } });

    expect(reply.status).toBe(200);
    expect(reply.body.data).toEqual([{ id: 1, seen: true }]);
    expectTenantRightsOnly(await sightings(own));
  });

  it('an anon key may read a view but not refresh it, and another schema’s key may do neither', async () => {
    const anon = bearer((await createKey(own, 'anon', 'viewer')).key);
    const other = bearer((await createKey(await tenantSchema('viewother'), 'service_role', 'other')).key);

    const read = await call(tables, { path: '/api/table/kept', query: { schema: own }, ...anon });
    const refreshed = await call(constraints, {
      method: 'POST',
      path: '/api/view/kept/refresh',
      body: { schema: own },
      ...anon,
    });
    const stolen = await call(tables, { path: '/api/table/kept', query: { schema: own }, ...other });

    expect(read.status).toBe(200);
    expect(refreshed.status).toBe(403);
    expect(stolen.status).toBe(403);
  });
});
