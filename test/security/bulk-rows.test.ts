import { handler as rows } from '#functions/rows';
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
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * POST /api/table/:tableName/rows writes many rows in one statement, with an upsert: whatever a
 * tenant planted on the table (triggers, defaults) runs with the tenant's rights only, and no
 * request can make the service send PostgreSQL a statement it cannot frame.
 */

afterAll(closePool);

const bulk = (schema: string, body: Record<string, unknown>, table = 'items') =>
  call(rows, { method: 'POST', path: `/api/table/${table}/rows`, body: { schema, ...body } });

const count = (schema: string, table: string) =>
  withAdminClient(
    async (c) => (await c.query(`SELECT count(*)::int AS n FROM "${schema}"."${table}"`)).rows[0].n as number,
  );

describe('code planted in a tenant schema, on the admin’s bulk insert', () => {
  it('a trigger made with a service_role key fires on the bulk insert and on both kinds of upsert as the tenant', async () => {
    const schema = await tenantSchema('bulktrg');
    const { key } = await createKey(schema, 'service_role');
    const planted = [
      await sqlAs(
        key,
        `CREATE FUNCTION "${schema}".on_write() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN ${RECORD(schema)}; RETURN NEW; END $$`,
      ),
      await sqlAs(
        key,
        `CREATE TRIGGER on_write BEFORE INSERT OR UPDATE ON "${schema}".items
         FOR EACH ROW EXECUTE FUNCTION "${schema}".on_write()`,
      ),
    ];
    expect(planted.map((reply) => reply.status)).toEqual([200, 200]);

    const inserted = await bulk(schema, { rows: [{ name: 'a' }, { name: 'b' }] });
    const updated = await bulk(schema, { rows: [{ id: 1, name: 'one' }], onConflict: 'update' });
    const ignored = await bulk(schema, { rows: [{ id: 1, name: 'uno' }], onConflict: 'ignore' });

    expect([inserted.status, updated.status, ignored.status]).toEqual([201, 201, 201]);
    expect([inserted.body.count, updated.body.count, ignored.body.count]).toEqual([2, 1, 0]);
    const seen = await sightings(schema);
    // Two inserts, then the upsert's BEFORE INSERT and BEFORE UPDATE, then the ignored row's BEFORE INSERT.
    expect(seen).toHaveLength(5);
    expectTenantRightsOnly(seen);
  });

  it('a column default fills the cells a bulk insert leaves out, as the tenant', async () => {
    const schema = await tenantSchema('bulkdflt');
    await asTenant(
      schema,
      `ALTER TABLE "${schema}".items ALTER COLUMN name SET DEFAULT "${schema}".spy_text()`,
    );

    const reply = await bulk(schema, { rows: [{ id: 10, name: 'given' }, { id: 11 }] });

    expect(reply.status).toBe(201);
    expect(reply.body.rows.map((row: { name: string }) => row.name)).toEqual(['given', 'planted']);
    expectTenantRightsOnly(await sightings(schema));
  });
});

describe('a statement PostgreSQL can frame', () => {
  it('more values than one statement can bind is a 400 that sends nothing, and the schema keeps working', async () => {
    const schema = await tenantSchema('bulkwide');
    const columns = Array.from({ length: 70 }, (_, i) => `c${i}`);
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".wide (${columns.map((name) => `${name} int`).join(', ')})`,
    );
    const row = Object.fromEntries(columns.map((name) => [name, 1]));

    const reply = await bulk(schema, { rows: Array.from({ length: 1000 }, () => row) }, 'wide');

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/70000 values.*65535/);
    expect(await count(schema, 'wide')).toBe(0);
    const after = await bulk(schema, { rows: [row, row] }, 'wide');
    expect([after.status, after.body.count]).toEqual([201, 2]);
  });
});
