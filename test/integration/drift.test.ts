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

describe('the SQL that brings a drifted schema back in line', () => {
  /** A template with one of each kind the fix writes, and a copy of it drifted in each. */
  async function drifted() {
    const template = await freshSchema('dfix');
    await asTenant(
      template,
      `CREATE TYPE mood AS ENUM ('calm', 'ok', 'loud');
       CREATE SEQUENCE ticket START 100;
       CREATE FUNCTION shout(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT upper(t) $$;
       CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.name := shout(NEW.name); RETURN NEW; END $$;
       CREATE TABLE owners (id int PRIMARY KEY);
       CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL DEFAULT 'x', mood mood, owner int,
                           price numeric(10,2) CHECK (price >= 0));
       ALTER TABLE items ADD CONSTRAINT items_owner FOREIGN KEY (owner) REFERENCES owners (id);
       CREATE INDEX items_name ON items (lower(name));
       CREATE TRIGGER stamp BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION stamp();
       CREATE VIEW named AS SELECT id, name FROM items;
       CREATE TABLE notes (id serial PRIMARY KEY, body text)`,
    );
    const copy = await cloneOf(template);
    await asTenant(
      copy,
      `ALTER TABLE items DROP CONSTRAINT items_owner;
       DROP INDEX items_name;
       ALTER TABLE items ALTER COLUMN name DROP NOT NULL, ALTER COLUMN name SET DEFAULT 'y';
       ALTER TABLE items ALTER COLUMN price TYPE numeric(12,3);
       ALTER TABLE items ADD COLUMN extra int;
       ALTER TABLE items DISABLE TRIGGER stamp;
       ALTER TYPE mood RENAME TO mood_old;
       CREATE TYPE mood AS ENUM ('calm', 'loud');
       ALTER TABLE items ALTER COLUMN mood TYPE mood USING mood::text::mood;
       DROP TYPE mood_old;
       CREATE OR REPLACE VIEW named AS SELECT id, name, mood FROM items;
       CREATE OR REPLACE FUNCTION shout(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT lower(t) $$;
       DROP TABLE notes;
       CREATE TABLE scratch (id int);
       DROP SEQUENCE ticket`,
    );
    return { template, copy };
  }

  const post = (path: string, body: unknown) => call(schemas, { method: 'POST', path, body });

  it('is written, previewed with its locks, and applied as a migration leaves no drift', async () => {
    const { template, copy } = await drifted();
    const before = await call(tenants, { path: `/api/drift/${copy}` });
    expect(before.body.same).toBe(false);

    const fix = await call(tenants, { path: `/api/drift/${copy}/fix` });

    expect(fix.status).toBe(200);
    expect(fix.body).toMatchObject({ schema: copy, against: template, destructive: true, notWritten: [] });
    expect(fix.body.sql).toMatch(/DROP TABLE "?scratch"? CASCADE/);
    expect(fix.body.sql).toMatch(/ALTER TYPE "mood" ADD VALUE 'ok' AFTER 'calm'/);
    const locks = fix.body.statements.flatMap((s: { locks: Array<{ level: string }> }) => s.locks);
    expect(locks.map((l: { level: string }) => l.level)).toContain('ACCESS EXCLUSIVE');

    const created = await post('/api/migrations', {
      name: uniqueName('fix'),
      sql: fix.body.sql,
      target: { schemas: [copy] },
    });
    expect(created.status).toBe(201);
    let run = await post(`/api/migrations/${created.body.id}/run`, {});
    while (!run.body.done) run = await post(`/api/migrations/${created.body.id}/run`, {});
    expect(run.body.counts).toMatchObject({ applied: 1, failed: 0 });

    const after = await call(tenants, { path: `/api/drift/${copy}` });
    expect(after.body).toMatchObject({ same: true, missing: [], extra: [], different: [] });
    const again = await call(tenants, { path: `/api/drift/${copy}/fix` });
    expect(again.body).toMatchObject({ sql: '', statements: [], destructive: false });
  });

  it('lists what it does not write, and refuses what it cannot read', async () => {
    const { template, copy } = await drifted();
    await asTenant(
      template,
      `ALTER TABLE owners ENABLE ROW LEVEL SECURITY; CREATE POLICY mine ON owners USING (id > 0);
       CREATE FUNCTION count_items() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM ${template}.items $$;
       CREATE FUNCTION pinned() RETURNS int LANGUAGE sql SET search_path = ${template} AS $$ SELECT 1 $$`,
    );
    const fix = await call(tenants, { path: `/api/drift/${copy}/fix` });
    expect(fix.status).toBe(200);
    expect(fix.body.notWritten).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'policy', name: 'owners.mine' }),
        expect.objectContaining({ kind: 'function', name: 'count_items()' }),
        expect.objectContaining({ kind: 'statement', name: expect.stringContaining('pinned()') }),
      ]),
    );
    expect(
      (await call(tenants, { path: '/api/drift/missing_schema_x/fix', query: { against: template } })).status,
    ).toBe(404);
    expect((await call(tenants, { path: `/api/drift/${template}/fix` })).status).toBe(404);
    const missing = await call(tenants, { path: '/api/drift/missing_schema_x/fix' });
    expect([missing.status, missing.body.error]).toEqual([404, 'Schema not found']);
  });
});
