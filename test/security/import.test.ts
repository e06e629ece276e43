import { handler as imports } from '#functions/imports';
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
import { call } from '#test/support/http';

/**
 * Imports as a hostile tenant would meet them: code planted on the table runs with the tenant's
 * rights only, whatever the mode; the staged parts are out of every tenant's reach; an import is
 * found only by its opener in its schema; dbadmin's own schema is never a target.
 */
afterAll(closePool);

let schema: string;
let other: string;
beforeAll(async () => {
  schema = await tenantSchema('impsec');
  other = await tenantSchema('impsec2');
  // A trigger on the table the imports write: it records who runs it.
  await asTenant(
    schema,
    `CREATE FUNCTION "${schema}".watch() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN ${RECORD(schema)}; RETURN NEW; END $$;
     CREATE TRIGGER watch BEFORE INSERT OR UPDATE OR DELETE ON "${schema}".items
       FOR EACH ROW EXECUTE FUNCTION "${schema}".watch();`,
  );
  await sightings(schema);
});

const csv = (table: string, body: string, query: Record<string, string>, auth = {}) =>
  call(imports, {
    method: 'POST',
    path: `/api/table/${table}/import`,
    query,
    headers: { 'content-type': 'text/csv', ...('headers' in auth ? (auth.headers as object) : {}) },
    ...('auth' in auth ? { auth: null } : {}),
    body,
  });

describe('code planted on the table an import writes', () => {
  it.each(['insert', 'upsert', 'replace'])('runs with the tenant’s rights only (%s)', async (mode) => {
    const reply = await csv('items', `id,name\n${100 + mode.length},imported\n`, { schema, mode });

    expect(reply.status).toBe(200);
    expectTenantRightsOnly(await sightings(schema));
  });

  it('runs with the tenant’s rights only when an import in parts is committed', async () => {
    const opened = await call(imports, {
      method: 'POST',
      path: '/api/table/items/imports',
      body: { schema, format: 'ndjson' },
    });
    const id = opened.body.id as string;
    await call(imports, {
      method: 'PUT',
      path: `/api/table/items/imports/${id}/parts/1`,
      query: { schema },
      headers: { 'content-type': 'application/x-ndjson' },
      body: '{"id": 200, "name": "parts"}\n',
    });

    const done = await call(imports, {
      method: 'POST',
      path: `/api/table/items/imports/${id}/commit`,
      body: { schema, parts: 1 },
    });

    expect(done.status).toBe(200);
    expectTenantRightsOnly(await sightings(schema));
  });
});

describe('the staged parts', () => {
  it('are out of the tenant’s own login’s reach', async () => {
    for (const sql of [
      'SELECT count(*) FROM _dbadmin.import_parts',
      'SELECT count(*) FROM _dbadmin.import_sessions',
      "UPDATE _dbadmin.import_sessions SET owner = 'admin'",
    ]) {
      await expect(asTenant(schema, sql)).rejects.toThrow(/permission denied/);
    }
  });

  it('are found by the import’s opener only, in its schema: another schema’s key gets 404, naming another schema 403', async () => {
    const opened = await call(imports, {
      method: 'POST',
      path: '/api/table/items/imports',
      body: { schema, format: 'csv' },
    });
    const id = opened.body.id as string;
    const outsider = await createKey(other, 'service_role', 'outsider');
    const path = `/api/table/items/imports/${id}`;

    const asOutsider = await call(imports, { path, ...bearer(outsider.key) });
    const naming = await call(imports, { path, query: { schema }, ...bearer(outsider.key) });
    const sending = await call(imports, {
      method: 'PUT',
      path: `${path}/parts/1`,
      auth: null,
      headers: { ...bearer(outsider.key).headers, 'content-type': 'text/csv' },
      body: 'id,name\n666,planted\n',
    });
    const committing = await call(imports, {
      method: 'POST',
      path: `${path}/commit`,
      body: { parts: 1 },
      ...bearer(outsider.key),
    });

    expect([asOutsider.status, naming.status, sending.status, committing.status]).toEqual([
      404, 403, 404, 404,
    ]);
  });
});

describe('dbadmin’s own schema and the system’s', () => {
  it.each(['_dbadmin', 'pg_catalog', 'information_schema'])('%s is never a target', async (target) => {
    const direct = await csv('import_sessions', 'id\n1\n', { schema: target });
    const opened = await call(imports, {
      method: 'POST',
      path: '/api/table/import_sessions/imports',
      body: { schema: target, format: 'csv' },
    });

    expect([direct.status, opened.status]).toEqual([400, 400]);
  });
});
