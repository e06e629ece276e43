import { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import {
  asTenant,
  createKey,
  expectTenantRightsOnly,
  RECORD,
  sightings,
  sqlAs,
  tenantSchema,
} from '#test/security/tenant';
import { call } from '#test/support/http';

/**
 * Code a tenant plants in its schema (through a service_role key or its own database login)
 * runs whenever the admin's requests touch that schema's data. It must run with the tenant's
 * rights, never with the service's: each test plants one kind, makes the admin's request that
 * fires it, and looks at who ran it.
 */

afterAll(closePool);

const insert = (schema: string, data: Record<string, unknown> = { name: 'x' }, table = 'items') =>
  call(rows, { method: 'POST', path: `/api/table/${table}/row`, body: { data, schema } });

describe('code planted in a tenant schema never runs as the service', () => {
  it('a trigger made with a service_role key fires on the admin insert, update and delete as the tenant', async () => {
    const schema = await tenantSchema('trg');
    const { key } = await createKey(schema, 'service_role');
    const planted = [
      await sqlAs(
        key,
        `CREATE FUNCTION "${schema}".on_write() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN ${RECORD(schema)}; RETURN coalesce(NEW, OLD); END $$`,
      ),
      await sqlAs(
        key,
        `CREATE TRIGGER on_write BEFORE INSERT OR UPDATE OR DELETE ON "${schema}".items
         FOR EACH ROW EXECUTE FUNCTION "${schema}".on_write()`,
      ),
    ];
    expect(planted.map((reply) => reply.status)).toEqual([200, 200]);

    const inserted = await insert(schema);
    const updated = await call(rows, {
      method: 'PATCH',
      path: `/api/table/items/${inserted.body.row.id}`,
      body: { column: 'name', value: 'y', schema },
    });
    const deleted = await call(rows, {
      method: 'DELETE',
      path: `/api/table/items/row/${inserted.body.row.id}`,
      query: { schema },
    });

    expect([inserted.status, updated.status, deleted.status]).toEqual([201, 200, 200]);
    const seen = await sightings(schema);
    expect(seen).toHaveLength(3);
    expectTenantRightsOnly(seen);
  });

  it('a column default runs on the admin insert as the tenant', async () => {
    const schema = await tenantSchema('dflt');
    await asTenant(
      schema,
      `ALTER TABLE "${schema}".items ALTER COLUMN name SET DEFAULT "${schema}".spy_text()`,
    );

    expect((await insert(schema, {})).status).toBe(201);

    expectTenantRightsOnly(await sightings(schema));
  });

  it('a CHECK constraint is copied and evaluated by clone with data as the tenant', async () => {
    const schema = await tenantSchema('chk');
    await asTenant(schema, `ALTER TABLE "${schema}".items ADD CONSTRAINT watched CHECK ("${schema}".spy())`);
    await sightings(schema);

    const cloned = await call(tables, {
      method: 'POST',
      path: '/api/table/items/clone',
      body: { newTableName: 'items_copy', copyData: true, schema },
    });

    expect(cloned.status).toBe(201);
    expectTenantRightsOnly(await sightings(schema));
  });

  it('a domain CHECK on the primary key runs on the admin bulk delete as the tenant', async () => {
    const schema = await tenantSchema('dom');
    await asTenant(
      schema,
      `CREATE DOMAIN "${schema}".watched_id AS integer CHECK ("${schema}".spy());
       CREATE TABLE "${schema}".tagged (id "${schema}".watched_id PRIMARY KEY, label text);
       INSERT INTO "${schema}".tagged VALUES (1, 'a'), (2, 'b');`,
    );
    await sightings(schema);

    const deleted = await call(rows, {
      method: 'POST',
      path: '/api/table/tagged/rows/delete',
      body: { rowIds: [1, 2], schema },
    });

    expect(deleted.status).toBe(200);
    expect(deleted.body.deletedCount).toBe(2);
    expectTenantRightsOnly(await sightings(schema));
  });

  it('a rule runs on the admin insert as the tenant', async () => {
    const schema = await tenantSchema('rule');
    await asTenant(schema, `CREATE RULE watched AS ON INSERT TO "${schema}".items DO ALSO ${RECORD(schema)}`);

    expect((await insert(schema)).status).toBe(201);

    expectTenantRightsOnly(await sightings(schema));
  });

  it('a row-level security policy runs on the admin page read and export as the tenant', async () => {
    const schema = await tenantSchema('rls');
    await asTenant(
      schema,
      `ALTER TABLE "${schema}".items ENABLE ROW LEVEL SECURITY;
       ALTER TABLE "${schema}".items FORCE ROW LEVEL SECURITY;
       CREATE POLICY watched ON "${schema}".items USING ("${schema}".spy());`,
    );

    const page = await call(tables, { path: '/api/table/items', query: { schema } });
    const exported = await call(tables, { path: '/api/table/items/export', query: { schema } });

    expect(page.status).toBe(200);
    expect(page.body.data).toHaveLength(1);
    expect(exported.status).toBe(200);
    expectTenantRightsOnly(await sightings(schema));
  });

  it('an expression index runs when the admin adds a column whose default rewrites the table, as the tenant', async () => {
    const schema = await tenantSchema('idx');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".watched(text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
       BEGIN PERFORM "${schema}".spy(); RETURN $1; END $$;
       CREATE INDEX items_watched ON "${schema}".items ("${schema}".watched(name));`,
    );
    await sightings(schema);

    const added = await call(tables, {
      method: 'POST',
      path: '/api/table/items/column',
      body: { columnName: 'token', dataType: 'UUID', defaultValue: 'gen_random_uuid()', schema },
    });

    expect(added.status).toBe(201);
    expectTenantRightsOnly(await sightings(schema));
  });
});
