import type pg from 'pg';
import { getRolePool, keyRole } from '#lib/db/key-roles';
import { getDatabase, getQueryPool } from '#lib/db/pool';
import type { Principal } from '#lib/principal';

/**
 * The connections an operation runs on: the admin's for the admin, and for an API key a pool that
 * logs in as the key's role, so PostgreSQL itself keeps the key inside its schema.
 */
export async function databaseFor(principal: Principal | undefined): Promise<pg.Pool> {
  if (principal?.kind !== 'key') return getDatabase();
  await getDatabase(); // migrated before anything else runs
  return getRolePool(keyRole(principal.schema, principal.keyType), 'api');
}

/** Connections for ad-hoc SQL, reset after every use. */
export async function queryDatabaseFor(principal: Principal | undefined): Promise<pg.Pool> {
  if (principal?.kind !== 'key') return getQueryPool();
  return getRolePool(keyRole(principal.schema, principal.keyType), 'query');
}
