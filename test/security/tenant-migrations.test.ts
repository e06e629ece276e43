import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import {
  asTenant,
  bearer,
  createKey,
  expectTenantRightsOnly,
  loginAs,
  RECORD,
  sightings,
  tenantSchema,
} from '#test/security/tenant';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

/**
 * A migration runs the admin's SQL in every tenant's schema, where each tenant may have planted
 * code: it must fire there with that tenant's rights, never the service's; and what a migration
 * found in one schema (its errors name tables and values) is the admin's to read, never a tenant's.
 */

afterAll(closePool);

const post = (path: string, body: unknown) => call(schemas, { method: 'POST', path, body });

async function migrate(target: string[], sql: string) {
  const created = await post('/api/migrations', {
    name: uniqueName('sec'),
    sql,
    target: { schemas: target },
  });
  if (created.status !== 201) throw new Error(created.text);
  let reply = await post(`/api/migrations/${created.body.id}/run`, {});
  for (let i = 0; i < 20 && !reply.body.done; i++)
    reply = await post(`/api/migrations/${created.body.id}/run`, {});
  return reply;
}

describe('a migration across tenant schemas', () => {
  it('fires what each tenant planted with that tenant’s rights', async () => {
    const [first, second] = [await tenantSchema('migplant'), await tenantSchema('migplant')];
    for (const schema of [first, second]) {
      await asTenant(
        schema,
        `CREATE FUNCTION "${schema}".on_write() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN ${RECORD(schema)}; RETURN NEW; END $$;
         CREATE TRIGGER on_write BEFORE UPDATE ON "${schema}".items FOR EACH ROW EXECUTE FUNCTION "${schema}".on_write();
         ALTER TABLE "${schema}".items ADD COLUMN tagged text DEFAULT "${schema}".spy_text()`,
      );
      await sightings(schema);
    }

    const done = await migrate(
      [first, second],
      "UPDATE items SET name = name || '!'; INSERT INTO items (name) VALUES ('new')",
    );

    expect(done.body.counts).toMatchObject({ applied: 2, failed: 0 });
    for (const schema of [first, second]) {
      const seen = await sightings(schema);
      // The trigger on the update, the default on the insert.
      expect(seen.length).toBeGreaterThanOrEqual(2);
      expectTenantRightsOnly(seen);
    }
  });

  it('never runs with the service’s rights, where a tenant could put its code in the path', async () => {
    const schema = await tenantSchema('migadmin');
    // The tenant opens its schema to everyone and plants a trigger the migration's UPDATE fires.
    await asTenant(
      schema,
      `GRANT USAGE ON SCHEMA "${schema}" TO PUBLIC; GRANT ALL ON "${schema}".items TO PUBLIC;
       CREATE FUNCTION "${schema}".on_write() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN ${RECORD(schema)}; RETURN NEW; END $$;
       CREATE TRIGGER on_write BEFORE UPDATE ON "${schema}".items FOR EACH ROW EXECUTE FUNCTION "${schema}".on_write()`,
    );

    const reply = await post('/api/migrations', {
      name: uniqueName('admin'),
      sql: "UPDATE items SET name = name || '!'",
      target: { schemas: [schema] },
      runAs: 'admin',
    });

    expect(reply.status).toBe(400);
    expect(await sightings(schema)).toEqual([]);
  });

  it('never shows a tenant the migrations or what they found', async () => {
    const schema = await tenantSchema('migread');
    const done = await migrate([schema], 'ALTER TABLE no_such_table ADD COLUMN x int');
    const { key } = await createKey(schema, 'service_role');

    const replies = await Promise.all([
      call(schemas, { path: '/api/migrations', ...bearer(key) }),
      call(schemas, { path: `/api/migrations/${done.body.id}`, ...bearer(key) }),
      call(schemas, {
        method: 'POST',
        path: `/api/migrations/${done.body.id}/retry`,
        body: {},
        ...bearer(key),
      }),
      call(schemas, {
        method: 'POST',
        path: '/api/migrations',
        body: { name: uniqueName('k'), sql: 'SELECT 1', target: { schemas: [schema] } },
        ...bearer(key),
      }),
    ]);

    expect(done.body.counts.failed).toBe(1);
    expect(replies.map((reply) => reply.status)).toEqual([403, 403, 403, 403]);
    expect(replies.map((reply) => reply.text).join()).not.toContain('no_such_table');
  });

  it('a tenant holding a lock stalls only its own schema, for the lock timeout', async () => {
    const [holder, other] = [await tenantSchema('miglock'), await tenantSchema('miglock')];
    const session = loginAs(`${holder}_user`, 'schema-pass-1');
    await session.connect();
    await session.query(`BEGIN; LOCK TABLE "${holder}".items IN ACCESS EXCLUSIVE MODE`);
    try {
      const created = await post('/api/migrations', {
        name: uniqueName('lock'),
        sql: 'ALTER TABLE items ADD COLUMN y int',
        target: { schemas: [holder, other] },
        lockTimeoutMs: 300,
      });
      const done = await post(`/api/migrations/${created.body.id}/run`, {});

      expect(done.body).toMatchObject({ done: true, counts: { applied: 1, failed: 1 } });
      const failed = done.body.schemas.find((s: { schema: string }) => s.schema === holder);
      expect(failed).toMatchObject({ state: 'failed', sqlstate: '55P03' });
    } finally {
      await session.query('ROLLBACK');
      await session.end();
    }
  });
});
