import { handler as tenants } from '#functions/tenants';
import { closePool } from '#lib/db/pool';
import { asTenant, loginAs, sightings, tenantSchema } from '#test/security/tenant';
import { call } from '#test/support/http';

/**
 * Drift is read from the catalog by the service's own connection: whatever a tenant planted in
 * the objects it deparses (defaults, checks, views, index expressions, policies), none of it runs,
 * and a lock the tenant holds bounds the read instead of stalling it.
 */

afterAll(closePool);

describe('reading drift', () => {
  it('runs none of the code a tenant planted in what it reads', async () => {
    const schema = await tenantSchema('dplant');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".spy_int(i int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN RETURN i; END $$;
       ALTER TABLE "${schema}".items ADD COLUMN planted text DEFAULT "${schema}".spy_text();
       ALTER TABLE "${schema}".items ADD CONSTRAINT planted CHECK ("${schema}".spy());
       CREATE INDEX planted_index ON "${schema}".items ("${schema}".spy_int(id));
       CREATE VIEW "${schema}".planted_view AS SELECT "${schema}".spy_text() AS x;
       ALTER TABLE "${schema}".items ENABLE ROW LEVEL SECURITY;
       CREATE POLICY planted ON "${schema}".items USING ("${schema}".spy())`,
    );
    await sightings(schema);

    const all = await call(tenants, { path: '/api/drift', query: { template: schema } });
    const one = await call(tenants, { path: `/api/drift/${schema}`, query: { against: schema } });
    const fix = await call(tenants, { path: `/api/drift/${schema}/fix`, query: { against: schema } });

    expect([all.status, one.status, fix.status]).toEqual([200, 200, 200]);
    expect(fix.body.sql).toBe('');
    expect(one.body.same).toBe(true);
    expect(await sightings(schema)).toEqual([]);
  });

  it('is bounded by a tenant holding every lock of its table', async () => {
    const schema = await tenantSchema('dlock');
    const holder = loginAs(`${schema}_user`, 'schema-pass-1');
    await holder.connect();
    await holder.query(`BEGIN; LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`);
    try {
      const started = Date.now();
      const reply = await call(tenants, { path: `/api/drift/${schema}`, query: { against: schema } });

      // The read needs no lock of the table; were it to wait, it would give up after 2 s.
      expect([200, 409]).toContain(reply.status);
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });
});
