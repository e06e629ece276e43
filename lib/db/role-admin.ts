import pg from 'pg';
import { quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { ROLES_SCHEMA } from '#lib/db/own-schemas';
import { ROLE_SUFFIXES } from '#lib/db/role-names';
import { lockSchema, roleExists } from '#lib/db/schema-locks';

/**
 * Who changes a schema's roles, and how the service borrows their rights for one transaction.
 *
 * PostgreSQL 16+ makes whoever creates a role a member of it (with ADMIN OPTION), and checks each
 * role statement (ALTER ROLE, GRANT role, DROP ROLE) by walking every membership of the role that
 * runs it. Were the service the maker of every tenant's roles, that walk would grow with the
 * tenants (at 1,000 schemas a key took 18 times as long to create as at the first), and the
 * service would hold, for good, the rights of every tenant's owner: whatever a tenant planted
 * that the service's own SQL touched would run with them.
 *
 * So the service is a member of no tenant role. The roles of up to SHARD_SCHEMAS schemas are
 * made and administered by a shard, a NOLOGIN role `<service>_shard_<n>` whose one door is the
 * SECURITY DEFINER function `_dbadmin_roles."<service>_shard_<n>"(text)`: it runs the role
 * statements it is given, and only the service may call it. Shards are made by the hub,
 * `<service>_tenants`, through `_dbadmin_roles.hub(text)`, which a superuser provisions once
 * (hubProvisioning): the service cannot make the hub without becoming a member of it, and so of
 * everything the hub's shards make.
 *
 * Where the service needs a role's rights (to create the schema for its owner, grant on its
 * tables, drop what it owns), the shard lends them for the caller's transaction and takes them
 * back before it commits (withRoleAdmin): a lend never outlives its transaction, and one that
 * fails is rolled back with it.
 *
 * Without the hub (a server dbadmin did not provision, or the service a superuser), and for the
 * roles of schemas made before shards existed, the service administers the roles itself as a
 * member of each, as it always did: `direct`.
 */

/** Schemas whose roles one shard administers: what its own role statements walk stays this small. */
export const SHARD_SCHEMAS = 100;

const HUB_SCHEMA = ROLES_SCHEMA;
const HUB = `${HUB_SCHEMA}.hub`;

export interface RoleAdmin {
  /** Runs role statements (CREATE/ALTER/DROP ROLE, GRANT/REVOKE a role) as the roles' administrator. */
  run(statements: string): Promise<void>;
  /** A role just made by `run`: recorded as the service's (administers). */
  made(role: string): Promise<void>;
  /** Whether the role is one this administrator made (not someone else's role of the same name). */
  administers(role: string): Promise<boolean>;
  /**
   * The roles' rights, and with `admin` their ADMIN OPTION (ALTER ROLE ... SET role needs it), to
   * the service until the end of withRoleAdmin's work.
   */
  lend(roles: readonly string[], options?: { admin?: boolean }): Promise<void>;
  /** The role was dropped: nothing of it to give back. */
  dropped(role: string): void;
  /** The schema is gone: its shard has room for another. */
  release(): Promise<void>;
}

interface Found {
  service: string;
  version: number;
  superuser: boolean;
  /** The hub may be used: its door, and the predefined roles the service then needs. */
  hub: boolean;
  /** The shard recorded for the schema (_dbadmin.schema_locks.role_shard). */
  shard: string | null;
  /** Some role of the schema exists. */
  roles: boolean;
  /** The service is a member of one of them: made before shards existed. */
  member: boolean;
}

/**
 * Runs `work` with the administrator of the schema's roles, within the caller's transaction (under
 * lockSchema, so lends of one schema's roles never overlap), and takes back whatever was lent
 * before the transaction can commit; should `work` fail, the transaction's rollback takes the
 * lends back with everything else. Nested on the same client, it is the same administrator, and
 * only the outermost call gives back.
 */
export async function withRoleAdmin<T>(
  client: pg.ClientBase,
  schema: string,
  work: (roles: RoleAdmin) => Promise<T>,
): Promise<T> {
  const outer = active.get(client);
  if (outer) {
    if (outer.schema !== schema)
      throw new Error(`roles of "${schema}" asked for while "${outer.schema}"'s are lent`);
    return work(outer.roles);
  }
  const roles = await roleAdmin(client, schema);
  active.set(client, { schema, roles });
  try {
    const result = await work(roles);
    await roles.giveBack();
    return result;
  } finally {
    active.delete(client);
  }
}

/** The administrator at work on each client, for nested withRoleAdmin. */
const active = new WeakMap<pg.ClientBase, { schema: string; roles: Lending }>();

type Lending = RoleAdmin & { giveBack(): Promise<void> };

/**
 * Which shard administers a schema's roles is dbadmin's own record, not PostgreSQL's membership
 * rows: before PostgreSQL 16 a role may grant and revoke membership in itself, so a tenant could
 * forge those.
 */
async function roleAdmin(client: pg.ClientBase, schema: string): Promise<Lending> {
  const schemaRoles = ROLE_SUFFIXES.map((suffix) => `${schema}${suffix}`);
  const { rows } = await client.query<Found>(
    `SELECT CURRENT_USER AS service,
            pg_catalog.current_setting('server_version_num')::int AS version,
            (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER) AS superuser,
            COALESCE(pg_catalog.has_function_privilege(
                       pg_catalog.to_regprocedure('${HUB}(pg_catalog.text)'), 'EXECUTE'), false)
              AND pg_catalog.pg_has_role('pg_signal_backend', 'USAGE')
              AND pg_catalog.pg_has_role('pg_read_all_stats', 'USAGE') AS hub,
            (SELECT role_shard FROM _dbadmin.schema_locks WHERE schema_name = $2) AS shard,
            EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ANY ($1::text[])) AS roles,
            EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m
                      JOIN pg_catalog.pg_roles r ON r.oid = m.roleid
                     WHERE r.rolname = ANY ($1::text[])
                       AND m.member = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER)) AS member`,
    [schemaRoles, schema],
  );
  const found = rows[0] as Found;
  if (found.superuser) return administeredDirectly(client, found);
  if (found.shard !== null) return sharded(client, schema, found, found.shard);
  // Roles the service made itself, or someone else's: as before shards. None yet: a shard's.
  if (found.member || found.roles || !found.hub) return administeredDirectly(client, found);
  return sharded(client, schema, found, null);
}

const NOTHING = async () => undefined;

/** The service administers the roles itself, a member of each (with its rights) from its making. */
function administeredDirectly(client: pg.ClientBase, found: Found): Lending {
  const run = async (statements: string) => {
    await client.query(statements);
  };
  return {
    run,
    made: (role) => run(`GRANT ${quoteIdent(role)} TO CURRENT_USER`),
    // Before 16 CREATEROLE administers any role, and the membership is the tenant's to revoke.
    administers: (role) =>
      found.version < 160000 ? roleExists(client, role) : isMember(client, role, found.service),
    lend: NOTHING,
    dropped: () => undefined,
    release: NOTHING,
    giveBack: NOTHING,
  };
}

/** A shard administers the roles; a schema that has none yet is given one when it makes its first. */
function sharded(client: pg.ClientBase, schema: string, found: Found, recorded: string | null): Lending {
  let shard = recorded;
  const run = async (statements: string) => {
    shard ??= await takeShard(client, schema, found.service);
    await client.query(`SELECT ${HUB_SCHEMA}.${pg.escapeIdentifier(shard)}($1)`, [statements]);
  };
  const service = pg.escapeIdentifier(found.service);
  const names = (roles: Iterable<string>) => [...roles].map((role) => quoteIdent(role)).join(', ');
  const lent = new Set<string>();
  return {
    run,
    // PostgreSQL 16+ made the shard a member (with ADMIN OPTION) at CREATE ROLE; before 16 a
    // membership is not needed to administer the role, and is not proof of anything.
    made: NOTHING,
    // Before 16 a role of the schema's name that exists is the shard's: createSchema refuses
    // names taken, and no one else can make roles of them while the record stands.
    administers: async (role) =>
      shard !== null && (found.version < 160000 ? roleExists(client, role) : isMember(client, role, shard)),
    lend: async (roles, options) => {
      const more = options?.admin ? roles : roles.filter((role) => !lent.has(role));
      if (more.length === 0) return;
      await run(`GRANT ${names(more)} TO ${service}${options?.admin ? ' WITH ADMIN OPTION' : ''}`);
      for (const role of more) lent.add(role);
    },
    dropped: (role) => {
      lent.delete(role);
    },
    release: async () => {
      if (shard === null) return;
      await client.query(
        'UPDATE _dbadmin.role_shards SET schemas = GREATEST(schemas - 1, 0) WHERE shard = $1',
        [shard],
      );
    },
    giveBack: async () => {
      if (lent.size === 0) return;
      await run(`REVOKE ${names(lent)} FROM ${service}`);
      lent.clear();
    },
  };
}

async function isMember(client: pg.ClientBase, role: string, member: string): Promise<boolean> {
  const { rowCount } = await client.query(
    `SELECT 1 FROM pg_catalog.pg_auth_members m
       JOIN pg_catalog.pg_roles r ON r.oid = m.roleid JOIN pg_catalog.pg_roles a ON a.oid = m.member
      WHERE r.rolname = $1 AND a.rolname = $2`,
    [role, member],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * A shard with room for one more schema's roles, recorded as the schema's: the fullest that is not
 * full, so shards fill one by one; a new one when none has room. A shard another schema's making
 * holds is passed over rather than waited for.
 */
async function takeShard(client: pg.ClientBase, schema: string, service: string): Promise<string> {
  const take = async () =>
    (
      await client.query<{ shard: string }>(
        `UPDATE _dbadmin.role_shards SET schemas = schemas + 1
          WHERE shard = (SELECT shard FROM _dbadmin.role_shards WHERE schemas < $1
                          ORDER BY schemas DESC, shard LIMIT 1 FOR UPDATE SKIP LOCKED)
          RETURNING shard`,
        [SHARD_SCHEMAS],
      )
    ).rows[0]?.shard;
  const shard = (await take()) ?? (await makeShard(client, service, take));
  const { rowCount } = await client.query(
    'UPDATE _dbadmin.schema_locks SET role_shard = $2 WHERE schema_name = $1',
    [schema, shard],
  );
  // Callers hold the schema's lock row; roles made without a record would be nobody's.
  if (rowCount !== 1) throw new Error(`no lock row for schema "${schema}" to record its shard in`);
  return shard;
}

/**
 * One maker of shards at a time: a row lock in _dbadmin (an advisory lock any login could take and
 * hold), released at the end of the making transaction.
 */
async function makeShard(
  client: pg.ClientBase,
  service: string,
  take: () => Promise<string | undefined>,
): Promise<string> {
  await lockSchema(client, SHARD_MAKING);
  // The shard whoever held the lock before made has room, now that its making committed.
  const made = await take();
  if (made) return made;
  const { rows } = await client.query<{ made: string }>('SELECT count(*) AS made FROM _dbadmin.role_shards');
  let n = Number(rows[0]?.made) + 1;
  // A role of that name someone else made is not ours to use.
  while (await roleExists(client, `${service}_shard_${n}`)) n++;
  const shard = `${service}_shard_${n}`;
  await client.query(`SELECT ${HUB}($1)`, [shardMaking(shard, service)]);
  await client.query('INSERT INTO _dbadmin.role_shards (shard, schemas) VALUES ($1, 1)', [shard]);
  return shard;
}

/** The lock row of shard making: no schema's name (those start with a letter). */
const SHARD_MAKING = '_role_shards';

/**
 * A door: runs the statements it is given with its owner's rights, search path pinned, nothing of
 * the caller's. Only the service may call one.
 */
const doorMaking = (door: string, owner: string, service: string) =>
  `CREATE FUNCTION ${door}(statements pg_catalog.text)
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $door$ BEGIN EXECUTE statements; END $door$;
REVOKE ALL ON FUNCTION ${door}(pg_catalog.text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ${door}(pg_catalog.text) TO ${pg.escapeIdentifier(service)};
ALTER FUNCTION ${door}(pg_catalog.text) OWNER TO ${owner};`;

/**
 * What the hub runs to make a shard: the role, and its door, which the hub creates and hands over
 * (ALTER FUNCTION ... OWNER needs the hub able to act as the shard, and the shard allowed to
 * create in the door's schema for that moment).
 */
function shardMaking(shard: string, service: string): string {
  const s = pg.escapeIdentifier(shard);
  return `CREATE ROLE ${s} NOLOGIN NOINHERIT CREATEROLE;
GRANT ${s} TO CURRENT_USER;
GRANT CREATE ON SCHEMA ${HUB_SCHEMA} TO ${s};
${doorMaking(`${HUB_SCHEMA}.${s}`, s, service)}
REVOKE CREATE ON SCHEMA ${HUB_SCHEMA} FROM ${s};`;
}

/**
 * What a superuser runs once in the service's database to give it shards, in one transaction
 * (the embedded server's provisioning runs it at every start, deploy/postgres-init on the
 * container's first start): the hub and its door; `pg_signal_backend` and `pg_read_all_stats`,
 * with which the service cancels and ends tenants' sessions, and sees what they run, without
 * being a member of their roles. The service uses the hub only when all of it is there.
 */
export function hubProvisioning(service: string): string {
  const hub = pg.escapeIdentifier(`${service}_tenants`);
  return `BEGIN;
DO $hub$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(`${service}_tenants`)}) THEN
    CREATE ROLE ${hub} NOLOGIN NOINHERIT CREATEROLE;
  END IF;
END $hub$;
CREATE SCHEMA IF NOT EXISTS ${HUB_SCHEMA} AUTHORIZATION ${hub};
REVOKE ALL ON SCHEMA ${HUB_SCHEMA} FROM PUBLIC;
GRANT USAGE ON SCHEMA ${HUB_SCHEMA} TO ${pg.escapeIdentifier(service)};
DROP FUNCTION IF EXISTS ${HUB}(pg_catalog.text);
${doorMaking(HUB, hub, service)}
GRANT pg_signal_backend, pg_read_all_stats TO ${pg.escapeIdentifier(service)};
COMMIT;`;
}
