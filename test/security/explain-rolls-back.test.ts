import { handler as query } from '#functions/query';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient, withOwnerClient } from '#test/support/db';
import { call } from '#test/support/http';

/**
 * An explained statement (POST /api/query with explain) runs, with ANALYZE, in a transaction that
 * is always rolled back: whatever it wrote, and whatever the tenant's planted trigger wrote with
 * it, is gone, whoever asked.
 */

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await tenantSchema('explain');
  await withOwnerClient(schema, (c) =>
    c.query(`
      CREATE TABLE "${schema}".trail (note text);
      CREATE FUNCTION "${schema}".trail() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN INSERT INTO "${schema}".trail VALUES ('fired'); RETURN NEW; END $$;
      CREATE TRIGGER trail BEFORE INSERT OR DELETE ON "${schema}".items FOR EACH ROW EXECUTE FUNCTION "${schema}".trail();`),
  );
});

const left = () =>
  withAdminClient(async (c) => {
    const { rows } = await c.query(
      `SELECT (SELECT count(*) FROM "${schema}".trail)::int AS trail,
              (SELECT count(*) FROM "${schema}".items)::int AS items`,
    );
    return rows[0];
  });

describe('EXPLAIN ANALYZE through POST /api/query', () => {
  it.each([
    ['the admin', {}],
    ['a service key', undefined],
  ])('keeps nothing an explained write or its trigger did, for %s', async (_, as) => {
    const auth = as ?? bearer((await createKey(schema, 'service_role', `explain-${Date.now()}`)).key);
    const before = await left();
    for (const sql of ["INSERT INTO items (name) VALUES ('explained')", 'DELETE FROM items']) {
      const reply = await call(query, {
        method: 'POST',
        path: '/api/query',
        body: { sql, explain: 'analyze', ...(as ? { schema } : {}) },
        ...auth,
      });
      expect(reply.status).toBe(200);
      expect(reply.body.plan[0].Plan['Actual Rows']).toBeGreaterThanOrEqual(0);
    }
    expect(await left()).toEqual(before);
  });
});
