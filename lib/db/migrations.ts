import type pg from 'pg';
import { quoteCatalogName } from '#lib/db/identifiers';

/** dbadmin's own schema. Its name cannot be created or dropped through the API (leading `_`). */
export const INTERNAL_SCHEMA = '_dbadmin';

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

/** Append only: a migration, once released, is never edited. */
export const MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: 'license cache',
    sql: `
      CREATE TABLE _dbadmin.license_cache (
        machine_id        varchar(64) PRIMARY KEY,
        license_key_hash  varchar(255),
        license_type      varchar(20),
        expires_at        timestamptz,
        last_validated_at timestamptz,
        created_at        timestamptz NOT NULL DEFAULT now(),
        updated_at        timestamptz NOT NULL DEFAULT now()
      )`,
  },
  {
    id: 2,
    name: 'api keys',
    sql: `
      CREATE TABLE _dbadmin.api_keys (
        id           serial PRIMARY KEY,
        schema_name  text NOT NULL,
        key_name     text NOT NULL,
        key_type     text NOT NULL CHECK (key_type IN ('anon', 'service_role')),
        key_hash     bytea NOT NULL UNIQUE,
        key_prefix   varchar(8) NOT NULL,
        created_at   timestamptz NOT NULL DEFAULT now(),
        last_used_at timestamptz,
        is_active    boolean NOT NULL DEFAULT true,
        UNIQUE (schema_name, key_name)
      )`,
  },
  {
    id: 3,
    name: 'schema locks',
    // Rows to lock while a schema or its roles change: unlike advisory locks, which any login may
    // take (and hold, to stop the admin), nobody but the service can touch this table.
    sql: `CREATE TABLE _dbadmin.schema_locks (schema_name text PRIMARY KEY)`,
  },
];

/** Serialises changes to one schema (and its roles) across every dbadmin process: a row lock. */
export async function lockSchema(client: pg.ClientBase, schema: string): Promise<void> {
  await client.query(
    `INSERT INTO _dbadmin.schema_locks (schema_name) VALUES ($1) ON CONFLICT (schema_name) DO NOTHING`,
    [schema],
  );
  await client.query('SELECT 1 FROM _dbadmin.schema_locks WHERE schema_name = $1 FOR UPDATE', [schema]);
}

/** Any fixed number serves; it only has to be the same in every dbadmin process. */
const MIGRATION_LOCK = 0x0db_ad_01;

/** Where a set of migrations keeps its record, and the advisory lock that serialises it. */
export interface MigrationTarget {
  schema: string;
  lock: number;
}

export const INTERNAL_TARGET: MigrationTarget = { schema: INTERNAL_SCHEMA, lock: MIGRATION_LOCK };

async function upToDate(client: pg.ClientBase, schema: string, migrations: readonly Migration[]) {
  const quoted = quoteCatalogName(schema);
  const { rows: found } = await client.query('SELECT to_regclass($1) AS t', [`${quoted}.migrations`]);
  if (!found[0]?.t) return false;
  const { rows } = await client.query<{ id: number }>(`SELECT id FROM ${quoted}.migrations`);
  const applied = new Set(rows.map((row) => row.id));
  return migrations.every((migration) => applied.has(migration.id));
}

/**
 * Brings a schema (by default `_dbadmin`) up to date. Runs under a session advisory lock so that
 * concurrent cold starts apply each migration once; each migration commits with its record.
 */
export async function migrate(
  client: pg.ClientBase,
  migrations: readonly Migration[] = MIGRATIONS,
  target: MigrationTarget = INTERNAL_TARGET,
): Promise<number[]> {
  // Our own schema names, never a caller's: _dbadmin starts with an underscore on purpose.
  const schema = quoteCatalogName(target.schema);
  // Up to date (every cold start but the first after an upgrade): no lock, so an advisory lock a
  // tenant holds on the same number cannot stop the service from starting.
  if (await upToDate(client, target.schema, migrations)) return [];
  await client.query('SELECT pg_advisory_lock($1)', [target.lock]);
  try {
    await client.query(`
      CREATE SCHEMA IF NOT EXISTS ${schema};
      CREATE TABLE IF NOT EXISTS ${schema}.migrations (
        id         integer PRIMARY KEY,
        name       text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
    const { rows } = await client.query<{ id: number }>(`SELECT id FROM ${schema}.migrations`);
    const done = new Set(rows.map((row) => row.id));
    const applied: number[] = [];
    for (const migration of migrations) {
      if (done.has(migration.id)) continue;
      await client.query('BEGIN');
      try {
        await client.query(migration.sql);
        await client.query(`INSERT INTO ${schema}.migrations (id, name) VALUES ($1, $2)`, [
          migration.id,
          migration.name,
        ]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      }
      applied.push(migration.id);
    }
    return applied;
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [target.lock]);
  }
}
