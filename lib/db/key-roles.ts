import { createHmac } from 'node:crypto';
import type pg from 'pg';
import { type Config, getConfig } from '#lib/config';
import { quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { createPool } from '#lib/db/pool';
import { scramVerifier } from '#lib/db/scram';
import { BadRequest } from '#lib/errors';

export type KeyType = 'anon' | 'service_role';

/**
 * The login roles SQL runs as on behalf of a schema's API keys: `<schema>_svc` (everything in the
 * schema) and `<schema>_anon` (reads only). Their session user is never the admin, so no SET ROLE,
 * set_config or DO block can climb out of them.
 */
export function keyRole(schema: string, keyType: KeyType): string {
  const role = `${schema}_${keyType === 'anon' ? 'anon' : 'svc'}`;
  if (role.length > 63) {
    throw new BadRequest(
      'Invalid schema name',
      `schema "${schema}" is too long for API keys (at most 58 characters)`,
    );
  }
  return role;
}

/** Derived, never stored: HMAC of the role name under the server secret. */
export function rolePassword(secret: string, role: string): string {
  return createHmac('sha256', secret).update(`dbadmin key role:${role}`).digest('base64url');
}

async function createLoginRole(client: pg.ClientBase, secret: string, role: string): Promise<boolean> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
  if (rowCount) return false;
  const verifier = scramVerifier(rolePassword(secret, role));
  await client.query(`CREATE ROLE ${quoteIdent(role)} LOGIN PASSWORD ${quoteLiteral(verifier)}`);
  await client.query(`GRANT ${quoteIdent(role)} TO CURRENT_USER`);
  return true;
}

/**
 * Creates the schema's key roles when missing (schemas made before API keys, such as public,
 * included) and grants them exactly their schema: svc all of it, anon SELECT on its tables, now
 * and for tables made later by the admin, the schema's user or svc.
 */
export async function ensureKeyRoles(client: pg.ClientBase, secret: string, schema: string): Promise<void> {
  const svcName = keyRole(schema, 'service_role');
  const anonName = keyRole(schema, 'anon');
  const createdSvc = await createLoginRole(client, secret, svcName);
  const createdAnon = await createLoginRole(client, secret, anonName);
  if (!createdSvc && !createdAnon) return;
  const s = quoteIdent(schema, 'schema name');
  const svc = quoteIdent(svcName);
  const anon = quoteIdent(anonName);
  const { rows } = await client.query<{ owner: string }>(
    `SELECT pg_get_userbyid(nspowner) AS owner FROM pg_namespace WHERE nspname = $1`,
    [schema],
  );
  const schemaUser = rows[0]?.owner === `${schema}_user` ? quoteIdent(`${schema}_user`) : undefined;
  // Session defaults, so a key's statement needs no prelude: its schema first, and for anon,
  // read-only transactions (its privileges forbid writes anyway).
  await client.query(`ALTER ROLE ${svc} SET search_path = ${s}, public`);
  await client.query(`ALTER ROLE ${anon} SET search_path = ${s}, public`);
  await client.query(`ALTER ROLE ${anon} SET default_transaction_read_only = on`);
  // svc acts as the schema's owner where there is one, so it can alter the tables the owner has.
  if (schemaUser) await client.query(`GRANT ${schemaUser} TO ${svc}`);
  await client.query(`
    GRANT USAGE, CREATE ON SCHEMA ${s} TO ${svc};
    GRANT USAGE ON SCHEMA ${s} TO ${anon};
    GRANT ALL ON ALL TABLES IN SCHEMA ${s} TO ${svc};
    GRANT ALL ON ALL SEQUENCES IN SCHEMA ${s} TO ${svc};
    GRANT SELECT ON ALL TABLES IN SCHEMA ${s} TO ${anon}`);
  for (const owner of ['CURRENT_USER', svc, ...(schemaUser ? [schemaUser] : [])]) {
    await client.query(`
      ALTER DEFAULT PRIVILEGES FOR ROLE ${owner} IN SCHEMA ${s} GRANT ALL ON TABLES TO ${svc};
      ALTER DEFAULT PRIVILEGES FOR ROLE ${owner} IN SCHEMA ${s} GRANT ALL ON SEQUENCES TO ${svc};
      ALTER DEFAULT PRIVILEGES FOR ROLE ${owner} IN SCHEMA ${s} GRANT SELECT ON TABLES TO ${anon}`);
  }
}

/** Schema deletion takes its key roles along (grants and default privileges included). */
export async function dropKeyRoles(client: pg.ClientBase, schema: string): Promise<void> {
  for (const keyType of ['service_role', 'anon'] as const) {
    const role = `${schema}_${keyType === 'anon' ? 'anon' : 'svc'}`;
    const { rowCount } = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [role]);
    if (!rowCount) continue;
    await client.query(`REASSIGN OWNED BY ${quoteIdent(role)} TO CURRENT_USER`);
    await client.query(`DROP OWNED BY ${quoteIdent(role)}`);
    await client.query(`DROP ROLE ${quoteIdent(role)}`);
  }
}

/** At most this many role pools per container; the least recently used one is closed. */
const MAX_ROLE_POOLS = 16;
const rolePools = new Map<string, pg.Pool>();

/**
 * A pool that logs in as a key role. `purpose` separates ad-hoc SQL (whose sessions are reset)
 * from dbadmin's own statements (which stay prepared).
 */
export async function getRolePool(role: string, purpose: 'query' | 'api'): Promise<pg.Pool> {
  const id = `${role}:${purpose}`;
  const existing = rolePools.get(id);
  if (existing) {
    rolePools.delete(id);
    rolePools.set(id, existing);
    return existing;
  }
  const config = await getConfig();
  const pool = createPool(roleConfig(config, role), `dbadmin-key-${purpose}`, true);
  rolePools.set(id, pool);
  if (rolePools.size > MAX_ROLE_POOLS) {
    const [oldest, oldestPool] = rolePools.entries().next().value as [string, pg.Pool];
    rolePools.delete(oldest);
    oldestPool.end().catch(() => undefined);
  }
  return pool;
}

function roleConfig(config: Config, role: string): Config {
  const url = new URL(config.DATABASE_URL);
  url.username = encodeURIComponent(role);
  url.password = encodeURIComponent(rolePassword(config.DBADMIN_SECRET, role));
  return { ...config, DATABASE_URL: url.toString() };
}

export async function closeRolePools(): Promise<void> {
  const pools = [...rolePools.values()];
  rolePools.clear();
  await Promise.all(pools.map((p) => p.end()));
}
