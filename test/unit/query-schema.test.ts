import { querySchema, schemasNamedIn } from '#lib/admin/query-schema';

/** Which schemas PostgreSQL's parser finds named in the admin's SQL (lib/admin/query-schema). */

describe('the schemas SQL names', () => {
  it.each([
    // The statement: tables on both sides of a foreign key.
    [
      'alter table shop.orders add constraint orders_person_fk foreign key (person_id) references shop.people(id)',
      ['shop'],
    ],
    ['SELECT * FROM Shop.Orders', ['shop']],
    ['SELECT * FROM "Shop".orders', ['Shop']],
    ['SELECT * FROM db.shop.orders', ['shop']],
    ['SELECT shop.orders.id, db.shop.orders.id FROM shop.orders', ['shop']],
    ['SELECT r.payload.x FROM shop.orders r', ['shop']],
    ['SELECT o.addr.city FROM orders o', []],
    ['SELECT shop.f(1)', ['shop']],
    ['SELECT 1 OPERATOR(shop.+) 2', ['shop']],
    ['SELECT 1 OPERATOR(shop.=) ANY (SELECT 1)', ['shop']],
    ["SELECT 'a'::shop.mood, 'b' COLLATE shop.c", ['shop']],
    ['CREATE TABLE t (a shop.d DEFAULT shop.next_id(), b int REFERENCES shop.p (id))', ['shop']],
    ['CREATE TABLE t () INHERITS (shop.p)', ['shop']],
    ['CREATE TABLE t (LIKE shop.p)', ['shop']],
    ['CREATE INDEX ON t (a shop.ops)', ['shop']],
    ['CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION shop.f()', ['shop']],
    ['CREATE OPERATOR shop.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = shop.same)', ['shop']],
    [
      'CREATE OPERATOR === (LEFTARG = int, RIGHTARG = int, FUNCTION = f, COMMUTATOR = OPERATOR(shop.===))',
      ['shop'],
    ],
    ['CREATE AGGREGATE shop.total(int) (SFUNC = shop.add, STYPE = int)', ['shop']],
    ["CREATE TYPE shop.mood AS ENUM ('ok')", ['shop']],
    ['CREATE DOMAIN shop.positive AS int CHECK (VALUE > 0)', ['shop']],
    ['CREATE SEQUENCE shop.s', ['shop']],
    ['ALTER SEQUENCE s OWNED BY shop.t.id', ['shop']],
    ['CREATE FUNCTION f(a shop.t.a%TYPE) RETURNS int LANGUAGE sql AS $$ SELECT 1 $$', ['shop']],
    ['CREATE FUNCTION f() RETURNS int BEGIN ATOMIC SELECT count(*) FROM shop.t; END', ['shop']],
    ['DROP FUNCTION shop.f(int)', ['shop']],
    ['DROP TABLE shop.t, shop.u', ['shop']],
    ['DROP TRIGGER x ON shop.t', ['shop']],
    ['DROP OPERATOR CLASS shop.ops USING btree', ['shop']],
    ['DROP OPERATOR CLASS ops USING btree', []],
    ["COMMENT ON COLUMN shop.t.a IS 'x'", ['shop']],
    ["COMMENT ON SCHEMA shop IS 'x'", ['shop']],
    ['DROP SCHEMA shop CASCADE', ['shop']],
    ['CREATE SCHEMA shop', ['shop']],
    ['ALTER SCHEMA shop RENAME TO store', ['shop', 'store']],
    ['GRANT SELECT ON ALL TABLES IN SCHEMA shop TO someone', ['shop']],
    ['GRANT USAGE ON SCHEMA shop TO someone', ['shop']],
    ['GRANT SELECT ON shop.t TO someone', ['shop']],
    ['ALTER DEFAULT PRIVILEGES IN SCHEMA shop GRANT SELECT ON TABLES TO someone', ['shop']],
    ['CREATE EXTENSION hstore SCHEMA shop', ['shop']],
    ['SET search_path TO shop', ['shop']],
    ['SET search_path TO "$user", public', ['public']],
    ['TRUNCATE shop.t', ['shop']],
    ['COPY shop.t (a, b) FROM STDIN', ['shop']],
    ['EXPLAIN SELECT * FROM shop.t', ['shop']],
    ['CREATE TABLE shop.t (a int); INSERT INTO t VALUES (1); SELECT * FROM t', ['shop']],
    ['SELECT * FROM _dbadmin.api_keys', ['_dbadmin']],
    ['ALTER TABLE shop.t SET SCHEMA store', ['shop', 'store']],
    ['INSERT INTO shop.t SELECT * FROM store.t', ['shop', 'store']],
    ['SELECT * FROM shop.t; SELECT * FROM store.t', ['shop', 'store']],
  ])('%s names %j', async (sql, schemas) => {
    expect(await schemasNamedIn(sql)).toEqual(schemas);
  });

  it.each([
    ['SELECT * FROM t WHERE a = 1'],
    ['SELECT * FROM pg_catalog.pg_class JOIN information_schema.tables ON true'],
    ['SELECT pg_catalog.now(), 1::int, x::pg_catalog.text FROM pg_toast.pg_toast_1'],
    ["SELECT nextval('shop.s')"],
    ['DO $$ BEGIN PERFORM 1 FROM shop.t; END $$'],
    ["CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT count(*) FROM shop.t'"],
    ['COPY t TO STDOUT WITH (FORMAT csv, FORCE_QUOTE (a, b))'],
    ['SELECT t.a, t.* FROM t'],
  ])('%s names none', async (sql) => {
    expect(await schemasNamedIn(sql)).toEqual([]);
  });

  it('cannot read SQL with a syntax error: PostgreSQL is left to report it', async () => {
    expect(await schemasNamedIn('SELECT * FROM shop.t WHERE')).toBeUndefined();
    expect(await schemasNamedIn('CREATE TABLE shop.t (a int); SELEC 1')).toBeUndefined();
  });
});

describe('where a request’s SQL runs', () => {
  const admin = { kind: 'admin' } as const;
  const key = { kind: 'key', id: 1, schema: 'mine', keyType: 'service_role' } as const;
  const sql = 'SELECT * FROM shop.t';
  /** Every schema exists but `gone`. */
  const exists = async (schema: string) => schema !== 'gone';

  it('in the schema sent, whatever the SQL names', async () => {
    expect(await querySchema({ sql, schema: 'other', principal: admin, adminRights: false, exists })).toBe(
      'other',
    );
  });

  it('for a key, in its own schema, unread', async () => {
    expect(await querySchema({ sql, schema: undefined, principal: key, adminRights: false, exists })).toBe(
      'mine',
    );
  });

  it('with the admin’s rights, in public, unread', async () => {
    expect(await querySchema({ sql, schema: undefined, principal: admin, adminRights: true, exists })).toBe(
      'public',
    );
  });

  it('for the admin as a schema’s role: the one schema named, else public', async () => {
    const where = (text: string) =>
      querySchema({ sql: text, schema: undefined, principal: admin, adminRights: false, exists });

    expect(await where(sql)).toBe('shop');
    expect(await where('SELECT 1')).toBe('public');
    expect(await where('SELEC 1')).toBe('public');
  });

  it('refuses a schema the SQL names that does not exist, saying how to make one', async () => {
    await expect(
      querySchema({
        sql: 'SELECT * FROM gone.t',
        schema: undefined,
        principal: admin,
        adminRights: false,
        exists,
      }),
    ).rejects.toMatchObject({
      status: 400,
      title: 'Schema not found',
      message: expect.stringMatching(/POST \/api\/schema\/create/),
    });
  });

  it('refuses SQL that names several schemas with 400, naming them and how to choose', async () => {
    await expect(
      querySchema({
        sql: 'SELECT * FROM shop.t, store.t',
        schema: undefined,
        principal: admin,
        adminRights: false,
        exists,
      }),
    ).rejects.toMatchObject({
      status: 400,
      title: 'Several schemas',
      message: expect.stringMatching(/"shop", "store".*"schema".*"runAs": "admin"/),
    });
  });

  it('refuses SQL that names a schema dbadmin cannot act in with 400, and how to choose', async () => {
    await expect(
      querySchema({
        sql: 'SELECT * FROM "my-shop".t',
        schema: undefined,
        principal: admin,
        adminRights: false,
        exists,
      }),
    ).rejects.toMatchObject({
      status: 400,
      title: 'Invalid schema name',
      message: expect.stringMatching(/"my-shop".*"runAs": "admin"/),
    });
  });
});
