import type pg from 'pg';
import type { AuditDraft } from '#lib/db/audit-log';
import { quoteIdent } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { type RoleAdmin, withRoleAdmin } from '#lib/db/role-admin';
import { ROLE_SUFFIXES, roleName, schemaRole } from '#lib/db/role-names';
import { roleExists } from '#lib/db/schema-locks';
import { LOCK_WAIT, unprepareRoles, upsertLogin } from '#lib/db/schema-roles';
import { ApiError } from '#lib/errors';

/**
 * Taking a schema's roles away from a tenant that may be fighting it: ending their sessions,
 * shutting their logins, revoking under retry, and dropping them with the schema.
 */

/** Ends every session of the roles (the service's own pooled ones reconnect when allowed to). */
const endSessions = (client: pg.ClientBase | pg.Pool, roles: string[]) =>
  client.query(
    `SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity
      WHERE usename = ANY($1::text[]) AND pid <> pg_catalog.pg_backend_pid()`,
    [roles],
  );

/**
 * The schema is gone (its owner may drop it) but its login roles are not: nothing legitimate logs
 * in as them any more (deleting a schema through the API drops them), so each one the service
 * made gets the password the secret derives and NOLOGIN. Within the caller's transaction, under
 * lockSchema (see revoking); answers the roles shut.
 */
export async function shutLogins(client: pg.ClientBase, secret: string, schema: string): Promise<string[]> {
  const shut: string[] = [];
  await withRoleAdmin(client, schema, async (roles) => {
    for (const kind of ['exec', 'svc', 'anon'] as const) {
      const role = roleName(schema, kind);
      // Not someone else's role of the same name; a tenant cannot make roles at all.
      if (!(await roles.administers(role))) continue;
      await upsertLogin(client, roles, secret, schemaRole(schema, kind), false);
      shut.push(role);
    }
  });
  await unprepareRoles(client, schema);
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
  /** The request's audit entry, committed with the change (none outside a request). */
  { audit }: { audit: AuditDraft | undefined },
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
  const existing: string[] = [];
  for (const suffix of ROLE_SUFFIXES) {
    const role = `${schema}${suffix}`;
    if (await roleExists(client, role)) existing.push(`ALTER ROLE ${quoteIdent(role)} NOLOGIN;`);
  }
  if (existing.length > 0) await withRoleAdmin(client, schema, (roles) => roles.run(existing.join('\n')));
}

/** Schema deletion takes its roles along (grants and default privileges included); not `_user`. */
export async function dropSchemaRoles(
  client: pg.ClientBase,
  roles: RoleAdmin,
  schema: string,
): Promise<void> {
  for (const kind of ['anon', 'svc', 'exec', 'owner'] as const) {
    const role = `${schema}_${kind}`;
    if (await roleExists(client, role)) await dropRole(client, roles, role);
  }
}

/**
 * Drops the role; what it owns elsewhere is handed to the service, its privileges dropped. Its
 * rights lent for that (REASSIGN and DROP OWNED need them).
 */
export async function dropRole(client: pg.ClientBase, roles: RoleAdmin, role: string): Promise<void> {
  const r = quoteIdent(role);
  await roles.lend([role]);
  await client.query(`REASSIGN OWNED BY ${r} TO CURRENT_USER`);
  await client.query(`DROP OWNED BY ${r}`);
  await roles.run(`DROP ROLE ${r}`);
  roles.dropped(role);
}
