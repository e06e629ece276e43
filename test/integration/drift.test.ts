import { handler as schemas } from '#functions/schemas';
import { handler as tenants } from '#functions/tenants';
import { closePool } from '#lib/db/pool';
import { asTenant } from '#test/security/tenant';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freshSchema } from '#test/support/tables';

afterAll(closePool);

const cloneOf = async (template: string) => {
  const schemaName = uniqueName('drift');
  const reply = await call(schemas, {
    method: 'POST',
    path: '/api/schema/create',
    body: { schemaName, password: 'schema-pass-1', template },
  });
  if (reply.status !== 201) throw new Error(reply.text);
  return schemaName;
};

async function templateWithCopies() {
  const template = await freshSchema('dtmpl');
  await asTenant(
    template,
    `CREATE TYPE mood AS ENUM ('calm', 'loud');
     CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL DEFAULT 'x', mood mood);
     CREATE INDEX items_name ON items (name);
     CREATE VIEW named AS SELECT id, name FROM items;
     CREATE FUNCTION shout(t text) RETURNS text LANGUAGE sql SET search_path = ${template} AS $$ SELECT upper(t) $$`,
  );
  return { template, same: await cloneOf(template), changed: await cloneOf(template) };
}

describe('drift from a template', () => {
  it('gives schemas of one shape one fingerprint, and says which copies drifted', async () => {
    const { template, same, changed } = await templateWithCopies();
    await asTenant(changed, 'ALTER TABLE items ADD COLUMN extra int');

    const reply = await call(tenants, { path: '/api/drift', query: { template } });

    expect(reply.status).toBe(200);
    const byName = Object.fromEntries(reply.body.schemas.map((s: { schema: string }) => [s.schema, s]));
    expect(Object.keys(byName).sort()).toEqual([template, same, changed].sort());
    expect(byName[template]).toMatchObject({ template: null, drifted: null });
    expect(byName[same]).toMatchObject({
      template,
      drifted: false,
      fingerprint: byName[template].fingerprint,
    });
    expect(byName[changed]).toMatchObject({ template, drifted: true });
    expect(byName[same].objects).toBeGreaterThanOrEqual(9);
  });

  it('names what is missing, extra and different, with both definitions', async () => {
    const { template, changed } = await templateWithCopies();
    await asTenant(
      changed,
      `ALTER TABLE items ADD COLUMN extra int; DROP INDEX items_name;
       ALTER TABLE items ALTER COLUMN name SET DEFAULT 'y'`,
    );

    const reply = await call(tenants, { path: `/api/drift/${changed}` });

    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ schema: changed, against: template, same: false });
    expect(reply.body.missing).toEqual([
      {
        kind: 'index',
        name: 'items_name',
        definition: 'CREATE INDEX items_name ON items USING btree (name)',
      },
    ]);
    expect(reply.body.extra).toEqual([{ kind: 'column', name: 'items.extra', definition: 'integer' }]);
    expect(reply.body.different).toEqual([
      {
        kind: 'column',
        name: 'items.name',
        expected: "text NOT NULL DEFAULT 'x'::text",
        actual: "text NOT NULL DEFAULT 'y'::text",
      },
    ]);
  });

  it('compares any two schemas, and says so when there is nothing to compare with', async () => {
    const { template, same } = await templateWithCopies();
    const bare = await freshSchema('dbare');

    const equal = await call(tenants, { path: `/api/drift/${template}`, query: { against: same } });
    const noTemplate = await call(tenants, { path: `/api/drift/${bare}` });
    const missing = await call(tenants, {
      path: `/api/drift/${same}`,
      query: { against: uniqueName('ghost') },
    });

    expect(equal.body).toMatchObject({ same: true, missing: [], extra: [], different: [] });
    expect([noTemplate.status, noTemplate.body.error]).toEqual([404, 'No template']);
    expect([missing.status, missing.body.error]).toEqual([404, 'Schema not found']);
    const system = await call(tenants, { path: '/api/drift/pg_catalog', query: { against: same } });
    expect([system.status, system.body.error]).toEqual([400, 'System schema']);
  });
});
