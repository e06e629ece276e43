import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { asTenant, loginAs } from '#test/security/tenant';
import { roleExists, schemaExists, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freshSchema } from '#test/support/tables';

afterAll(closePool);

const clone = (body: Record<string, unknown>) =>
  call(schemas, {
    method: 'POST',
    path: '/api/schema/create',
    body: { password: 'clone-pass-1', ...body },
  });

/** A template with one of everything a copy makes, written by its tenant with unqualified names. */
async function richTemplate(): Promise<string> {
  const template = await freshSchema('tmpl');
  await asTenant(
    template,
    `CREATE TYPE mood AS ENUM ('calm', 'it''s fine', 'loud');
     CREATE SEQUENCE invoice_no START 1000 INCREMENT 10;
     CREATE FUNCTION shout(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT upper(t) $$;
     CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql SET search_path = ${template} AS $$
       BEGIN NEW.note := coalesce(NEW.note, '') || '+stamped'; RETURN NEW; END $$;
     CREATE TABLE customers (
       id serial PRIMARY KEY,
       name text NOT NULL CHECK (length(name) > 0),
       email text UNIQUE,
       mood mood DEFAULT 'calm',
       loud text GENERATED ALWAYS AS (shout(name)) STORED,
       invoice int DEFAULT nextval('invoice_no'),
       note text COLLATE "C"
     );
     CREATE TABLE orders (
       id bigint GENERATED ALWAYS AS IDENTITY (START WITH 50),
       customer_id int NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
       total numeric(12,2) DEFAULT 0,
       PRIMARY KEY (id)
     );
     CREATE INDEX orders_by_customer ON orders (customer_id) WHERE total > 0;
     CREATE INDEX customers_lower_email ON customers (lower(email));
     CREATE TRIGGER stamp BEFORE INSERT ON customers FOR EACH ROW EXECUTE FUNCTION stamp();
     CREATE VIEW big_orders AS SELECT id, customer_id, total FROM orders WHERE total > 100;
     CREATE VIEW big_customers AS SELECT c.name, count(*) AS n FROM customers c JOIN big_orders o ON o.customer_id = c.id GROUP BY c.name;
     CREATE MATERIALIZED VIEW order_totals AS SELECT customer_id, sum(total) AS total FROM orders GROUP BY customer_id;
     CREATE UNIQUE INDEX order_totals_key ON order_totals (customer_id);
     ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
     CREATE POLICY own_orders ON orders FOR SELECT TO PUBLIC USING (total >= 0);
     COMMENT ON TABLE customers IS 'People who buy';
     COMMENT ON COLUMN customers.email IS 'Where the receipts go';
     COMMENT ON TYPE mood IS 'How they feel';
     CREATE FUNCTION total_of(c int) RETURNS numeric LANGUAGE sql STABLE BEGIN ATOMIC SELECT sum(total) FROM orders WHERE customer_id = c; END;
     REVOKE EXECUTE ON FUNCTION shout(text) FROM PUBLIC;
     INSERT INTO customers (name, email) VALUES ('ada', 'ada@example.com'), ('bob', NULL);
     INSERT INTO orders (customer_id, total) VALUES (1, 250), (2, 5);`,
  );
  return template;
}

/** Every dependency of the schema's objects on an object in `other`: a copy must have none. */
const reachesInto = (schema: string, other: string) =>
  withAdminClient(async (c) => {
    const { rows } = await c.query(
      `WITH mine AS (
         SELECT d.classid, d.objid FROM pg_depend d WHERE d.refobjid = (SELECT oid FROM pg_namespace WHERE nspname = $1)
         UNION SELECT 'pg_class'::regclass, i.indexrelid FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
         UNION SELECT 'pg_attrdef'::regclass, a.oid FROM pg_attrdef a JOIN pg_class c ON c.oid = a.adrelid AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
         UNION SELECT 'pg_constraint'::regclass, k.oid FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
         UNION SELECT 'pg_rewrite'::regclass, r.oid FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
         UNION SELECT 'pg_trigger'::regclass, t.oid FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid AND c.relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1)
       )
       SELECT pg_describe_object(d.classid, d.objid, d.objsubid) AS what, pg_describe_object(d.refclassid, d.refobjid, 0) AS uses
         FROM mine m JOIN pg_depend d ON d.classid = m.classid AND d.objid = m.objid
        WHERE (pg_identify_object(d.refclassid, d.refobjid, 0)).schema = $2
           OR (d.refclassid = 'pg_namespace'::regclass AND d.refobjid = (SELECT oid FROM pg_namespace WHERE nspname = $2))`,
      [schema, other],
    );
    return rows;
  });

describe('POST /api/schema/create from a template', () => {
  it('makes every kind of object again as the new schema’s own, and nothing in it reaches the template', async () => {
    const template = await richTemplate();
    const name = uniqueName('copy');

    const reply = await clone({ schemaName: name, template });

    expect(reply.status).toBe(201);
    expect(reply.body).toMatchObject({
      success: true,
      username: `${name}_user`,
      clone: {
        template,
        withData: false,
        counts: {
          tables: 2,
          views: 3,
          sequences: 2,
          functions: 3,
          types: 1,
          indexes: 3,
          triggers: 1,
          policies: 1,
        },
        notCopied: [],
      },
    });
    expect(await reachesInto(name, template)).toEqual([]);
    const facts = await withAdminClient(async (c) => {
      const one = async (sql: string) => (await c.query(sql)).rows;
      return {
        owners: await one(
          `SELECT DISTINCT pg_get_userbyid(relowner) AS owner FROM pg_class WHERE relnamespace = '${name}'::regnamespace`,
        ),
        comments: await one(
          `SELECT obj_description('${name}.customers'::regclass, 'pg_class') AS t,
                  col_description('${name}.customers'::regclass, 2) AS c,
                  obj_description('${name}.mood'::regtype, 'pg_type') AS ty`,
        ),
        stamp: await one(
          `SELECT proconfig FROM pg_proc WHERE proname = 'stamp' AND pronamespace = '${name}'::regnamespace`,
        ),
        shout: await one(
          `SELECT has_function_privilege('public', '${name}.shout(text)', 'EXECUTE') AS public_can`,
        ),
        rls: await one(`SELECT relrowsecurity FROM pg_class WHERE oid = '${name}.orders'::regclass`),
        rows: await one(
          `SELECT (SELECT count(*) FROM ${name}.customers) + (SELECT count(*) FROM ${name}.orders) AS n`,
        ),
      };
    });
    expect(facts.owners).toEqual([{ owner: `${name}_owner` }]);
    expect(facts.comments).toEqual([{ t: 'People who buy', c: null, ty: 'How they feel' }]);
    expect(facts.stamp).toEqual([{ proconfig: [`search_path=${name}`] }]);
    expect(facts.shout).toEqual([{ public_can: false }]);
    expect(facts.rls).toEqual([{ relrowsecurity: true }]);
    expect(facts.rows).toEqual([{ n: 0 }]);

    // The copy works as its own: its login inserts, its trigger and generated column and sequences
    // run, sequences start over.
    const login = loginAs(`${name}_user`, 'clone-pass-1');
    await login.connect();
    try {
      await login.query(`INSERT INTO customers (name, email) VALUES ('cy', 'cy@example.com')`);
      await login.query('INSERT INTO orders (customer_id, total) VALUES (1, 300)');
      const { rows } = await login.query(
        `SELECT c.id, c.loud, c.note, c.invoice, c.mood::text, o.id AS order_id, total_of(1)::text AS total
           FROM customers c JOIN orders o ON o.customer_id = c.id`,
      );
      expect(rows).toEqual([
        { id: 1, loud: 'CY', note: '+stamped', invoice: 1000, mood: 'calm', order_id: 50, total: '300.00' },
      ]);
      await expect(
        login.query(`INSERT INTO customers (name, email) VALUES ('dup', 'cy@example.com')`),
      ).rejects.toThrow(/duplicate key/);
      await expect(login.query('INSERT INTO orders (customer_id) VALUES (99)')).rejects.toThrow(
        /foreign key/,
      );
    } finally {
      await login.end();
    }
    const lineage = await withAdminClient(
      async (c) =>
        (
          await c.query('SELECT template, with_data FROM _dbadmin.schema_templates WHERE schema_name = $1', [
            name,
          ])
        ).rows,
    );
    expect(lineage).toEqual([{ template, with_data: false }]);
  });

  it('copies the rows with withData, sequences and materialized views where the template left them', async () => {
    const template = await richTemplate();
    const name = uniqueName('copyrows');

    const reply = await clone({ schemaName: name, template, withData: true });

    expect(reply.status).toBe(201);
    expect(reply.body.clone).toMatchObject({ withData: true, rows: 4 });
    const { rows } = await withAdminClient((c) =>
      c.query(
        `SELECT (SELECT json_agg(json_build_object('id', id, 'name', name, 'loud', loud, 'note', note) ORDER BY id) FROM ${name}.customers) AS customers,
                (SELECT json_agg(total ORDER BY customer_id) FROM ${name}.order_totals) AS totals,
                nextval('${name}.customers_id_seq') AS next_customer`,
      ),
    );
    // Rows came as they were (the trigger, made after them, did not stamp them again).
    expect(rows[0]).toEqual({
      customers: [
        { id: 1, name: 'ada', loud: 'ADA', note: '+stamped' },
        { id: 2, name: 'bob', loud: 'BOB', note: '+stamped' },
      ],
      totals: [250, 5],
      next_customer: 3,
    });
  });

  it('rewrites a function’s search path naming a mixed-case template to the copy’s name', async () => {
    const template = `Tm_${uniqueName('x').slice(2)}`;
    const copy = `Cp_${uniqueName('x').slice(2)}`;
    expect(
      (
        await call(schemas, {
          method: 'POST',
          path: '/api/schema/create',
          body: { schemaName: template, password: 'p-12345678' },
        })
      ).status,
    ).toBe(201);
    const login = loginAs(`${template}_user`, 'p-12345678');
    await login.connect();
    try {
      await login.query(
        `CREATE TABLE t (id int); CREATE FUNCTION n() RETURNS bigint LANGUAGE sql SET search_path = "${template}", public
           AS $$ SELECT count(*) FROM t $$`,
      );
    } finally {
      await login.end();
    }

    const reply = await clone({ schemaName: copy, template });

    expect(reply.status).toBe(201);
    const config = await withAdminClient(
      async (c) =>
        (
          await c.query(
            'SELECT proconfig FROM pg_proc WHERE proname = $1 AND pronamespace = $2::regnamespace',
            ['n', `"${copy}"`],
          )
        ).rows,
    );
    expect(config).toEqual([{ proconfig: [`search_path="${copy}", public`] }]);
  });

  it('refuses a function body that names the template, naming it, and makes nothing', async () => {
    const template = await freshSchema('tmplq');
    await asTenant(
      template,
      `CREATE TABLE t (id int); CREATE FUNCTION count_t() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM ${template}.t $$`,
    );
    const name = uniqueName('nope');

    const reply = await clone({ schemaName: name, template });

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Template not supported');
    expect(reply.body.message).toContain('function count_t() names schema');
    expect(await schemaExists(name)).toBe(false);
    expect(await roleExists(`${name}_user`)).toBe(false);
  });

  it('refuses what it cannot copy (a domain, a rule), naming each', async () => {
    const template = await freshSchema('tmpld');
    await asTenant(
      template,
      `CREATE DOMAIN positive AS int CHECK (VALUE > 0); CREATE TABLE t (id int);
       CREATE RULE no_delete AS ON DELETE TO t DO INSTEAD NOTHING`,
    );

    const reply = await clone({ schemaName: uniqueName('nope'), template });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/type positive.*rule no_delete on t/);
  });

  it('deletes the new schema again when the copy fails halfway', async () => {
    const template = await freshSchema('tmplf');
    // A check that holds in the template and fails in any copy: its rows cannot be copied.
    await asTenant(
      template,
      `CREATE TABLE t (id int, home text CHECK (home = current_schema()));
       INSERT INTO t VALUES (1, current_schema())`,
    );
    const name = uniqueName('half');

    const reply = await clone({ schemaName: name, template, withData: true });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/violates check constraint/);
    expect(await schemaExists(name)).toBe(false);
    expect(await roleExists(`${name}_user`)).toBe(false);
    const lineage = await withAdminClient(
      async (c) =>
        (await c.query('SELECT 1 FROM _dbadmin.schema_templates WHERE schema_name = $1', [name])).rowCount,
    );
    expect(lineage).toBe(0);
  });

  it('answers 404 for a template that does not exist and 400 for withData alone', async () => {
    const missing = await clone({ schemaName: uniqueName('x'), template: uniqueName('ghost') });
    const alone = await clone({ schemaName: uniqueName('x'), withData: true });

    expect([missing.status, missing.body.error]).toEqual([404, 'Schema not found']);
    expect(alone.status).toBe(400);
    expect(alone.body.message).toContain('withData needs a template');
  });
});
