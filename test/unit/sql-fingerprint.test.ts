import { describeSql } from '#lib/admin/sql-fingerprint';

/** What the audit log keeps of ad-hoc SQL: kinds, and a fingerprint no value can be read back from. */
describe('describeSql', () => {
  it.each([
    ["INSERT INTO t (a) VALUES ('one')", "insert into t (a)\n values ('two')"],
    ['SELECT * FROM t WHERE a = 1', 'select * from t where a = 2'],
    ["ALTER ROLE r PASSWORD 'hunter2'", "ALTER ROLE r PASSWORD 'correct horse'"],
    ["COMMENT ON TABLE t IS 'private note'", "COMMENT ON TABLE t IS 'other'"],
    ['DO $$ BEGIN PERFORM 1; END $$', "DO $$ BEGIN RAISE NOTICE 'x'; END $$"],
    [
      "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
      "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 42'",
    ],
  ])('gives %j and %j one fingerprint: values are not in it', async (one, other) => {
    const [a, b] = await Promise.all([describeSql(one), describeSql(other)]);
    expect(a.fingerprint).toMatch(/^[0-9a-f]{16}$/);
    expect(b.fingerprint).toBe(a.fingerprint);
  });

  it.each([
    ['SELECT a FROM t', 'SELECT b FROM t'],
    ['DELETE FROM t WHERE a IS NULL', 'DELETE FROM t WHERE b IS NULL'],
    ['SELECT a::int FROM t', 'SELECT b::int FROM t'],
  ])('tells %j and %j apart: names are in it', async (one, other) => {
    const [a, b] = await Promise.all([describeSql(one), describeSql(other)]);
    expect(b.fingerprint).not.toBe(a.fingerprint);
  });

  it('names each statement’s kind, as PostgreSQL would', async () => {
    expect((await describeSql('CREATE TABLE x (id int); DROP TABLE x; UPDATE t SET a = 1')).kind).toBe(
      'CREATE TABLE, DROP TABLE, UPDATE',
    );
    expect((await describeSql('CREATE INDEX ON t (a)')).kind).toBe('CREATE INDEX');
    expect((await describeSql('ALTER TABLE t ADD COLUMN b int')).kind).toBe('ALTER TABLE');
  });

  it('keeps the kind alone for SQL its parser cannot read', async () => {
    expect(await describeSql('SELEC oops')).toEqual({ kind: 'UNKNOWN' });
  });
});
