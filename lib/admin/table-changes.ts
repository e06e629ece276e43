import type pg from 'pg';
import { explainDuplicates, explainNulls } from '#lib/admin/failing-rows';
import type { Change } from '#lib/admin/schema-change';
import { columnOf, tableInfo } from '#lib/db/catalog';
import { assertTenantSchema } from '#lib/db/executor';
import { qualified, quoteCatalogName, quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { BadRequest } from '#lib/errors';

/**
 * Changes to a table as a whole: a new primary key (the old key's constraint dropped and the new
 * one added in one ALTER TABLE, so the table is never without one), a comment, a new name; in
 * that order, in one transaction. ALTER TABLE and RENAME take ACCESS EXCLUSIVE, COMMENT alone
 * SHARE UPDATE EXCLUSIVE (PostgreSQL's documentation). A new key some rows fail (NULLs,
 * duplicates) is a 400 saying how many and which, and nothing changes.
 */

export interface TableChangeInput {
  schema: string;
  table: string;
  rename?: string | undefined;
  /** A comment, or null to remove it. */
  comment?: string | null | undefined;
  /** The new primary key's columns, in key order. */
  primaryKey?: string[] | undefined;
}

/** The primary key constraint's name, if the table has one (read without a lock). */
async function primaryKeyName(catalog: pg.Pool, schema: string, table: string): Promise<string | undefined> {
  const { rows } = await catalog.query<{ name: string }>(
    `SELECT con.conname::text AS name FROM pg_catalog.pg_constraint con
       JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND con.contype = 'p'`,
    [schema, table],
  );
  return rows[0]?.name;
}

async function assertFreeName(catalog: pg.Pool, schema: string, name: string): Promise<void> {
  const { rows } = await catalog.query(
    `SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2`,
    [schema, name],
  );
  if (rows.length > 0)
    throw new BadRequest('Table exists', `schema "${schema}" already has a relation "${name}"`);
}

export async function planTableChange(catalog: pg.Pool, input: TableChangeInput): Promise<Change> {
  assertTenantSchema(input.schema);
  const info = await tableInfo(catalog, input.schema, input.table);
  const table = qualified(input.schema, input.table);
  const statements: string[] = [];
  const said: string[] = [];
  const key = input.primaryKey ?? [];
  if (key.length > 0) {
    for (const name of key) columnOf(info, name);
    const old = await primaryKeyName(catalog, input.schema, input.table);
    const drop = old ? `DROP CONSTRAINT ${quoteCatalogName(old)}, ` : '';
    statements.push(
      `ALTER TABLE ${table} ${drop}ADD PRIMARY KEY (${key.map((c) => quoteIdent(c, 'column name')).join(', ')})`,
    );
    said.push(`primary key (${key.join(', ')})`);
  }
  if (input.comment !== undefined) {
    statements.push(
      `COMMENT ON TABLE ${table} IS ${input.comment === null ? 'NULL' : quoteLiteral(input.comment)}`,
    );
    said.push(input.comment === null ? 'no comment' : 'a comment');
  }
  if (input.rename !== undefined) {
    await assertFreeName(catalog, input.schema, input.rename);
    statements.push(`ALTER TABLE ${table} RENAME TO ${quoteIdent(input.rename, 'table name')}`);
    said.push(`renamed to "${input.rename}"`);
  }
  if (statements.length === 0) {
    throw new BadRequest('Nothing to change', 'name at least one of rename, comment, primaryKey');
  }
  const onlyComment = key.length === 0 && input.rename === undefined;
  return {
    summary: `table "${input.table}": ${said.join(', ')}`,
    statements,
    locks: [
      {
        schema: input.schema,
        table: input.table,
        level: onlyComment ? 'SHARE UPDATE EXCLUSIVE' : 'ACCESS EXCLUSIVE',
      },
    ],
    rewrites: false,
    // A new primary key reads every row: NOT NULL on its columns, and its unique index.
    scans: key.length > 0,
    explain: async (client, error) =>
      explainDuplicates(
        client,
        info,
        key,
        await explainNulls(client, info, key, error, ', which a primary key cannot'),
      ),
  };
}
