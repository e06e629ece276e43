import type pg from 'pg';

/**
 * The row locks that serialise changes to one schema and its roles across every dbadmin process
 * (`_dbadmin.schema_locks`: an advisory lock any login could take and hold), and whether a role
 * exists. Beneath lib/db/schema-roles and lib/db/role-admin, which both take them.
 */

/**
 * Serialises changes to one schema (and its roles) across every dbadmin process: a row lock.
 * Answers whether the schema is being deleted.
 */
export async function lockSchema(client: pg.ClientBase, schema: string): Promise<{ closing: boolean }> {
  await client.query(
    `INSERT INTO _dbadmin.schema_locks (schema_name) VALUES ($1) ON CONFLICT (schema_name) DO NOTHING`,
    [schema],
  );
  const { rows } = await client.query<{ closing: boolean }>(
    'SELECT closing FROM _dbadmin.schema_locks WHERE schema_name = $1 FOR UPDATE',
    [schema],
  );
  return { closing: rows[0]?.closing ?? false };
}

export async function roleExists(client: pg.ClientBase, role: string): Promise<boolean> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1', [role]);
  return rowCount === 1;
}
