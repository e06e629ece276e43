import { createHmac } from 'node:crypto';
import { BadRequest } from '#lib/errors';

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
/** `<schema>_owner`: NOLOGIN, owns the schema and what is made in it (lib/db/schema-roles ensureOwner). */
export type OwnerKind = 'owner';
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

/** The role a principal's work in the schema logs in as, and whom it works as. */
export function schemaRole(schema: string, kind: RoleKind): SchemaRole {
  const role = roleName(schema, kind);
  return { schema, kind, role, actsAs: kind === 'anon' ? role : roleName(schema, 'owner') };
}
