import { handler as keys } from '#functions/keys';
import { handler as schemas } from '#functions/schemas';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { createKey, plantCanary, serviceRole, sightings, sqlAs } from '#test/security/tenant';
import { withAdminClient, withServiceClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freshSchema } from '#test/support/tables';

/**
 * The service's own SQL (catalog reads, key management, migrations, license cache) resolves
 * functions and operators through its search path: a tenant who can create an operator there
 * that fits better than pg_catalog's would run code as the service.
 */

afterAll(closePool);

/** An operator `||(name, name)` that records who used it: a better fit than pg_catalog's text || text. */
const hijack = (schema: string) => `
  CREATE FUNCTION "${schema}".spy_concat(name, name) RETURNS text LANGUAGE plpgsql AS $$
  BEGIN PERFORM "${schema}".spy(); RETURN $1::text || $2::text; END $$`;
const operator = (schema: string) =>
  `CREATE OPERATOR "${schema}".|| (LEFTARG = name, RIGHTARG = name, FUNCTION = "${schema}".spy_concat)`;

/** Every read the admin makes that runs catalog SQL. */
async function adminCatalogReads(schema: string): Promise<number[]> {
  const replies = [
    await call(schemas, { path: '/api/schemas' }),
    await call(tables, { path: '/api/tables', query: { schema } }),
    await call(tables, { path: '/api/schema', query: { schema } }),
    await call(tables, { path: '/api/table/items', query: { schema } }),
    await call(keys, { path: `/api/project/${schema}/keys` }),
  ];
  return replies.map((reply) => reply.status);
}

describe('the service resolves no tenant-made operator or function', () => {
  it('ignores an operator a service_role key of public plants in public', async () => {
    const { key } = await createKey('public', 'service_role', uniqueName('hijack'));
    const victim = await freshSchema('hij');
    await call(tables, {
      method: 'POST',
      path: '/api/table/create',
      body: {
        tableName: 'items',
        schema: victim,
        columns: [{ name: 'id', type: 'INTEGER', primaryKey: true }],
      },
    });
    const canary = uniqueName('canary');
    const planted = [];
    try {
      await withAdminClient((c) => c.query(`CREATE SCHEMA "${canary}"; ${plantCanary(canary)}`));
      for (const sql of [
        hijack('public').replace(/"public"\.spy\(\)/, `"${canary}".spy()`),
        operator('public'),
      ]) {
        planted.push((await sqlAs(key, sql)).status);
      }
      expect(planted).toEqual([200, 200]);
      // The operator is live: a plain session with the default search path picks it.
      await withAdminClient((c) => c.query("SET search_path = public; SELECT 'a'::name || 'b'"));
      expect((await sightings(canary)).length).toBe(1);

      expect(await adminCatalogReads(victim)).toEqual([200, 200, 200, 200, 200]);

      expect(await sightings(canary)).toEqual([]);
    } finally {
      await withAdminClient((c) =>
        c.query(`DROP OPERATOR IF EXISTS public.|| (name, name); DROP FUNCTION IF EXISTS public.spy_concat(name, name);
                 DROP SCHEMA IF EXISTS "${canary}" CASCADE`),
      );
    }
  });

  it('ignores an operator planted in a schema named like the service role ("$user" in the default search path)', async () => {
    const role = serviceRole();
    const victim = await freshSchema('usr');
    // Made outside dbadmin (the API refuses the name): a tenant who can write there plants the operator.
    await withAdminClient(async (c) => {
      await c.query(`CREATE SCHEMA IF NOT EXISTS "${role}"`);
      await c.query(`${plantCanary(role)}; ${hijack(role)}; ${operator(role)}`);
    });
    try {
      // A client of the login with PostgreSQL's default search path would pick it up.
      await withServiceClient((c) => c.query(`SET search_path = "$user", public; SELECT 'a'::name || 'b'`));
      expect((await sightings(role)).length).toBe(1);

      expect(await adminCatalogReads(victim)).toEqual([200, 200, 200, 404, 200]);

      expect(await sightings(role)).toEqual([]);
    } finally {
      await withAdminClient((c) => c.query(`DROP SCHEMA "${role}" CASCADE`));
    }
  });
});

async function createSchemaAs(schemaName: string): Promise<{ status: number; message?: string }> {
  const reply = await call(schemas, {
    method: 'POST',
    path: '/api/schema/create',
    body: { schemaName, password: 'long-enough-1' },
  });
  return { status: reply.status, message: reply.body.message };
}

describe('schema names that would land on a search path', () => {
  it('refuses a schema named like an existing role, the service role included', async () => {
    const other = uniqueName('someone');
    await withAdminClient((c) => c.query(`CREATE ROLE "${other}"`));

    for (const name of [serviceRole(), other]) {
      const reply = await call(schemas, {
        method: 'POST',
        path: '/api/schema/create',
        body: { schemaName: name, password: 'long-enough-1' },
      });
      expect({ name, status: reply.status }).toEqual({ name, status: 400 });
      expect(reply.body.message).toMatch(/role/);
    }
  });

  it('refuses a schema named in any role’s default search path', async () => {
    const role = uniqueName('pathed');
    const target = uniqueName('target');
    await withAdminClient((c) =>
      c.query(`CREATE ROLE "${role}"; ALTER ROLE "${role}" SET search_path = "${target}", public`),
    );

    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: target, password: 'long-enough-1' },
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/search path/);
  });

  // The service remembers the settings it has read and reads only those written since (lib/db/search-paths).
  it('refuses a schema named in a search path set after the service last read them, in any way it is written', async () => {
    await freshSchema('seen_first');
    const role = uniqueName('later');
    const [quoted, listed] = [uniqueName('quoted'), uniqueName('listed')];
    await withAdminClient((c) => c.query(`CREATE ROLE "${role}"`));
    await createSchemaAs(uniqueName('between'));
    await withAdminClient((c) => c.query(`ALTER ROLE "${role}" SET search_path = public, "${quoted}"`));
    expect(await createSchemaAs(quoted)).toMatchObject({
      status: 400,
      message: expect.stringMatching(/search path/),
    });

    await withAdminClient((c) => c.query(`ALTER ROLE "${role}" SET search_path = pg_catalog,${listed}`));
    expect(await createSchemaAs(quoted)).toMatchObject({ status: 201 });
    expect(await createSchemaAs(listed)).toMatchObject({
      status: 400,
      message: expect.stringMatching(/search path/),
    });
  });

  it('forgets a search path once its role is dropped', async () => {
    const role = uniqueName('gone');
    const target = uniqueName('freed');
    await withAdminClient((c) =>
      c.query(`CREATE ROLE "${role}"; ALTER ROLE "${role}" SET search_path = "${target}"`),
    );
    expect(await createSchemaAs(target)).toMatchObject({ status: 400 });

    await withAdminClient((c) => c.query(`DROP ROLE "${role}"`));
    expect(await createSchemaAs(target)).toMatchObject({ status: 201 });
  });

  it('refuses a schema whose roles would be named like another schema', async () => {
    const base = uniqueName('twin');
    const taken = `${base}_anon`;
    await withAdminClient((c) => c.query(`CREATE SCHEMA "${taken}"`));

    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: base, password: 'long-enough-1' },
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toContain(taken);
  });
});
