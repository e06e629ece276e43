import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { SHARD_SCHEMAS } from '#lib/db/role-admin';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';

/**
 * Shards (lib/db/role-admin): each makes and administers the roles of at most SHARD_SCHEMAS
 * schemas; a new one is made when none has room, by one schema's making at a time.
 */
afterAll(closePool);

const create = (schemaName: string) =>
  call(schemas, {
    method: 'POST',
    path: '/api/schema/create',
    body: { schemaName, password: 'schema-pass-1' },
  });

const shardOf = (schema: string) =>
  withAdminClient(
    async (c) =>
      (await c.query('SELECT role_shard FROM _dbadmin.schema_locks WHERE schema_name = $1', [schema])).rows[0]
        ?.role_shard as string | null | undefined,
  );

const counts = () =>
  withAdminClient(async (c) =>
    Object.fromEntries(
      (await c.query('SELECT shard, schemas FROM _dbadmin.role_shards')).rows.map((r) => [
        r.shard,
        r.schemas,
      ]),
    ),
  );

const superuser = () =>
  withAdminClient(
    async (c) =>
      (
        await c.query('SELECT rolsuper FROM pg_roles WHERE rolname = $1', [
          decodeURIComponent(new URL(process.env.DATABASE_URL as string).username),
        ])
      ).rows[0].rolsuper as boolean,
  );

describe('role shards', () => {
  it('makes new shards for schemas made at the same moment when none has room, and all are made', async () => {
    if (await superuser()) return;
    expect((await create(uniqueName('shardfirst'))).status).toBe(201);
    await withAdminClient((c) => c.query('UPDATE _dbadmin.role_shards SET schemas = $1', [SHARD_SCHEMAS]));
    const names = Array.from({ length: 4 }, () => uniqueName('shardrace'));

    const replies = await Promise.all(names.map(create));

    expect(replies.map((reply) => reply.status)).toEqual([201, 201, 201, 201]);
    const shards = await Promise.all(names.map(shardOf));
    const now = await counts();
    for (const shard of shards) {
      expect(shard).toEqual(expect.any(String));
      expect(now[shard as string]).toBeGreaterThanOrEqual(1);
      expect(now[shard as string]).toBeLessThan(SHARD_SCHEMAS);
    }
  });

  it('gives a deleted schema’s room back to its shard', async () => {
    if (await superuser()) return;
    const name = uniqueName('shardfree');
    expect((await create(name)).status).toBe(201);
    const shard = (await shardOf(name)) as string;
    const before = (await counts())[shard];

    const deleted = await call(schemas, { method: 'DELETE', path: `/api/schema/${name}` });

    expect(deleted.status).toBe(200);
    expect((await counts())[shard]).toBe(before - 1);
    expect(await shardOf(name)).toBeUndefined();
  });
});
