import { handler as indexes } from '#functions/indexes';
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
import { withSetting } from '#test/support/settings';

/**
 * Index builds run as the schema's role: a tenant may write the `where` predicate of a partial
 * index, and plant the functions it calls; neither may run with the service's rights, nor leave
 * a half-made index when refused. Listing indexes reads the catalog on the service's pool: a
 * tenant holding its table locked must not stall it.
 */
afterAll(closePool);
withSetting('SCHEMA_LOCK_TIMEOUT_MS', '300');

let schema: string;
beforeAll(async () => {
  schema = await tenantSchema('idxsec');
  await asTenant(
    schema,
    `CREATE INDEX items_lower ON "${schema}".items (lower(name)) WHERE id > 0;
     CREATE FUNCTION "${schema}".planted(i int) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
       BEGIN PERFORM "${schema}".spy(); RETURN true; END $$;
     CREATE FUNCTION "${schema}".peek(i int) RETURNS boolean IMMUTABLE LANGUAGE plpgsql AS $$
       BEGIN RETURN (SELECT count(*) FROM _dbadmin.api_keys) >= 0; END $$;`,
  );
});

const create = (body: Record<string, unknown>, auth: object = {}) =>
  call(indexes, { method: 'POST', path: '/api/table/items/indexes', body: { schema, ...body }, ...auth });

const indexNames = () =>
  withAdminClient(async (c) =>
    (
      await c.query(`SELECT indexrelid::regclass::text AS name FROM pg_index WHERE indrelid = $1::regclass`, [
        `"${schema}".items`,
      ])
    ).rows.map((r) => r.name as string),
  );

describe('a hostile tenant and its indexes', () => {
  it('a where predicate calling a planted function runs with the schema’s rights only', async () => {
    const reply = await create({ name: 'spied', columns: ['name'], where: `"${schema}".planted(id)` });

    expect(reply.status).toBe(200);
    expectTenantRightsOnly(await sightings(schema));
  });

  it.each([
    [false, /permission denied for schema _dbadmin/],
    [
      true,
      /permission denied for schema _dbadmin.*; the invalid index "\w+" the failed build left was dropped/,
    ],
  ])(
    'a predicate reaching past the schema is refused, and leaves no index (concurrently: %s)',
    async (concurrently, message) => {
      const before = await indexNames();

      const reply = await create({ columns: ['name'], where: `"${schema}".peek(id)`, concurrently });

      expect(reply.status).toBe(403);
      expect(reply.body.message).toMatch(message);
      expect(await indexNames()).toEqual(before);
    },
  );

  it('a key of another schema gets 403, on every index route', async () => {
    const other = await tenantSchema('idxother');
    const { key } = await createKey(other, 'service_role', 'other');
    const auth = bearer(key);

    const replies = [
      await call(indexes, { path: '/api/table/items/indexes', query: { schema }, ...auth }),
      await call(indexes, { path: '/api/table/items/indexes/progress', query: { schema }, ...auth }),
      await create({ columns: ['name'], dryRun: true }, auth),
      await call(indexes, {
        method: 'DELETE',
        path: '/api/table/items/indexes/items_lower',
        query: { schema, dryRun: 'true' },
        ...auth,
      }),
    ];

    expect(replies.map((r) => r.status)).toEqual([403, 403, 403, 403]);
  });

  it('an anon key lists indexes but builds and drops none', async () => {
    const { key } = await createKey(schema, 'anon', 'idx-anon');
    const auth = bearer(key);

    const listed = await call(indexes, { path: '/api/table/items/indexes', query: { schema }, ...auth });
    const built = await create({ columns: ['name'] }, auth);
    const dropped = await call(indexes, {
      method: 'DELETE',
      path: '/api/table/items/indexes/items_lower',
      query: { schema },
      ...auth,
    });

    expect([listed.status, built.status, dropped.status]).toEqual([200, 403, 403]);
    expect(await indexNames()).toContain(`${schema}.items_lower`);
  });

  it('holding its table in ACCESS EXCLUSIVE stalls neither the index list nor build progress', async () => {
    const holder = loginAs(`${schema}_user`, 'schema-pass-1');
    await holder.connect();
    await holder.query(`BEGIN; LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`);
    try {
      const started = Date.now();
      const listed = await call(indexes, { path: '/api/table/items/indexes', query: { schema } });
      const progress = await call(indexes, { path: '/api/table/items/indexes/progress', query: { schema } });

      expect(listed.status).toBe(200);
      expect(listed.body.definitionsRead).toBe(false);
      expect(listed.body.indexes).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            name: 'items_lower',
            columns: [{ column: null, expression: null }],
            partial: true,
            valid: true,
            definition: null,
          }),
        ]),
      );
      expect(progress.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2000);
    } finally {
      await holder.end();
    }
  });
});
