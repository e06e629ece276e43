import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { asTenant, expectTenantRightsOnly, type Sighting, sightings } from '#test/security/tenant';
import { roleExists, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freshSchema } from '#test/support/tables';

/**
 * A template is a tenant's schema, so everything in it is the tenant's code. A clone reads it and
 * makes it again: what the template's tenant planted must run, if at all, with a tenant's rights,
 * never the admin's, and a copy must never give another tenant more than the template did.
 */

afterAll(closePool);

const clone = (template: string, schemaName: string, withData = true) =>
  call(schemas, {
    method: 'POST',
    path: '/api/schema/create',
    body: { schemaName, password: 'clone-pass-1', template, withData },
  });

/** Another tenant's schema offering everyone a trigger function `stamp()`, named like a template's. */
async function offeringStamp(prefix: string): Promise<string> {
  const schema = await freshSchema(prefix);
  await asTenant(
    schema,
    `GRANT USAGE ON SCHEMA ${schema} TO PUBLIC;
     CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
     GRANT EXECUTE ON FUNCTION stamp() TO PUBLIC`,
  );
  return schema;
}

/** Records who runs it in `canary` of whichever schema it runs in (its name is unqualified). */
const SPY = `INSERT INTO canary VALUES (session_user, has_schema_privilege('_dbadmin', 'USAGE'))`;

describe('cloning a template never runs its code with the admin’s rights', () => {
  it('checks, defaults and materialized views run as the copy’s role; a policy read on the template as its own', async () => {
    const template = await freshSchema('plant');
    const channel = `seen_${template}`;
    await asTenant(
      template,
      `CREATE TABLE canary (who text, internal boolean);
       CREATE FUNCTION spy() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN ${SPY}; RETURN true; END $$;
       -- A materialized view is filled under a safe search path (PostgreSQL 17): this one names its own.
       CREATE FUNCTION spy_text() RETURNS text LANGUAGE plpgsql SET search_path = ${template}
         AS $$ BEGIN ${SPY}; RETURN 'x'; END $$;
       -- Reading the template (a read-only transaction) can only be seen by a notification.
       CREATE FUNCTION watch() RETURNS boolean LANGUAGE plpgsql AS $$
       BEGIN
         PERFORM pg_notify('${channel}', session_user || ' ' || has_schema_privilege('_dbadmin', 'USAGE'));
         RETURN true;
       END $$;
       CREATE TABLE items (id int PRIMARY KEY, note text DEFAULT spy_text(), CHECK (spy()));
       INSERT INTO items VALUES (1, 'a'), (2, 'b');
       ALTER TABLE items ENABLE ROW LEVEL SECURITY;
       ALTER TABLE items FORCE ROW LEVEL SECURITY;
       CREATE POLICY watched ON items USING (watch());
       CREATE MATERIALIZED VIEW seen AS SELECT spy_text() AS x;
       DELETE FROM canary;`,
    );
    const notices: string[] = [];
    const copy = uniqueName('copy');

    const reply = await withAdminClient(async (listener) => {
      listener.on('notification', (message) => notices.push(message.payload ?? ''));
      await listener.query(`LISTEN "${channel}"`);
      const answer = await clone(template, copy);
      // The template's snapshot committed before the answer; its notifications follow it.
      await listener.query('SELECT 1');
      return answer;
    });

    expect(reply.status).toBe(201);
    const seen = await sightings(copy);
    // Two rows checked on their way in, and the materialized view filled once.
    expect(seen.length).toBeGreaterThanOrEqual(3);
    expectTenantRightsOnly(seen);
    expect(seen.map((s: Sighting) => s.who)).toEqual(seen.map(() => `${copy}_exec`));
    expect(notices.length).toBeGreaterThan(0);
    for (const notice of notices) expect(notice).toBe(`${template}_exec false`);
  });

  it('never binds the copy to another schema, whatever the template’s code does to the search path', async () => {
    // The attacker's other tenant offers a function anyone may run, named like the template's.
    const evil = await offeringStamp('evil');
    const template = await freshSchema('hijack');
    // Checked on every row copied in: it puts the attacker's schema first for the rest of the copy.
    await asTenant(
      template,
      `CREATE FUNCTION divert() RETURNS boolean LANGUAGE plpgsql AS $$
       BEGIN PERFORM set_config('search_path', '${evil}, ' || current_schema(), true); RETURN true; END $$;
       CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
       CREATE TABLE items (id int PRIMARY KEY, CHECK (divert()));
       CREATE TRIGGER stamp BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION stamp();
       INSERT INTO items VALUES (1)`,
    );
    const copy = uniqueName('copy');

    const reply = await clone(template, copy);

    expect(reply.status).toBe(201);
    const bound = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT p.pronamespace::regnamespace::text AS schema FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
              WHERE t.tgrelid = $1::regclass AND t.tgname = 'stamp'`,
            [`${copy}.items`],
          )
        ).rows,
    );
    expect(bound).toEqual([{ schema: copy }]);
  });

  it('refuses a template whose objects use another tenant’s, naming them', async () => {
    const other = await offeringStamp('shared');
    const template = await freshSchema('reach');
    await asTenant(
      template,
      `CREATE TABLE items (id int); CREATE TRIGGER stamp BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION ${other}.stamp()`,
    );
    const copy = uniqueName('copy');

    const reply = await clone(template, copy, false);

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(
      new RegExp(`would reach outside its schema: trigger stamp on .*uses function ${other}\\.stamp\\(\\)`),
    );
    expect(await roleExists(`${copy}_user`)).toBe(false);
  });

  it('never carries a grant to another tenant’s role', async () => {
    const template = await freshSchema('grants');
    const other = await freshSchema('other');
    await asTenant(
      template,
      `CREATE TABLE secrets (v text); GRANT SELECT ON secrets TO ${other}_user; GRANT SELECT ON secrets TO PUBLIC`,
    );
    const copy = uniqueName('copy');

    const reply = await clone(template, copy, false);

    expect(reply.status).toBe(201);
    expect(reply.body.clone.notCopied).toEqual([`SELECT on TABLE secrets to ${other}_user`]);
    const rights = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT has_table_privilege($1, $2, 'SELECT') AS other, has_table_privilege('public', $2, 'SELECT') AS public`,
            [`${other}_user`, `${copy}.secrets`],
          )
        ).rows[0],
    );
    // PUBLIC's grant is the template's own choice and comes along; the other tenant's read
    // comes only through PUBLIC, never from a grant of its own.
    expect(rights).toEqual({ other: true, public: true });
    const direct = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT count(*)::int AS n FROM pg_class c, aclexplode(c.relacl) a
              WHERE c.oid = $1::regclass AND a.grantee = (SELECT oid FROM pg_roles WHERE rolname = $2)`,
            [`${copy}.secrets`, `${other}_user`],
          )
        ).rows[0].n,
    );
    expect(direct).toBe(0);
  });

  it('makes names the tenant chose as names, never as SQL', async () => {
    const template = await freshSchema('names');
    const pwned = uniqueName('pwned');
    const evil = `x"; CREATE ROLE ${pwned}; --`;
    const quoted = `"${evil.replace(/"/g, '""')}"`;
    await asTenant(
      template,
      `CREATE TABLE ${quoted} (${quoted} text DEFAULT 'a''; CREATE ROLE ${pwned}; --');
       COMMENT ON TABLE ${quoted} IS $c$'); CREATE ROLE ${pwned}; --$c$;
       CREATE TYPE ${quoted.replace('x"', 'e"')} AS ENUM ($e$'); CREATE ROLE ${pwned}; --$e$)`,
    );
    const copy = uniqueName('copy');

    const reply = await clone(template, copy, false);

    expect(reply.status).toBe(201);
    expect(await roleExists(pwned)).toBe(false);
    const made = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT c.relname, obj_description(c.oid, 'pg_class') AS comment
               FROM pg_class c WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r'`,
            [copy],
          )
        ).rows,
    );
    expect(made).toEqual([{ relname: evil, comment: `'); CREATE ROLE ${pwned}; --` }]);
  });
});
