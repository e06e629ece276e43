import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { granted, inScope, outsideScope, PERMISSIONS, type Permission } from '#lib/access';
import { Forbidden } from '#lib/errors';
import type { AuthContext } from '#lib/http/auth-context';
import type { HttpEvent } from '#lib/http/event';
import { namedSchemas, type RequestInput } from '#lib/http/request-schema';
import { type AnyRoute, permissionOf } from '#lib/http/route';
import type { Person, Principal } from '#lib/principal';

/**
 * What a person may do (lib/access), enforced on the request path for every route: their role
 * must hold the route's permission, before any work; every schema the request names, and every
 * schema its SQL runs in (lib/db/executor), must be in their scope. The database enforces the
 * rest: a person without `write` runs as an anon key does (read-only, rolled back).
 */

const lacking = (person: Person, permission: Permission) =>
  new Forbidden(
    `your role (${person.role}${person.schemas ? `, scoped to ${person.schemas.length} schema(s)` : ''}) may not ${PERMISSIONS[permission].split(';')[0]}; ask an owner`,
  );

/** Refuses a person whose role lacks `permission`; anyone else passes (keys have their own scope). */
export function assertGranted(principal: Principal | undefined, permission: Permission): void {
  if (principal?.kind === 'person' && !granted(principal, permission)) throw lacking(principal, permission);
}

/** Refuses a person whose scope does not hold `schema`. */
export function assertInScope(principal: Principal | undefined, schema: string): void {
  if (principal?.kind === 'person' && !inScope(principal, schema)) throw outsideScope(principal, schema);
}

/** The schemas the request names, each in the person's scope (checked once the route has parsed them). */
export function assertRequestInScope(request: RequestInput): void {
  for (const schema of namedSchemas(request)) assertInScope(request.principal, schema);
}

/** A list of schemas' things as the person may see it: those in their scope. */
export function visibleTo<T>(
  principal: Principal | undefined,
  items: T[],
  schemaOf: (item: T) => string,
): T[] {
  if (principal?.kind !== 'person' || principal.schemas === null) return items;
  return items.filter((item) => inScope(principal, schemaOf(item)));
}

/** The route's permission, checked right after sign-in, before the body is even read. */
export const personScope = (
  route: AnyRoute,
): MiddlewareObj<HttpEvent, unknown, Error, AuthContext & Context> => ({
  before: ({ context }) => {
    const permission = permissionOf(route);
    if (permission) assertGranted(context.principal, permission);
  },
});
