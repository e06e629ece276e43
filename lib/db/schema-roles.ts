import { createHmac } from 'node:crypto';
import type pg from 'pg';
import { quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { TEXT_OUTPUT_SETTINGS } from '#lib/db/json-rows';
import { schemaBusy } from '#lib/db/pg-errors';
import { throughPooler } from '#lib/db/pooler';
import { type RoleAdmin, withRoleAdmin } from '#lib/db/role-admin';
import {
  ROLE_CONNECTION_LIMIT,
  type RoleKind,
  roleName,
  rolePassword,
  type SchemaRole,
  schemaRole,
  TENANT_CONNECTION_LIMIT,
} from '#lib/db/role-names';
import { lockSchema, roleExists } from '#lib/db/schema-locks';
import { DERIVED_ITERATIONS, scramVerifier } from '#lib/db/scram';
import { NotFound } from '#lib/errors';

/**
 * Making a schema's roles (lib/db/role-names) and granting them their rights, within the caller's
 * transaction: the owner, the logins with their derived passwords, the grants on what the schema
 * holds and will hold. Taking them away again is lib/db/role-revocation's. Role statements run as
 * the roles' administrator, and the owner's rights are lent to the service while it grants in the
 * schema (lib/db/role-admin).
 */

/** The current owner of the schema. */
export async function schemaOwner(client: pg.ClientBase, schema: string): Promise<string | undefined> {
  const { rows } = await client.query<{ owner: string }>(
    'SELECT pg_catalog.pg_get_userbyid(nspowner) AS owner FROM pg_catalog.pg_namespace WHERE nspname = $1',
    [schema],
  );
  return rows[0]?.owner;
}

/**
 * What every session of the role works under, in the order its defaults are set: its schema
 * alone on the search path (the name itself, unquoted), values printed as lib/db/json-rows reads
 * them, acting as the schema's owner (a key's anon role as itself), and an anon role read-only.
 */
export function sessionSettings(role: SchemaRole): Array<[name: string, value: string]> {
  return [
    ['search_path', role.schema],
    ...Object.entries(TEXT_OUTPUT_SETTINGS),
    ...(role.actsAs !== role.role ? [['role', role.actsAs] as [string, string]] : []),
    ...(role.kind === 'anon' ? [['default_transaction_read_only', 'on'] as [string, string]] : []),
  ];
}

/**
 * Whether a login keeps its sessions' settings as its own defaults: when the service reaches the
 * database through a transaction pooler (lib/db/pooler), whose reset restores them, so that what
 * runs outside a transaction has them too. Connected directly, each session fixes them at login
 * and the role keeps none (every default of a tenant's role is a row that assertOffSearchPaths
 * reads for each new schema).
 */
const keepsDefaults = (db: pg.ClientBase | pg.Pool) => throughPooler(db);

/**
 * Creates the login role, or resets its password; LOGIN or NOLOGIN as asked. Settings the role
 * gave itself (any role may) go with every reset; a login gets its sessions' settings as its own
 * defaults when it keeps them (keepsDefaults).
 */
export async function upsertLogin(
  client: pg.ClientBase,
  roles: RoleAdmin,
  secret: string,
  role: SchemaRole,
  login: boolean,
): Promise<boolean> {
  const exists = await roleExists(client, role.role);
  const r = quoteIdent(role.role);
  const verifier = quoteLiteral(await loginVerifier(secret, role.role));
  const attributes = `${login ? 'LOGIN' : 'NOLOGIN'} NOINHERIT CONNECTION LIMIT ${ROLE_CONNECTION_LIMIT} PASSWORD ${verifier}`;
  await roles.run(`${exists ? 'ALTER' : 'CREATE'} ROLE ${r} ${attributes}`);
  if (!exists) await roles.made(role.role);
  // Neither setting nor resetting `role` may run in a shard's door: the role's ADMIN OPTION lent.
  await roles.lend([role.role], { admin: true });
  const defaults =
    login && keepsDefaults(client)
      ? sessionSettings(role).map(
          ([name, value]) => `ALTER ROLE ${r} SET ${quoteIdent(name)} = ${quoteLiteral(value)}`,
        )
      : [];
  // Its defaults in every database, and those it gave itself for this one (which outrank them),
  // in the round trip that sets ours: this database named by the server, whatever its name.
  const here = `DO $reset$ BEGIN
    EXECUTE pg_catalog.format('ALTER ROLE %I IN DATABASE %I RESET ALL', ${quoteLiteral(role.role)}, pg_catalog.current_database());
  END $reset$`;
  await client.query([`ALTER ROLE ${r} RESET ALL`, here, ...defaults].join('; '));
  return !exists;
}

/**
 * The role's SCRAM verifier: its salt derived from the secret like its password, so preparing
 * the role again sets the very verifier it has. A pooler that checked a client against the
 * verifier it read (PgBouncer's auth_query) then logs in to PostgreSQL with it still, whichever
 * process prepared the role meanwhile.
 */
const loginVerifier = (secret: string, role: string) =>
  scramVerifier(
    rolePassword(secret, role),
    DERIVED_ITERATIONS,
    createHmac('sha256', secret).update(`dbadmin scram salt ${role}`).digest().subarray(0, 16),
  );

/**
 * `<schema>_owner` owns the schema and what the API makes in it. It cannot log in: every session
 * that works in the schema (the tenant's `<schema>_user`, `_exec`, `_svc`) works as it, and any
 * role may change its own password, which must never give anyone a login. A schema its
 * `<schema>_user` owned (made before this role existed) is handed over, objects included; the
 * user becomes a member that works as the owner by default, with all of the owner's rights.
 */
async function ensureOwner(client: pg.ClientBase, roles: RoleAdmin, schema: string): Promise<string> {
  const owner = roleName(schema, 'owner');
  const o = quoteIdent(owner);
  if (!(await roleExists(client, owner))) {
    await roles.run(`CREATE ROLE ${o} NOLOGIN`);
    await roles.made(owner);
  }
  // The rights of every role of the schema that may own something in it (grantOnRelations).
  const owners = [owner];
  for (const kind of ['user', 'exec', 'svc'] as const) {
    const role = `${schema}_${kind}`;
    if (await roleExists(client, role)) owners.push(role);
  }
  await roles.lend(owners);
  const user = `${schema}_user`;
  if ((await schemaOwner(client, schema)) === user) {
    const u = quoteIdent(user);
    const s = quoteIdent(schema, 'schema name');
    // Key roles made before the owner existed were members of the user: no longer.
    const keys = [];
    for (const kind of ['svc', 'anon'] as const) {
      const key = `${schema}_${kind}`;
      if (await roleExists(client, key)) keys.push(`REVOKE ${u} FROM ${quoteIdent(key)};`);
    }
    await roles.run(
      `GRANT ${o} TO ${u}; ${keys.join(' ')} ALTER ROLE ${u} CONNECTION LIMIT ${TENANT_CONNECTION_LIMIT}`,
    );
    await roles.lend([user], { admin: true });
    await client.query(`ALTER SCHEMA ${s} OWNER TO ${o}`);
    await client.query(`REASSIGN OWNED BY ${u} TO ${o}`);
    await workAsOwner(client, schema, user, owner);
  }
  return owner;
}

/**
 * The tenant's login works as the schema's owner from its first statement; should the tenant work
 * as itself after all, what it makes stays reachable for the schema. The user's rights and its
 * ADMIN OPTION lent (ALTER ROLE ... SET role cannot run in a shard's door).
 */
export async function workAsOwner(client: pg.ClientBase, schema: string, user: string, owner: string) {
  const u = quoteIdent(user);
  const s = quoteIdent(schema, 'schema name');
  const o = quoteIdent(owner);
  await client.query(`ALTER ROLE ${u} SET role = ${quoteLiteral(owner)}`);
  await client.query(`
    ALTER DEFAULT PRIVILEGES FOR ROLE ${u} IN SCHEMA ${s} GRANT ALL ON TABLES TO ${o};
    ALTER DEFAULT PRIVILEGES FOR ROLE ${u} IN SCHEMA ${s} GRANT ALL ON SEQUENCES TO ${o}`);
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
async function grantExec(
  client: pg.ClientBase,
  roles: RoleAdmin,
  schema: string,
  exec: string,
  owner: string,
): Promise<void> {
  const s = quoteIdent(schema, 'schema name');
  const o = quoteIdent(owner);
  await roles.run(`GRANT ${o} TO ${quoteIdent(exec)}`);
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
export const LOCK_WAIT = '2s' as const;

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
    const prepare = async (roles: RoleAdmin) => {
      const owner = await ensureOwner(client, roles, schema);
      await upsertLogin(client, roles, secret, schemaRole(schema, 'exec'), true);
      await grantExec(client, roles, schema, exec, owner);
      if (kind === 'exec') return;
      const login = await hasActiveKey(client, schema, kind);
      await upsertLogin(client, roles, secret, schemaRole(schema, kind), login);
      if (kind === 'svc') await roles.run(`GRANT ${quoteIdent(owner)} TO ${quoteIdent(role)}`);
      else await grantAnon(client, schema, role, owner);
    };
    await withRoleAdmin(client, schema, prepare);
    // Prepared for this schema (not one dropped and made again under its name), with this secret,
    // as this version of the code prepares: a change to any of them makes it prepared again.
    await client.query(
      `UPDATE _dbadmin.schema_locks l
          SET prepared = CASE WHEN l.prepared_for = f.prepared_for
                              THEN pg_catalog.array_append(pg_catalog.array_remove(l.prepared, $2), $2)
                              ELSE ARRAY[$2] END,
              prepared_for = f.prepared_for
         FROM (SELECT $3 || ':' || n.oid AS prepared_for FROM pg_catalog.pg_namespace n WHERE n.nspname = $1::text) f
        WHERE l.schema_name = $1`,
      [schema, kind, preparedWith(secret)],
    );
    return schemaRole(schema, kind);
  } catch (error) {
    throw schemaBusy(schema, error);
  }
}

const schemaClosing = (schema: string) =>
  new NotFound('Schema not found', `schema "${schema}" is being deleted`);

/**
 * What a preparation depends on besides the schema (whose oid is added): the secret the
 * passwords derive from, and this code's way of preparing. Raise the version whenever
 * prepareSchemaRole grants or sets something new, so every schema is prepared again.
 */
const PREPARATION_VERSION = 2;
const preparedWith = (secret: string) =>
  `${PREPARATION_VERSION}:${createHmac('sha256', secret).update('dbadmin role preparation').digest('base64url').slice(0, 16)}`;

/**
 * Whether the role can be logged in as without preparing it first: prepareSchemaRole did so at
 * the last change of the schema's roles, for this very schema (not one dropped and made again under its
 * name), with this secret and this version of the code; the role is still a member of the one
 * it works as; and the role's defaults are still exactly those upsertLogin set, none when they
 * are not kept (any role may set its own; they would reach every session of it). One read on the
 * service's pool, no lock: the cost of a role every process but the first finds ready. A login
 * that fails after all (a password the tenant set, a key deleted meanwhile) repairs it
 * (lib/db/executor).
 */
export async function roleReady(
  client: pg.ClientBase | pg.Pool,
  secret: string,
  schema: string,
  kind: RoleKind,
): Promise<boolean> {
  const { role, actsAs } = schemaRole(schema, kind);
  const { rows } = await client.query<{ closing: boolean; ready: boolean }>(
    `SELECT l.closing,
            $2 = ANY (l.prepared) AND l.prepared_for = $3 || ':' || n.oid
            AND ($4 = $5 OR EXISTS (
                  SELECT 1 FROM pg_catalog.pg_auth_members m
                    JOIN pg_catalog.pg_roles r ON r.oid = m.member
                    JOIN pg_catalog.pg_roles o ON o.oid = m.roleid
                   WHERE r.rolname = $4 AND o.rolname = $5))
            AND (SELECT pg_catalog.array_agg(s.setdatabase::pg_catalog.text || ':' || c.setting ORDER BY s.setdatabase, c.n)
                   FROM pg_catalog.pg_db_role_setting s JOIN pg_catalog.pg_roles r ON r.oid = s.setrole,
                        pg_catalog.unnest(s.setconfig) WITH ORDINALITY AS c(setting, n)
                  WHERE r.rolname = $4
                    AND s.setdatabase IN (0, (SELECT d.oid FROM pg_catalog.pg_database d
                                               WHERE d.datname = pg_catalog.current_database())))
                IS NOT DISTINCT FROM (CASE WHEN $7 THEN ('0:search_path=' || pg_catalog.quote_ident($1)) || $6::text[] END) AS ready
       FROM _dbadmin.schema_locks l LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = l.schema_name
      WHERE l.schema_name = $1`,
    [
      schema,
      kind,
      preparedWith(secret),
      role,
      actsAs,
      storedDefaults(schemaRole(schema, kind)),
      keepsDefaults(client),
    ],
  );
  const found = rows[0];
  if (found?.closing) throw schemaClosing(schema);
  return found?.ready ?? false;
}

/**
 * The role's defaults after search_path as pg_db_role_setting keeps them (`0:` for every
 * database), in the order upsertLogin sets them; search_path's is quoted by PostgreSQL itself.
 */
const storedDefaults = (role: SchemaRole) =>
  sessionSettings(role)
    .filter(([name]) => name !== 'search_path')
    .map(([name, value]) => `0:${name}=${value}`);

/**
 * Something changed the schema's roles (a key's role reset or shut, passwords re-derived, the
 * schema made again): none of them counts as prepared any more, and the next process to open a
 * session of one prepares it again first. Under lockSchema.
 */
export async function unprepareRoles(client: pg.ClientBase, schema: string): Promise<void> {
  await client.query(`UPDATE _dbadmin.schema_locks SET prepared = '{}' WHERE schema_name = $1`, [schema]);
}

/**
 * A key was deleted: its role's password is reset (whatever the key's SQL set is void) and it
 * may log in only while another key of its type exists. So is `<schema>_exec`'s: code a
 * service_role key planted runs in the admin's sessions there, and may have given that role a
 * password of its own to keep after its key is gone (deleteKey ends both roles' sessions).
 * Nothing else is touched, so no lock a tenant holds on its tables or owner role can hold the
 * deletion up.
 */
export async function resetKeyRole(
  client: pg.ClientBase,
  secret: string,
  schema: string,
  kind: RoleKind,
): Promise<void> {
  const role = roleName(schema, kind);
  const exec = roleName(schema, 'exec');
  await withRoleAdmin(client, schema, async (roles) => {
    if (await roleExists(client, role))
      await upsertLogin(
        client,
        roles,
        secret,
        schemaRole(schema, kind),
        await hasActiveKey(client, schema, kind),
      );
    if (await roleExists(client, exec))
      await upsertLogin(client, roles, secret, schemaRole(schema, 'exec'), true);
  });
  await unprepareRoles(client, schema);
}

/**
 * DBADMIN_SECRET changed: each login role of the schema the service administers gets the password the new
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
  await withRoleAdmin(client, schema, async (roles) => {
    for (const kind of ['exec', 'svc', 'anon'] as const) {
      const role = roleName(schema, kind);
      // Not a role someone else made under the name (in another database of the server, say).
      if (!(await roles.administers(role))) continue;
      const login = kind === 'exec' || (await hasActiveKey(client, schema, kind));
      await upsertLogin(client, roles, secret, schemaRole(schema, kind), login);
      reset.push(role);
    }
  });
  await unprepareRoles(client, schema);
  return reset;
}
