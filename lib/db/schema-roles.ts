import { createHmac } from 'node:crypto';
import type pg from 'pg';
import type { AuditDraft } from '#lib/db/audit-log';
import { quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { isPgError, schemaBusy } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { scramVerifier } from '#lib/db/scram';
import { ApiError, BadRequest, NotFound } from '#lib/errors';

/**
 * The database roles that act inside one schema, so that PostgreSQL itself keeps whatever runs
 * there inside it. None of them is ever the service's own role, and none is a member of it:
 *
 * - `<schema>_exec`: the admin's requests in the schema (reads, writes, DDL, and ad-hoc SQL unless
 *   the admin opts into its own rights). A tenant's triggers, defaults, checks, rules and policies
 *   that fire there run with the schema's rights, not the service's.
 * - `<schema>_svc`: `service_role` keys; everything in the schema.
 * - `<schema>_anon`: `anon` keys; USAGE and SELECT, in read-only transactions.
 * - `<schema>_owner`: cannot log in; owns the schema. The tenant's `<schema>_user`, `_exec` and
 *   `_svc` are its members and work as it.
 *
 * They log in with passwords derived from DBADMIN_SECRET, never stored, reset whenever a pool for
 * them is made or a key is deleted: a password a tenant sets for one of them (any role may change
 * its own) lasts only until then. Key roles can log in only while a key of their type exists.
 */
export type RoleKind = 'exec' | 'svc' | 'anon';
/** `<schema>_owner`: NOLOGIN, owns the schema and what is made in it (see ensureOwner). */
type OwnerKind = 'owner';
export type KeyType = 'anon' | 'service_role';

export const kindOfKey = (keyType: KeyType): RoleKind => (keyType === 'anon' ? 'anon' : 'svc');

/** The suffixes of every role made for a schema; a schema may not be named like one of them. */
export const ROLE_SUFFIXES = ['_user', '_exec', '_svc', '_anon', '_owner'] as const;

/**
 * Connections a tenant's own login may hold at once (it must never take the server's last ones),
 * and the roles the service logs in as (one per container on Lambda, DB_POOL_MAX locally).
 * Only a role with CREATEROLE can raise them.
 */
export const TENANT_CONNECTION_LIMIT = 10;
export const ROLE_CONNECTION_LIMIT = 50;

export function roleName(schema: string, kind: RoleKind | OwnerKind): string {
  const role = `${schema}_${kind}`;
  if (role.length > 63) {
    throw new BadRequest(
      'Invalid schema name',
      `schema "${schema}" is too long to be administered (at most 57 characters)`,
    );
  }
  return role;
}

/** Derived, never stored: HMAC of the role name under the server secret. */
export function rolePassword(secret: string, role: string): string {
  return createHmac('sha256', secret).update(`dbadmin key role:${role}`).digest('base64url');
}

export interface SchemaRole {
  schema: string;
  kind: RoleKind;
  role: string;
  /**
   * The role whose rights the session works with (its objects belong to it): `<schema>_owner`,
   * which cannot log in (a session may change the password of the role it works as: that must
   * never give anyone a login). anon works as itself.
   */
  actsAs: string;
}

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

/** The current owner of the schema. */
async function schemaOwner(client: pg.ClientBase, schema: string): Promise<string | undefined> {
  const { rows } = await client.query<{ owner: string }>(
    'SELECT pg_catalog.pg_get_userbyid(nspowner) AS owner FROM pg_catalog.pg_namespace WHERE nspname = $1',
    [schema],
  );
  return rows[0]?.owner;
}

/** Creates the login role, or resets its password; LOGIN or NOLOGIN as asked. */
async function upsertLogin(
  client: pg.ClientBase,
  secret: string,
  role: string,
  login: boolean,
): Promise<boolean> {
  const exists = await roleExists(client, role);
  const verifier = quoteLiteral(scramVerifier(rolePassword(secret, role)));
  const attributes = `${login ? 'LOGIN' : 'NOLOGIN'} NOINHERIT CONNECTION LIMIT ${ROLE_CONNECTION_LIMIT} PASSWORD ${verifier}`;
  await client.query(`${exists ? 'ALTER' : 'CREATE'} ROLE ${quoteIdent(role)} ${attributes}`);
  // Settings the role gave itself (any role may) go with every reset.
  if (exists) await client.query(`ALTER ROLE ${quoteIdent(role)} RESET ALL`);
  // The service is a member of each role it made (never the other way round): it may cancel
  // their statements and, on PostgreSQL 16+, manage them.
  if (!exists) await client.query(`GRANT ${quoteIdent(role)} TO CURRENT_USER`);
  return !exists;
}

/**
 * `<schema>_owner` owns the schema and what the API makes in it. It cannot log in: every session
 * that works in the schema (the tenant's `<schema>_user`, `_exec`, `_svc`) works as it, and any
 * role may change its own password, which must never give anyone a login. A schema its
 * `<schema>_user` owned (made before this role existed) is handed over, objects included; the
 * user becomes a member that works as the owner by default, with all of the owner's rights.
 */
async function ensureOwner(client: pg.ClientBase, schema: string): Promise<string> {
  const owner = roleName(schema, 'owner');
  const o = quoteIdent(owner);
  if (!(await roleExists(client, owner))) {
    await client.query(`CREATE ROLE ${o} NOLOGIN`);
    await client.query(`GRANT ${o} TO CURRENT_USER`);
  }
  const user = `${schema}_user`;
  if ((await schemaOwner(client, schema)) === user) {
    const u = quoteIdent(user);
    const s = quoteIdent(schema, 'schema name');
    await client.query(`GRANT ${o} TO ${u}`);
    // Key roles made before the owner existed were members of the user: no longer.
    for (const kind of ['svc', 'anon'] as const) {
      const key = `${schema}_${kind}`;
      if (await roleExists(client, key)) await client.query(`REVOKE ${u} FROM ${quoteIdent(key)}`);
    }
    await client.query(`ALTER SCHEMA ${s} OWNER TO ${o}`);
    await client.query(`REASSIGN OWNED BY ${u} TO ${o}`);
    await client.query(`ALTER ROLE ${u} CONNECTION LIMIT ${TENANT_CONNECTION_LIMIT}`);
    await client.query(`ALTER ROLE ${u} SET role = ${quoteLiteral(owner)}`);
    // Should the tenant work as itself after all, what it makes stays reachable for the schema.
    await client.query(`
      ALTER DEFAULT PRIVILEGES FOR ROLE ${u} IN SCHEMA ${s} GRANT ALL ON TABLES TO ${o};
      ALTER DEFAULT PRIVILEGES FOR ROLE ${u} IN SCHEMA ${s} GRANT ALL ON SEQUENCES TO ${o}`);
  }
  return owner;
}

/**
 * Grants on the schema's relations one by one, and only on those whose owner's rights the
 * service holds: a single table someone else owns (a superuser's, say) must not make the grant,
 * and with it the whole schema, fail.
 */
async function grantOnRelations(
  client: pg.ClientBase,
  schema: string,
  privilege: string,
  to: string,
): Promise<void> {
  const { rows } = await client.query<{ name: string; sequence: boolean }>(
    `SELECT c.oid::regclass::text AS name, c.relkind = 'S' AS sequence
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
        AND pg_catalog.pg_has_role(c.relowner, 'USAGE')`,
    [schema],
  );
  // Names as the catalog prints them (qualified, quoted); not a caller's.
  const grants = rows
    .filter((row) => privilege === 'ALL' || !row.sequence)
    .map(
      (row) =>
        `GRANT ${privilege} ON ${row.sequence ? 'SEQUENCE' : 'TABLE'} ${row.name} TO ${quoteIdent(to)}`,
    );
  if (grants.length > 0) await client.query(grants.join(';\n'));
}

/** The grants that make `<schema>_exec` (and svc, through the same owner) act in the schema. */
async function grantExec(client: pg.ClientBase, schema: string, exec: string, owner: string): Promise<void> {
  const s = quoteIdent(schema, 'schema name');
  const o = quoteIdent(owner);
  await client.query(`GRANT ${o} TO ${quoteIdent(exec)}`);
  await client.query(`GRANT USAGE, CREATE ON SCHEMA ${s} TO ${o}`);
  // Tables the service's own role made there (ad-hoc SQL with the admin's rights), now and later.
  await grantOnRelations(client, schema, 'ALL', owner);
  await client.query(`
    ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT ALL ON TABLES TO ${o};
    ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT ALL ON SEQUENCES TO ${o}`);
}

async function grantAnon(client: pg.ClientBase, schema: string, anon: string, owner: string): Promise<void> {
  const s = quoteIdent(schema, 'schema name');
  const a = quoteIdent(anon);
  await client.query(`GRANT USAGE ON SCHEMA ${s} TO ${a}`);
  await grantOnRelations(client, schema, 'SELECT', anon);
  await client.query(`
    ALTER DEFAULT PRIVILEGES IN SCHEMA ${s} GRANT SELECT ON TABLES TO ${a};
    ALTER DEFAULT PRIVILEGES FOR ROLE ${quoteIdent(owner)} IN SCHEMA ${s} GRANT SELECT ON TABLES TO ${a}`);
}

async function hasActiveKey(client: pg.ClientBase, schema: string, kind: RoleKind): Promise<boolean> {
  const { rowCount } = await client.query(
    `SELECT 1 FROM _dbadmin.api_keys WHERE schema_name = $1 AND key_type = $2 AND is_active LIMIT 1`,
    [schema, kind === 'anon' ? 'anon' : 'service_role'],
  );
  return rowCount === 1;
}

/** How long work on a schema's roles waits for a lock a tenant may hold, before it gives up. */
const LOCK_WAIT = '2s' as const;

/** Ends every session of the roles (the service's own pooled ones reconnect when allowed to). */
export const endSessions = (client: pg.ClientBase | pg.Pool, roles: string[]) =>
  client.query(
    `SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity
      WHERE usename = ANY($1::text[]) AND pid <> pg_catalog.pg_backend_pid()`,
    [roles],
  );

/**
 * Makes the schema's role of this kind ready to log in as, within the caller's transaction:
 * created when missing (exec first: svc acts through the same owner), granted its rights,
 * password reset. A key role may log in only while an active key of its type exists; when none
 * does it is disabled (deleteKey ends its sessions). Idempotent; serialised per schema.
 *
 * Its grants wait on whatever a tenant's open transaction holds (an ALTER TABLE holds the table's
 * catalog row), and a tenant can make it run again (a refused login repairs the role): the wait
 * is bounded, a 409 past it, so the service's connection is back in 2 s, not at the query timeout.
 */
export async function prepareSchemaRole(
  client: pg.ClientBase,
  secret: string,
  schema: string,
  kind: RoleKind,
): Promise<SchemaRole> {
  const exec = roleName(schema, 'exec');
  const role = roleName(schema, kind);
  await client.query(`SET LOCAL lock_timeout = '${LOCK_WAIT}'`);
  try {
    if ((await lockSchema(client, schema)).closing) throw schemaClosing(schema);
    const owner = await ensureOwner(client, schema);
    await upsertLogin(client, secret, exec, true);
    await grantExec(client, schema, exec, owner);
    if (kind !== 'exec') {
      const login = await hasActiveKey(client, schema, kind);
      await upsertLogin(client, secret, role, login);
      if (kind === 'svc') await client.query(`GRANT ${quoteIdent(owner)} TO ${quoteIdent(role)}`);
      else await grantAnon(client, schema, role, owner);
    }
    return { schema, kind, role, actsAs: kind === 'anon' ? role : owner };
  } catch (error) {
    throw schemaBusy(schema, error);
  }
}

const schemaClosing = (schema: string) =>
  new NotFound('Schema not found', `schema "${schema}" is being deleted`);

/**
 * A key was deleted: its role's password is reset (whatever the key's SQL set is void) and it
 * may log in only while another key of its type exists. Nothing else is touched, so no lock a
 * tenant holds on its tables or owner role can hold the deletion up.
 */
export async function resetKeyRole(
  client: pg.ClientBase,
  secret: string,
  schema: string,
  kind: RoleKind,
): Promise<void> {
  const role = roleName(schema, kind);
  if (await roleExists(client, role))
    await upsertLogin(client, secret, role, await hasActiveKey(client, schema, kind));
}

/**
 * DBADMIN_SECRET changed: each login role of the schema that exists gets the password the new
 * secret derives, LOGIN as prepareSchemaRole leaves it (`_exec` always, a key role while an active
 * key of its type exists). Creates nothing. Within the caller's transaction, under lockSchema (see
 * revoking); answers the roles reset.
 */
export async function rederiveLogins(
  client: pg.ClientBase,
  secret: string,
  schema: string,
): Promise<string[]> {
  const reset: string[] = [];
  for (const kind of ['exec', 'svc', 'anon'] as const) {
    const role = roleName(schema, kind);
    if (!(await roleExists(client, role))) continue;
    await upsertLogin(client, secret, role, kind === 'exec' || (await hasActiveKey(client, schema, kind)));
    reset.push(role);
  }
  return reset;
}

/**
 * The service made the role: it grants itself each one it makes (upsertLogin). Not someone else's
 * role of the same name; a tenant cannot make roles at all (no CREATEROLE).
 */
async function madeByService(client: pg.ClientBase, role: string): Promise<boolean> {
  const { rowCount } = await client.query(
    `SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles r ON r.oid = m.roleid
      WHERE r.rolname = $1 AND m.member = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER)`,
    [role],
  );
  // Two rows on PostgreSQL 16+ unless the service is superuser: CREATE ROLE's grant, and upsertLogin's.
  return (rowCount ?? 0) > 0;
}

/**
 * The schema is gone (its owner may drop it) but its login roles are not: nothing legitimate logs
 * in as them any more (deleting a schema through the API drops them), so each one the service
 * made gets the password the secret derives and NOLOGIN. Within the caller's transaction, under
 * lockSchema (see revoking); answers the roles shut.
 */
export async function shutLogins(client: pg.ClientBase, secret: string, schema: string): Promise<string[]> {
  const shut: string[] = [];
  for (const kind of ['exec', 'svc', 'anon'] as const) {
    const role = roleName(schema, kind);
    if (!(await madeByService(client, role))) continue;
    await upsertLogin(client, secret, role, false);
    shut.push(role);
  }
  return shut;
}

/** Lock waits a tenant could cause, and its concurrent changes to the same role: worth a retry. */
const RETRYABLE = new Set(['55P03', '40001', '40P01']);
const retryable = (error: unknown) =>
  isPgError(error) &&
  (RETRYABLE.has(error.code) || /tuple concurrently (updated|deleted)/.test(error.message));

/**
 * Revokes something from a tenant that may be fighting it: every session of the roles ends
 * first (so none holds a lock on them), then `work` runs with a short lock timeout, retried a few
 * times should a new session get in between; once it commits, the sessions end again.
 */
export async function revoking<T>(
  db: pg.Pool,
  roles: string[],
  work: (client: pg.PoolClient) => Promise<T>,
  { audit }: { /** The request's audit entry, committed with the change. */ audit?: AuditDraft } = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    await endSessions(db, roles);
    try {
      const result = await withTransaction(db, work, { lockTimeout: LOCK_WAIT, audit });
      await endSessions(db, roles);
      return result;
    } catch (error) {
      if (!retryable(error)) throw error;
      if (attempt === 3)
        throw new ApiError(409, 'Conflict', "the schema's roles are busy changing; try again", {
          cause: error,
        });
    }
  }
}

/**
 * Before a schema is dropped: no role of it may log in any more (committed by the caller, see
 * revoking, before their sessions are ended, so none can slip back in).
 */
export async function shutOutSchema(client: pg.ClientBase, schema: string): Promise<void> {
  for (const suffix of ROLE_SUFFIXES) {
    const role = `${schema}${suffix}`;
    if (await roleExists(client, role)) await client.query(`ALTER ROLE ${quoteIdent(role)} NOLOGIN`);
  }
}

/** Schema deletion takes its roles along (grants and default privileges included); not `_user`. */
export async function dropSchemaRoles(client: pg.ClientBase, schema: string): Promise<void> {
  for (const kind of ['anon', 'svc', 'exec', 'owner'] as const) {
    const role = `${schema}_${kind}`;
    if (!(await roleExists(client, role))) continue;
    await client.query(`REASSIGN OWNED BY ${quoteIdent(role)} TO CURRENT_USER`);
    await client.query(`DROP OWNED BY ${quoteIdent(role)}`);
    await client.query(`DROP ROLE ${quoteIdent(role)}`);
  }
}
