import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import {
  asTenant,
  expectTenantRightsOnly,
  serviceRole,
  sightings,
  tenantSchema,
} from '#test/security/tenant';
import { call } from '#test/support/http';

/**
 * Fast page reads compare primary keys: by a cursor (`after`) and by the key at a deep page's
 * start. The key's type, its checks and its comparison operators are the tenant's to define, so
 * reading the cursor and comparing with it must happen in the tenant's session: never on the
 * service's catalog connection, where checking `after` against the key's type would be tempting.
 */

afterAll(closePool);

/** A primary key whose domain CHECK and `>`/`>=` operators record who ran them. */
const watchedKey = (schema: string) => `
  CREATE DOMAIN "${schema}".watched_id AS integer CHECK ("${schema}".spy());
  CREATE FUNCTION "${schema}".watched_gt("${schema}".watched_id, "${schema}".watched_id) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN PERFORM "${schema}".spy(); RETURN $1::integer > $2::integer; END $$;
  CREATE FUNCTION "${schema}".watched_ge("${schema}".watched_id, "${schema}".watched_id) RETURNS boolean
    LANGUAGE plpgsql AS $$ BEGIN PERFORM "${schema}".spy(); RETURN $1::integer >= $2::integer; END $$;
  CREATE OPERATOR "${schema}".> (LEFTARG = "${schema}".watched_id, RIGHTARG = "${schema}".watched_id,
    FUNCTION = "${schema}".watched_gt);
  CREATE OPERATOR "${schema}".>= (LEFTARG = "${schema}".watched_id, RIGHTARG = "${schema}".watched_id,
    FUNCTION = "${schema}".watched_ge);
  CREATE TABLE "${schema}".tagged (id "${schema}".watched_id PRIMARY KEY, label text);
  INSERT INTO "${schema}".tagged SELECT g, 'n' || g FROM generate_series(1, 5) g;`;

describe('page reads by primary key run the key type’s code as the tenant', () => {
  let schema: string;
  beforeAll(async () => {
    schema = await tenantSchema('pgk');
    await asTenant(schema, watchedKey(schema));
  });
  beforeEach(() => sightings(schema));

  it('reads the admin’s `after` cursor as the key’s type, and compares with it, in the tenant’s session', async () => {
    const page = await call(tables, { path: '/api/table/tagged', query: { schema, after: '2', limit: '2' } });

    expect(page.status).toBe(200);
    expect(page.body.data).toEqual([
      { id: 3, label: 'n3' },
      { id: 4, label: 'n4' },
    ]);
    expect(page.body.nextCursor).toBe('4');
    expectTenantRightsOnly(await sightings(schema));
  });

  it('finds the start of the admin’s deep page in the tenant’s session', async () => {
    const page = await call(tables, { path: '/api/table/tagged', query: { schema, page: '2', limit: '2' } });

    expect(page.status).toBe(200);
    expect(page.body.data.map((row: { id: number }) => row.id)).toEqual([3, 4]);
    expectTenantRightsOnly(await sightings(schema));
  });

  it('answers a cursor the key’s type refuses with 400, refused in the tenant’s session', async () => {
    // A refusal rolls back whatever spy() wrote: the check names who ran it in its message instead.
    await asTenant(
      schema,
      `CREATE FUNCTION "${schema}".positive(integer) RETURNS boolean LANGUAGE plpgsql AS $$
       BEGIN IF $1 <= 0 THEN RAISE EXCEPTION 'not positive, said %', session_user; END IF; RETURN true; END $$;
       ALTER DOMAIN "${schema}".watched_id ADD CONSTRAINT positive CHECK ("${schema}".positive(VALUE))`,
    );

    const page = await call(tables, { path: '/api/table/tagged', query: { schema, after: '-1' } });

    expect(page.status).toBe(400);
    expect(page.body.message).toMatch(/not positive, said /);
    expect(page.body.message).not.toMatch(new RegExp(`said ${serviceRole()}\\b`));
  });
});
