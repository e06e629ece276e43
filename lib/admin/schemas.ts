import type pg from 'pg';
import { inheritLedger } from '#lib/admin/tenant-migrations';
import type { AuditDraft } from '#lib/db/audit-log';
import type { CatalogRead } from '#lib/db/catalog-read';
import { dropRolePool } from '#lib/db/executor';
import { forgetSchemaRecords } from '#lib/db/idempotency';
import { quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { DBADMIN_SCHEMAS } from '#lib/db/own-schemas';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { type RoleAdmin, withRoleAdmin } from '#lib/db/role-admin';
import { ROLE_SUFFIXES, roleName, TENANT_CONNECTION_LIMIT } from '#lib/db/role-names';
import { dropRole, dropSchemaRoles, revoking, shutOutSchema } from '#lib/db/role-revocation';
import { lockSchema, roleExists } from '#lib/db/schema-locks';
import { prepareSchemaRole, schemaOwner, unprepareRoles, workAsOwner } from '#lib/db/schema-roles';
import { scramVerifier } from '#lib/db/scram';
import { searchPathNaming } from '#lib/db/search-paths';
import { BadRequest, NotFound } from '#lib/errors';

/**
 * Tenant schemas made and deleted: the schema, its owner and login roles (lib/db/schema-roles), its
 * keys and quota rows, all under the schema's lock; and which schema names are PostgreSQL's or
 * dbadmin's own and never a tenant's.
 */

const SYSTEM_SCHEMAS = new Set([
  ...DBADMIN_SCHEMAS,
  'public',
  'pg_catalog',
  'information_schema',
  'pg_toast',
]);

export const isProtectedSchema = (name: string) => SYSTEM_SCHEMAS.has(name) || name.startsWith('pg_');

/** The dedicated login role of a schema. */
export const schemaUser = (schemaName: string) => `${schemaName}_user`;

/** Every schema but PostgreSQL's own and dbadmin's, by name: one row, for the sign-in read to carry. */
export const schemasRead: CatalogRead<string[]> = {
  name: 'dbadmin.list-schemas',
  text: `SELECT coalesce(array_agg(nspname::text ORDER BY nspname), '{}') AS names FROM pg_namespace
          WHERE nspname !~ '^pg_' AND nspname <> 'information_schema' AND nspname <> ALL ($1::text[])`,
  values: [DBADMIN_SCHEMAS],
  schema: null,
  decode: (row) => (row?.names as string[] | undefined) ?? [],
};

async function schemaExists(client: pg.ClientBase, schemaName: string): Promise<boolean> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schemaName]);
  return rowCount === 1;
}

export interface CreateSchemaInput {
  schemaName: string;
  password: string;
}

/**
 * A schema on someone's search path would let whoever writes there (its tenant) plant functions
 * and operators that role then runs: a schema named like a role ("$user" in the default search
 * path) or named in a role's search_path setting is refused, as is one whose roles would be named
 * like another schema.
 */
async function assertOffSearchPaths(client: pg.ClientBase, schemaName: string): Promise<void> {
  if (await roleExists(client, schemaName)) {
    throw new BadRequest(
      'Invalid schema name',
      `a database role named "${schemaName}" exists, and "$user" in the default search path would put this schema on it; choose another name`,
    );
  }
  const naming = await searchPathNaming(client, schemaName);
  if (naming) {
    const who = naming.role ? `role "${naming.role}"` : 'the database';
    throw new BadRequest(
      'Invalid schema name',
      `schema "${schemaName}" is named in the search path setting of ${who}; choose another name`,
    );
  }
  const { rows: twins } = await client.query<{ nspname: string }>(
    'SELECT nspname FROM pg_namespace WHERE nspname = ANY($1::text[])',
    [ROLE_SUFFIXES.map((suffix) => `${schemaName}${suffix}`)],
  );
  if (twins[0]) {
    throw new BadRequest(
      'Invalid schema name',
      `schema "${twins[0].nspname}" exists, and a role of this schema would be named like it (it would be on that role's search path); choose another name`,
    );
  }
}

/**
 * Creates the schema, its login role `<schemaName>_user` (with the rights of the schema's owner,
 * `<schemaName>_owner`) and the role the admin's requests in it run as (`<schemaName>_exec`).
 * All or nothing.
 */
export async function createSchema(
  db: pg.Pool,
  secret: string,
  { schemaName, password }: CreateSchemaInput,
  audit: AuditDraft | undefined,
  cloneOf?: { template: string; withData: boolean; snapshot: string },
) {
  const username = schemaUser(schemaName);
  await withTransaction(
    db,
    async (client) => {
      await lockSchema(client, schemaName);
      await client.query('UPDATE _dbadmin.schema_locks SET closing = false WHERE schema_name = $1', [
        schemaName,
      ]);
      // Roles of an earlier schema of this name were never prepared for this one.
      await unprepareRoles(client, schemaName);
      if (await schemaExists(client, schemaName)) {
        throw new BadRequest('Schema exists', `schema "${schemaName}" already exists`);
      }
      await assertOffSearchPaths(client, schemaName);
      for (const role of ROLE_SUFFIXES.map((suffix) => `${schemaName}${suffix}`)) {
        if (await roleExists(client, role)) {
          throw new BadRequest(
            'User exists',
            `database role "${role}" already exists; drop it or choose another schema name`,
          );
        }
      }
      // Keys of an earlier schema of this name (deleted halfway, or raced) never open this one.
      await client.query('DELETE FROM _dbadmin.api_keys WHERE schema_name = $1', [schemaName]);
      const owner = roleName(schemaName, 'owner');
      const [o, u] = [quoteIdent(owner), quoteIdent(username)];
      const schema = quoteIdent(schemaName, 'schema name');
      const verifier = quoteLiteral(await scramVerifier(password));
      await withRoleAdmin(client, schemaName, async (roles) => {
        await roles.run(`
          CREATE ROLE ${o} NOLOGIN;
          CREATE ROLE ${u} LOGIN CONNECTION LIMIT ${TENANT_CONNECTION_LIMIT} PASSWORD ${verifier};
          GRANT ${o} TO ${u}`);
        await roles.made(owner);
        await roles.made(username);
        // The owner's rights to create the schema for it; the user's ADMIN OPTION for workAsOwner.
        await roles.lend([owner]);
        await roles.lend([username], { admin: true });
        await client.query(`CREATE SCHEMA ${schema} AUTHORIZATION ${o}`);
        // The tenant's own sessions look in its schema, and nowhere another tenant can write.
        await roles.run(`ALTER ROLE ${u} SET search_path = ${schema}`);
        await workAsOwner(client, schemaName, username, owner);
        await prepareSchemaRole(client, secret, schemaName, 'exec');
      });
      await client.query('DELETE FROM _dbadmin.schema_templates WHERE schema_name = $1', [schemaName]);
      await client.query('DELETE FROM _dbadmin.schema_migrations WHERE schema_name = $1', [schemaName]);
      if (cloneOf) {
        await client.query(
          'INSERT INTO _dbadmin.schema_templates (schema_name, template, with_data) VALUES ($1, $2, $3)',
          [schemaName, cloneOf.template, cloneOf.withData],
        );
        await inheritLedger(client, schemaName, cloneOf);
      }
    },
    { audit },
  );
  return {
    success: true,
    message: `Schema "${schemaName}" created with user "${username}"`,
    username,
  };
}

export interface DeleteSchemaInput {
  schemaName: string;
  cascade: boolean;
}

/** Anything in the schema: what DROP SCHEMA without CASCADE would refuse to drop. */
async function schemaHasObjects(client: pg.ClientBase, schemaName: string): Promise<boolean> {
  const { rowCount } = await client.query(
    `SELECT 1 FROM pg_depend d JOIN pg_namespace n ON n.oid = d.refobjid
      WHERE d.refclassid = 'pg_namespace'::regclass AND d.deptype = 'n' AND n.nspname = $1 LIMIT 1`,
    [schemaName],
  );
  return rowCount === 1;
}

/**
 * Drops the schema (and with `cascade` its objects) together with its dedicated user and roles,
 * in two steps a tenant cannot undo: first its logins are disabled and its keys deleted
 * (committed), and every session of its roles ends, so none holds a lock the drop waits for or
 * outlives it; then the drop. Should the drop fail, the schema stays shut: retry the delete.
 */
export async function deleteSchema(
  db: pg.Pool,
  { schemaName, cascade }: DeleteSchemaInput,
  audit: AuditDraft | undefined,
) {
  if (isProtectedSchema(schemaName)) {
    throw new BadRequest(
      'Protected schema',
      `schema "${schemaName}" is a system schema and cannot be deleted`,
    );
  }
  const username = schemaUser(schemaName);
  const roles = ROLE_SUFFIXES.map((suffix) => `${schemaName}${suffix}`);
  await revoking(
    db,
    roles,
    async (client) => {
      await lockSchema(client, schemaName);
      if (!(await schemaExists(client, schemaName))) {
        throw new NotFound('Schema not found', `schema "${schemaName}" does not exist`);
      }
      if (!cascade && (await schemaHasObjects(client, schemaName))) throw schemaNotEmpty(schemaName);
      await client.query('DELETE FROM _dbadmin.api_keys WHERE schema_name = $1', [schemaName]);
      // Nothing may give its roles a login again (a key made elsewhere meanwhile, a pool repaired).
      await client.query('UPDATE _dbadmin.schema_locks SET closing = true WHERE schema_name = $1', [
        schemaName,
      ]);
      await shutOutSchema(client, schemaName);
    },
    // The entry goes with the drop below, the change the request answers for: a schema shut
    // here and not dropped (the drop failed) is retried by the next delete, which then has it.
    { audit: undefined },
  );
  await Promise.all(roles.map(dropRolePool));
  await withTransaction(
    db,
    async (client) => {
      await lockSchema(client, schemaName);
      await client.query('DELETE FROM _dbadmin.api_keys WHERE schema_name = $1', [schemaName]);
      await client.query('DELETE FROM _dbadmin.tenant_quotas WHERE schema_name = $1', [schemaName]);
      await client.query('DELETE FROM _dbadmin.schema_templates WHERE schema_name = $1', [schemaName]);
      await client.query('DELETE FROM _dbadmin.schema_migrations WHERE schema_name = $1', [schemaName]);
      // A schema made again under this name is a new one for every migration.
      await client.query('DELETE FROM _dbadmin.tenant_migration_schemas WHERE schema_name = $1', [
        schemaName,
      ]);
      // Its backups are its tenant's data: never another tenant's of the same name later.
      await client.query(`DELETE FROM _dbadmin.bundles WHERE schema_name = $1 AND kind = 'backup'`, [
        schemaName,
      ]);
      await forgetSchemaRecords(client, schemaName);
      await withRoleAdmin(client, schemaName, async (roles) => {
        // Every role's rights at once: the drops below need them (dropRole lends no role twice).
        const existing: string[] = [];
        for (const role of ROLE_SUFFIXES.map((suffix) => `${schemaName}${suffix}`))
          if (await roleExists(client, role)) existing.push(role);
        await roles.lend(existing);
        await dropSchema(client, roles, schemaName, cascade);
        await dropSchemaRoles(client, roles, schemaName);
        if (await roleExists(client, username)) await dropUser(client, roles, username);
        await roles.release();
      });
      await client.query('DELETE FROM _dbadmin.schema_locks WHERE schema_name = $1', [schemaName]);
    },
    { audit },
  );
  return { success: true, message: `Schema "${schemaName}" deleted` };
}

const schemaNotEmpty = (schemaName: string, cause?: unknown) =>
  new BadRequest(
    'Schema not empty',
    `schema "${schemaName}" contains objects; pass cascade=true to delete them with it`,
    cause,
  );

async function dropSchema(client: pg.ClientBase, roles: RoleAdmin, schemaName: string, cascade: boolean) {
  const owner = await schemaOwner(client, schemaName);
  // The owner's rights, when one of the schema's roles owns it (the service may own it itself).
  const ours = ROLE_SUFFIXES.some((suffix) => owner === `${schemaName}${suffix}`);
  if (owner !== undefined && ours && (await roles.administers(owner))) await roles.lend([owner]);
  try {
    await client.query(`DROP SCHEMA ${quoteIdent(schemaName, 'schema name')}${cascade ? ' CASCADE' : ''}`);
  } catch (error) {
    if (isPgError(error) && error.code === '2BP01') throw schemaNotEmpty(schemaName, error);
    throw error;
  }
}

/** Objects the user still owns outside its schema are kept (handed to the admin), not dropped. */
async function dropUser(client: pg.ClientBase, roles: RoleAdmin, username: string) {
  try {
    await dropRole(client, roles, username);
  } catch (error) {
    if (isPgError(error) && error.code === '2BP01') {
      throw new BadRequest(
        'User still in use',
        `database user "${username}" still owns objects or privileges in another database: ${error.detail ?? error.message}`,
        error,
      );
    }
    throw error;
  }
}
