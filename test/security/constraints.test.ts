import { handler as constraints } from '#functions/constraints';
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
 * Constraints run as the schema's role: a check expression is the tenant's code, and a foreign
 * key reaches another table, so PostgreSQL's privileges (REFERENCES, USAGE) decide where it may
 * point. Neither may reach past the schema; listing them runs nothing and waits for no lock.
 */
afterAll(closePool);
withSetting('SCHEMA_LOCK_TIMEOUT_MS', '300');

let schema: string;
let other: string;
beforeAll(async () => {
  schema = await tenantSchema('consec');
  other = await tenantSchema('consecb');
});

const add = (body: Record<string, unknown>, auth: object = {}, table = 'items') =>
  call(constraints, {
    method: 'POST',
    path: `/api/table/${table}/constraints`,
    body: { schema, ...body },
    ...auth,
  });

const constraintsOf = (inSchema: string, table: string) =>
  withAdminClient(async (c) =>
    (
      await c.query(`SELECT conname FROM pg_constraint WHERE conrelid = $1::regclass ORDER BY conname`, [
        `"${inSchema}"."${table}"`,
      ])
    ).rows.map((r) => r.conname as string),
  );

describe('a check expression', () => {
  it('runs a function planted in the schema with the schema’s rights only', async () => {
    const before = await constraintsOf(schema, 'items');

    const reply = await add({ type: 'check', check: `"${schema}".spy()` });

    expect(reply.status).toBe(200);
    expectTenantRightsOnly(await sightings(schema));
    expect((await constraintsOf(schema, 'items')).length).toBe(before.length + 1);
  });

  it('that reaches for dbadmin’s tables is refused, and changes nothing', async () => {
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".peek_keys() RETURNS boolean LANGUAGE plpgsql AS $$
         BEGIN RETURN (SELECT count(*) FROM _dbadmin.api_keys) >= 0; END $$`,
    );
    const before = await constraintsOf(schema, 'items');

    const reply = await add({ type: 'check', check: `"${schema}".peek_keys()` });

    expect(reply.status).toBe(403);
    expect(reply.body.message).toMatch(/permission denied for schema _dbadmin/);
    expect(await constraintsOf(schema, 'items')).toEqual(before);
  });

  it('is not run when the constraints are listed, and the listing waits for no lock the tenant holds', async () => {
    await asTenant(
      schema,
      `ALTER TABLE "${schema}".items ADD CONSTRAINT spied CHECK ("${schema}".spy()) NOT VALID`,
    );
    await sightings(schema);
    const holder = loginAs(`${schema}_user`, 'schema-pass-1');
    await holder.connect();
    await holder.query(`BEGIN; LOCK TABLE "${schema}".items IN ACCESS EXCLUSIVE MODE`);
    try {
      const started = Date.now();
      const reply = await call(constraints, { path: '/api/table/items/constraints', query: { schema } });

      expect(reply.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(1000);
      // Printing a check opens the table: left out while it is held, never waited for.
      expect(reply.body.constraints).toContainEqual(
        expect.objectContaining({ name: 'spied', type: 'check', validated: false, definition: null }),
      );
      expect(reply.body.constraints).toContainEqual(
        expect.objectContaining({ name: 'items_pkey', definition: 'PRIMARY KEY (id)' }),
      );
    } finally {
      await holder.end();
    }
    const free = await call(constraints, { path: '/api/table/items/constraints', query: { schema } });
    expect(free.body.constraints).toContainEqual(
      expect.objectContaining({ name: 'spied', definition: 'CHECK (spy()) NOT VALID' }),
    );
    expect(await sightings(schema)).toEqual([]);
  });
});

describe('a foreign key to another schema', () => {
  it('to a table the other schema did not grant is refused with 403, and changes nothing', async () => {
    const before = await constraintsOf(schema, 'items');

    const preview = await add({
      type: 'foreign key',
      columns: ['id'],
      references: { schema: other, table: 'items' },
      dryRun: true,
    });
    const reply = await add({
      type: 'foreign key',
      columns: ['id'],
      references: { schema: other, table: 'items' },
    });

    expect([preview.status, reply.status]).toEqual([403, 403]);
    expect(reply.body.message).toMatch(new RegExp(`may not reference "${other}"\\."items"`));
    expect(await constraintsOf(schema, 'items')).toEqual(before);
    expect(await constraintsOf(other, 'items')).toEqual(['items_pkey']);
  });

  it('to dbadmin’s or PostgreSQL’s own tables is refused: 400 for a name no schema of ours has, else 403', async () => {
    const internal = await add({
      type: 'foreign key',
      columns: ['id'],
      references: { schema: '_dbadmin', table: 'api_keys' },
    });
    const system = await add({
      type: 'foreign key',
      columns: ['id'],
      references: { schema: 'pg_catalog', table: 'pg_class' },
    });

    expect([internal.status, system.status]).toEqual([400, 403]);
  });

  it('to a schema the tenant may not use is 403 whether or not the table exists', async () => {
    await withAdminClient((c) => c.query(`REVOKE USAGE ON SCHEMA "${other}" FROM PUBLIC`));
    try {
      const replies = [
        await add({ type: 'foreign key', columns: ['id'], references: { schema: other, table: 'items' } }),
        await add({ type: 'foreign key', columns: ['id'], references: { schema: other, table: 'nowhere' } }),
      ];

      expect(replies.map((r) => [r.status, r.body.message])).toEqual([
        [403, expect.stringContaining(`may not reference "${other}"."items"`)],
        [403, expect.stringContaining(`may not reference "${other}"."nowhere"`)],
      ]);
    } finally {
      await withAdminClient((c) => c.query(`GRANT USAGE ON SCHEMA "${other}" TO PUBLIC`));
    }
  });

  it('with USAGE on the other schema and SELECT on its table, but no REFERENCES, is refused with 403', async () => {
    await asTenant(
      other,
      `GRANT USAGE ON SCHEMA "${other}" TO "${schema}_owner"; GRANT SELECT ON "${other}".items TO "${schema}_owner"`,
    );

    const reply = await add({
      type: 'foreign key',
      columns: ['id'],
      references: { schema: other, table: 'items' },
    });

    expect(reply.status).toBe(403);
    expect(await constraintsOf(other, 'items')).toEqual(['items_pkey']);
  });

  it('is made once the other schema granted REFERENCES (so the refusals above were live)', async () => {
    await asTenant(
      other,
      `GRANT USAGE ON SCHEMA "${other}" TO "${schema}_owner"; GRANT REFERENCES ON "${other}".items TO "${schema}_owner"`,
    );
    await asTenant(schema, `CREATE TABLE "${schema}".linked (id int PRIMARY KEY, item int)`);

    const reply = await add(
      {
        type: 'foreign key',
        name: 'linked_item',
        columns: ['item'],
        references: { schema: other, table: 'items' },
      },
      {},
      'linked',
    );

    expect(reply.status).toBe(200);
    expect(await constraintsOf(schema, 'linked')).toContain('linked_item');
  });
});

describe('keys', () => {
  it('a key in another schema gets 403', async () => {
    const { key } = await createKey(other, 'service_role', 'con-other');

    const replies = [
      await add({ type: 'check', check: 'id > 0' }, bearer(key)),
      await call(constraints, { path: '/api/table/items/constraints', query: { schema }, ...bearer(key) }),
      await call(constraints, {
        method: 'DELETE',
        path: '/api/table/items/constraints/items_pkey',
        query: { schema },
        ...bearer(key),
      }),
      await call(constraints, {
        method: 'PATCH',
        path: '/api/table/items',
        body: { schema, comment: 'x' },
        ...bearer(key),
      }),
    ];

    expect(replies.map((r) => r.status)).toEqual([403, 403, 403, 403]);
  });

  it('an anon key reads the constraints and changes nothing', async () => {
    const { key } = await createKey(schema, 'anon', 'con-anon');
    const before = await constraintsOf(schema, 'items');

    const list = await call(constraints, {
      path: '/api/table/items/constraints',
      query: { schema },
      ...bearer(key),
    });
    const replies = [
      await add({ type: 'unique', columns: ['name'] }, bearer(key)),
      await call(constraints, {
        method: 'DELETE',
        path: '/api/table/items/constraints/items_pkey',
        query: { schema },
        ...bearer(key),
      }),
      await call(constraints, {
        method: 'PATCH',
        path: '/api/table/items',
        body: { schema, rename: 'gone' },
        ...bearer(key),
      }),
    ];

    expect(list.status).toBe(200);
    expect(replies.map((r) => r.status)).toEqual([403, 403, 403]);
    expect(await constraintsOf(schema, 'items')).toEqual(before);
  });
});
