import { handler as rows } from '#functions/rows';
import { closePool } from '#lib/db/pool';
import {
  asTenant,
  bearer,
  createKey,
  expectTenantRightsOnly,
  RECORD,
  sightings,
  tenantSchema,
} from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { type Call, call } from '#test/support/http';

/**
 * PATCH /api/table/:tableName/rows and SPEC's bulk delete with a filter change every row a filter
 * finds, in one statement as the schema's role. A tenant may plant anything on the table; what
 * stands against it: its code runs with its own rights only; `maxAffected` is counted from the
 * change itself (RETURNING / the statement's row count, in the same transaction), so code that
 * answers differently each time it is asked cannot make a count and the change disagree; and a
 * refusal rolls back everything the request ran, the tenant's triggers' writes included.
 *
 * What maxAffected is not: a bound on what the tenant's own triggers write. Those run with the
 * tenant's rights, on the tenant's data, and its own login could run the same at any time; the
 * answer's count is the rows the statement changed (PostgREST's meaning).
 */

afterAll(closePool);

const patch = (
  schema: string,
  query: Call['query'],
  set: Record<string, unknown>,
  rest: Partial<Call> = {},
) => call(rows, { method: 'PATCH', path: '/api/table/items/rows', query, body: { set, schema }, ...rest });

const remove = (schema: string, query: Call['query'], body: Record<string, unknown> = {}) =>
  call(rows, { method: 'POST', path: '/api/table/items/rows/delete', query, body: { schema, ...body } });

const names = (schema: string) =>
  withAdminClient(async (c) =>
    (await c.query(`SELECT name FROM "${schema}".items ORDER BY id`)).rows.map(
      (row: { name: string }) => row.name,
    ),
  );

/** items holds first, second, third (ids 1..3). */
async function threeItems(prefix: string): Promise<string> {
  const schema = await tenantSchema(prefix);
  await asTenant(schema, `INSERT INTO "${schema}".items (name) VALUES ('second'), ('third')`);
  return schema;
}

describe('code planted on the table, on a filtered update or delete', () => {
  it('a trigger and a forced row-level security policy run with the tenant’s rights only', async () => {
    const schema = await threeItems('fltrg');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".on_change() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN ${RECORD(schema)}; RETURN coalesce(NEW, OLD); END $$;
       CREATE TRIGGER on_change BEFORE UPDATE OR DELETE ON "${schema}".items
         FOR EACH ROW EXECUTE FUNCTION "${schema}".on_change();
       ALTER TABLE "${schema}".items ENABLE ROW LEVEL SECURITY;
       ALTER TABLE "${schema}".items FORCE ROW LEVEL SECURITY;
       CREATE POLICY watched ON "${schema}".items USING ("${schema}".spy());`,
    );

    const updated = await patch(schema, { filter: 'id.lte.2' }, { name: 'changed' });
    const deleted = await remove(schema, { filter: 'name.eq.changed' });

    expect([updated.status, updated.body.count]).toEqual([200, 2]);
    expect([deleted.status, deleted.body.deletedCount]).toEqual([200, 2]);
    // Before names(): the test's own read (as the service's role) passes the policy too.
    expectTenantRightsOnly(await sightings(schema));
    expect(await names(schema)).toEqual(['third']);
  });

  it('a refusal by maxAffected rolls back what the tenant’s triggers wrote too', async () => {
    const schema = await threeItems('flroll');
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".audit (what text);
       CREATE FUNCTION "${schema}".audited() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN ${RECORD(schema)}; INSERT INTO "${schema}".audit VALUES (TG_OP); RETURN coalesce(NEW, OLD); END $$;
       CREATE TRIGGER audited AFTER UPDATE OR DELETE ON "${schema}".items
         FOR EACH ROW EXECUTE FUNCTION "${schema}".audited();`,
    );

    const updated = await patch(schema, { filter: 'id.gt.0', maxAffected: '2' }, { name: 'changed' });
    const deleted = await remove(schema, { filter: 'id.gt.0', maxAffected: '2' });

    expect([updated.status, deleted.status]).toEqual([409, 409]);
    expect(updated.body.message).toMatch(/3 rows/);
    expect(await names(schema)).toEqual(['first', 'second', 'third']);
    expect(await sightings(schema)).toEqual([]);
    const audit = await withAdminClient((c) => c.query(`SELECT * FROM "${schema}".audit`));
    expect(audit.rows).toEqual([]);
  });

  it('a policy that answers differently each time it is asked cannot make more rows change than maxAffected', async () => {
    // Lets no row through the first three times it is asked, then every row: a count taken before
    // the change would see none, and the change would then take all three.
    const schema = await threeItems('flflip');
    await asTenant(
      schema,
      `CREATE SEQUENCE "${schema}".asked;
       CREATE FUNCTION "${schema}".fickle() RETURNS boolean LANGUAGE sql VOLATILE AS
         $$ SELECT nextval('"${schema}".asked') > 3 $$;
       ALTER TABLE "${schema}".items ENABLE ROW LEVEL SECURITY;
       ALTER TABLE "${schema}".items FORCE ROW LEVEL SECURITY;
       CREATE POLICY fickle ON "${schema}".items USING ("${schema}".fickle()) WITH CHECK (true);`,
    );

    const updated = await patch(schema, { filter: 'id.gt.0', maxAffected: '1' }, { name: 'changed' });
    const changed = (await names(schema)).filter((name) => name === 'changed').length;
    const deleted = await remove(schema, { filter: 'id.gt.0', maxAffected: '1' });
    const left = (await names(schema)).length;

    expect(updated.status === 409 ? 0 : updated.body.count).toBe(changed);
    expect(changed).toBeLessThanOrEqual(1);
    expect(deleted.status === 409 ? 0 : deleted.body.deletedCount).toBe(3 - left);
    expect(3 - left).toBeLessThanOrEqual(1);
  });

  it('a deferred trigger that raises at commit leaves every row as it was, and the answer is an error', async () => {
    const schema = await threeItems('fldefer');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".late() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
       CREATE CONSTRAINT TRIGGER late AFTER UPDATE OR DELETE ON "${schema}".items
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "${schema}".late();`,
    );

    const updated = await patch(schema, { all: 'true' }, { name: 'changed' });
    const deleted = await remove(schema, { all: 'true' });

    expect([updated.status, deleted.status]).toEqual([400, 400]);
    expect(updated.body.message).toMatch(/refused at commit/);
    expect(await names(schema)).toEqual(['first', 'second', 'third']);
  });
});

describe('keys', () => {
  it('an anon key may not change rows by a filter, in its own schema or any', async () => {
    const schema = await threeItems('flanon');
    const { key } = await createKey(schema, 'anon');

    const updated = await call(rows, {
      method: 'PATCH',
      path: '/api/table/items/rows',
      query: { all: 'true' },
      body: { set: { name: 'changed' } },
      ...bearer(key),
    });
    const deleted = await call(rows, {
      method: 'POST',
      path: '/api/table/items/rows/delete',
      query: { all: 'true' },
      body: {},
      ...bearer(key),
    });

    expect([updated.status, deleted.status]).toEqual([403, 403]);
    expect(await names(schema)).toEqual(['first', 'second', 'third']);
  });

  it('a service_role key changes rows in its own schema only, wherever it names another', async () => {
    const schema = await threeItems('flown');
    const victim = await threeItems('flvictim');
    const { key } = await createKey(schema, 'service_role');
    const as = bearer(key);

    const replies = [
      await patch(victim, { all: 'true' }, { name: 'taken' }, as),
      await call(rows, {
        method: 'PATCH',
        path: '/api/table/items/rows',
        query: { all: 'true', schema: victim },
        body: { set: { name: 'taken' } },
        ...as,
      }),
      await call(rows, {
        method: 'POST',
        path: '/api/table/items/rows/delete',
        query: { all: 'true' },
        body: { schema: victim },
        ...as,
      }),
    ];
    const own = await call(rows, {
      method: 'PATCH',
      path: '/api/table/items/rows',
      query: { filter: 'id.eq.1' },
      body: { set: { name: 'mine' } },
      ...as,
    });

    // schema in the query is no parameter of the route: 400 before anything runs.
    expect(replies.map((reply) => reply.status)).toEqual([403, 400, 403]);
    expect(own.status).toBe(200);
    expect(await names(victim)).toEqual(['first', 'second', 'third']);
    expect(await names(schema)).toEqual(['mine', 'second', 'third']);
  });
});
