/** The schemas that are dbadmin's own, never a tenant's: never listed, offered or changed as one. */

/** dbadmin's own schema. Its name cannot be created or dropped through the API (leading `_`). */
export const INTERNAL_SCHEMA = '_dbadmin';
/** The audit log's door and inbox, apart from INTERNAL_SCHEMA so every login may reach them. */
export const AUDIT_SCHEMA = '_dbadmin_audit';
/** The doors of the roles that administer tenants' roles (lib/db/role-admin); the service's alone. */
export const ROLES_SCHEMA = '_dbadmin_roles';
/** PgBouncer's lookup of logins (bin/pgbouncer-auth), made by a superuser when PgBouncer is used. */
export const POOLER_SCHEMA = '_dbadmin_pgbouncer';
export const DBADMIN_SCHEMAS: readonly string[] = [
  INTERNAL_SCHEMA,
  AUDIT_SCHEMA,
  ROLES_SCHEMA,
  POOLER_SCHEMA,
];

/** Schemas that hold no tenant besides PostgreSQL's `pg_*`: dbadmin's, the standard's, public. */
export const NOT_TENANT_SCHEMAS: readonly string[] = [...DBADMIN_SCHEMAS, 'information_schema', 'public'];
