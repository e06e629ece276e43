/**
 * What a person may do: the four roles, the permissions each holds, and how a schema scope
 * narrows them. The one definition the request path enforces (lib/http/person-scope), the
 * OpenAPI document states per operation, and the README's table is generated from
 * (`npm run docs:roles`), so the three cannot drift apart.
 */

import { Forbidden } from '#lib/errors';

export const PERSON_ROLES = ['owner', 'admin', 'developer', 'analyst'] as const;
export type PersonRole = (typeof PERSON_ROLES)[number];

/** What a route needs (lib/http/route `permission`), in the order the table shows them. */
export const PERMISSIONS = {
  read: 'read rows, structure and exports; run read-only SQL (rolled back, like an anon key)',
  write: 'insert, change and delete rows; imports; SQL that writes, as the schema’s own role',
  alter: 'change structure: tables, columns, constraints, indexes, types, views',
  'keys.read':
    'list a schema’s API keys (never their secrets) and see its connection string (never its password)',
  'keys.manage': 'create and delete API keys',
  backups: 'back up a schema as a bundle and download it; restore a bundle over its rows',
  'schemas.create': 'create schemas (tenants)',
  'schemas.delete': 'delete schemas',
  migrations: 'change many schemas at once: migrations across tenants, their dry runs, runs and results',
  'tenants.manage': 'set quotas; cancel and end tenants’ sessions',
  'sql.admin': 'run SQL with the service’s own database rights (runAs admin), which reach dbadmin’s own data',
  'audit.read': 'read the audit log',
  metrics: 'read the Prometheus metrics',
  people: 'add, change and remove people; end anyone’s sessions',
  license: 'deactivate the license',
} as const;
export type Permission = keyof typeof PERMISSIONS;

const EVERYTHING = Object.keys(PERMISSIONS) as Permission[];

/** Each role's permissions; a role's line reads as what it adds or takes away. */
export const ROLE_PERMISSIONS: Record<PersonRole, readonly Permission[]> = {
  owner: EVERYTHING,
  // SQL with the service's rights could rewrite dbadmin's own tables (people among them): an owner's.
  admin: EVERYTHING.filter((p) => p !== 'people' && p !== 'license' && p !== 'sql.admin'),
  developer: ['read', 'write', 'alter', 'keys.read', 'audit.read'],
  analyst: ['read', 'audit.read'],
};

export const may = (role: PersonRole, permission: Permission) => ROLE_PERMISSIONS[role].includes(permission);

/**
 * Permissions that act on the whole database, whatever schema a request names: a person scoped
 * to some schemas never holds them, whatever the role (an admin scoped to three tenants creates
 * and deletes none, reads no metrics of all of them, runs no SQL as the administrator).
 */
export const UNSCOPED_ONLY: readonly Permission[] = [
  'schemas.create',
  'schemas.delete',
  'migrations',
  'sql.admin',
  'metrics',
  'people',
  'license',
];

/** A role narrowed by a scope: `schemas` null is every schema. */
export interface Grant {
  role: PersonRole;
  schemas: readonly string[] | null;
}

export function granted({ role, schemas }: Grant, permission: Permission): boolean {
  if (!may(role, permission)) return false;
  return schemas === null || !UNSCOPED_ONLY.includes(permission);
}

export const inScope = (grant: Grant, schema: string) =>
  grant.schemas === null || grant.schemas.includes(schema);

/** A person asked about a schema outside their scope: what to fix. */
export const outsideScope = (grant: Grant, schema: string) =>
  new Forbidden(
    `you may reach only the schemas ${grant.schemas?.map((s) => `"${s}"`).join(', ')}, not "${schema}"; name one of yours`,
  );

/** Roles go from most to least: each holds every permission of those after it. */
const rank = (role: PersonRole) => PERSON_ROLES.indexOf(role);

/** Whether `inner` (a token's) asks no more than `outer` (its person's): its role and its schemas. */
export function within(inner: Grant, outer: Grant): boolean {
  if (rank(inner.role) < rank(outer.role)) return false;
  return outer.schemas === null || (inner.schemas?.every((s) => outer.schemas?.includes(s)) ?? false);
}

/** The narrower of a token's grant and its person's as the person stands now (a role lowered since counts). */
export function narrowed(token: Grant, person: Grant): Grant {
  const role = PERSON_ROLES[Math.max(rank(token.role), rank(person.role))] as PersonRole;
  if (person.schemas === null) return { role, schemas: token.schemas };
  if (token.schemas === null) return { role, schemas: person.schemas };
  return { role, schemas: token.schemas.filter((s) => person.schemas?.includes(s)) };
}

/** The README's table of roles: one row per permission, a column per role. */
export function rolesTable(): string {
  const head = `| Permission | ${PERSON_ROLES.join(' | ')} |`;
  const rule = `|---|${PERSON_ROLES.map(() => ':-:').join('|')}|`;
  const rows = EVERYTHING.map(
    (p) => `| \`${p}\`: ${PERMISSIONS[p]} | ${PERSON_ROLES.map((r) => (may(r, p) ? '✓' : '')).join(' | ')} |`,
  );
  return [head, rule, ...rows].join('\n');
}
