import { handler as query } from '#functions/query';
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
 * The admin's SQL without `schema` runs as the role of the one schema it names (read with
 * PostgreSQL's parser). A tenant knows that and plants code its statements will run: that code
 * must still run with the tenant's rights only, a statement that names two schemas must run
 * nothing, and a wrong guess may only fail.
 */

afterAll(closePool);

/** The admin's SQL, with Basic credentials and no `schema`. */
const adminSql = (sql: string) => call(query, { method: 'POST', path: '/api/query', body: { sql } });

describe("the admin's SQL that names one tenant schema runs as that schema's role", () => {
  it('a function planted there runs as the tenant, with no reach into dbadmin’s schema', async () => {
    const schema = await tenantSchema('asf');

    const reply = await adminSql(`SELECT "${schema}".spy() AS spied`);

    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ rows: [{ spied: true }], schema });
    const seen = await sightings(schema);
    expectTenantRightsOnly(seen);
    expect(seen).toEqual([{ who: `${schema}_exec`, internal: false }]);
  });

  it('an operator planted there, called as OPERATOR(schema.===), runs as the tenant', async () => {
    const schema = await tenantSchema('aso');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".same(int, int) RETURNS boolean LANGUAGE plpgsql AS $$
       BEGIN ${RECORD(schema)}; RETURN $1 = $2; END $$;
       CREATE OPERATOR "${schema}".=== (LEFTARG = int, RIGHTARG = int, FUNCTION = "${schema}".same);`,
    );

    const reply = await adminSql(`SELECT 1 OPERATOR("${schema}".===) 1 AS same`);

    expect(reply.status).toBe(200);
    expect(reply.body.rows).toEqual([{ same: true }]);
    expect(await sightings(schema)).toEqual([{ who: `${schema}_exec`, internal: false }]);
  });

  it('a trigger planted there fires on the admin’s insert as the tenant', async () => {
    const schema = await tenantSchema('ast');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN ${RECORD(schema)}; RETURN NEW; END $$;
       CREATE TRIGGER on_insert BEFORE INSERT ON "${schema}".items
       FOR EACH ROW EXECUTE FUNCTION "${schema}".on_insert();`,
    );

    const reply = await adminSql(`INSERT INTO "${schema}".items (name) VALUES ('from the admin')`);

    expect(reply.status).toBe(200);
    expect(reply.body.schema).toBe(schema);
    expect(await sightings(schema)).toEqual([{ who: `${schema}_exec`, internal: false }]);
  });

  it('planted code cannot read dbadmin’s API keys: a privilege error, nothing read', async () => {
    const schema = await tenantSchema('ask');
    await createKey(schema, 'anon');
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".keys() RETURNS text LANGUAGE plpgsql AS $$
       BEGIN RETURN (SELECT string_agg(encode(key_hash, 'hex'), ',') FROM _dbadmin.api_keys); END $$;`,
    );

    const reply = await adminSql(`SELECT "${schema}".keys() AS stolen`);

    expect(reply.status).toBe(403);
    expect(reply.body.message).toMatch(/permission denied for schema _dbadmin/);
  });

  it('planted code cannot read another tenant’s table: a privilege error, nothing read', async () => {
    const [thief, victim] = [await tenantSchema('asx'), await tenantSchema('asv')];
    await withAdminClient((c) => c.query(`UPDATE "${victim}".items SET name = 'victim secret'`));
    await asTenant(
      thief,
      `CREATE FUNCTION "${thief}".steal() RETURNS text LANGUAGE plpgsql AS $$
       DECLARE loot text; BEGIN EXECUTE 'SELECT name FROM "${victim}".items' INTO loot; RETURN loot; END $$;`,
    );

    const reply = await adminSql(`SELECT "${thief}".steal() AS loot`);

    expect(reply.status).toBe(403);
    expect(reply.text).not.toContain('victim secret');
  });

  it('a guess made from what the parser sees only fails: a DO block reaching another schema is refused', async () => {
    const [named, other] = [await tenantSchema('asg'), await tenantSchema('asd')];

    const reply = await adminSql(
      `DO $$ BEGIN INSERT INTO "${other}".items (name) VALUES ('do block'); END $$;
       SELECT count(*) AS n FROM "${named}".items`,
    );

    expect(reply.status).toBe(403);
    expect(reply.body.message).toBe('permission denied for table items');
    const left = await withAdminClient((c) => c.query(`SELECT name FROM "${other}".items`));
    expect(left.rows).toEqual([{ name: 'first' }]);
  });
});

describe("the admin's SQL that names several schemas, or none", () => {
  it('names two tenant schemas: 400 naming both and how to choose, and nothing runs', async () => {
    const [first, second] = [await tenantSchema('as1'), await tenantSchema('as2')];

    const reply = await adminSql(
      `INSERT INTO "${first}".canary VALUES ('ran', false); SELECT * FROM "${second}".items`,
    );

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Several schemas');
    expect(reply.body.message).toContain(`"${[first, second].sort().join('", "')}"`);
    expect(reply.body.message).toMatch(/"runAs": "admin"/);
    expect(reply.body.message).toMatch(/"schema"/);
    expect(await sightings(first)).toEqual([]);
  });

  it('names only pg_catalog and information_schema: runs in public as public’s role, as before', async () => {
    const reply = await adminSql(
      `SELECT session_user AS who, current_setting('search_path') AS path
         FROM pg_catalog.pg_namespace JOIN information_schema.schemata ON schema_name = nspname LIMIT 1`,
    );

    expect(reply.status).toBe(200);
    expect(reply.body.rows).toEqual([{ who: 'public_exec', path: 'public' }]);
    expect(reply.body.schema).toBe('public');
  });

  it('names dbadmin’s own schema: 400 that says runAs admin, nothing read', async () => {
    const reply = await adminSql('SELECT key_hash FROM _dbadmin.api_keys');

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('System schema');
    expect(reply.body.message).toMatch(/"runAs": "admin"/);
  });
});

describe('API keys are not read for a schema', () => {
  it('a service_role key’s SQL naming another schema still runs in its own, and fails there', async () => {
    const [own, other] = [await tenantSchema('ak1'), await tenantSchema('ak2')];
    const { key } = await createKey(own, 'service_role');

    const reply = await sqlAs(key, `INSERT INTO "${other}".items (name) VALUES ('key')`);

    expect(reply.status).toBe(403);
    expect(reply.body.message).toBe('permission denied for table items');
  });
});
