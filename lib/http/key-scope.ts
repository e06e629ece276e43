import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { z } from 'zod';
import type { KeyType } from '#lib/db/role-names';
import { Forbidden } from '#lib/errors';
import type { AuthContext } from '#lib/http/auth-context';
import type { HttpEvent } from '#lib/http/event';
import type { Access, AnyRoute } from '#lib/http/route';
import type { Principal } from '#lib/principal';

/**
 * What an API key may reach: the route's key types (anon reads, service_role writes), and only its
 * own schema, filled in where the request names none and refused where it names another.
 */

const takesSchema = (schema: unknown) => schema instanceof z.ZodObject && 'schema' in schema.shape;

/** A key asked about another schema than its own. */
export const outsideItsSchema = (key: Extract<Principal, { kind: 'key' }>, schema: string) =>
  new Forbidden(`this API key belongs to schema "${key.schema}" and cannot reach "${schema}"`);

/** A key's requests work in its schema: `schema` defaults to it, and naming another is refused. */
function scoped(
  values: unknown,
  key: Extract<Principal, { kind: 'key' }>,
): Record<string, unknown> | unknown {
  if (values !== undefined && (typeof values !== 'object' || values === null || Array.isArray(values)))
    return values;
  const given = (values as Record<string, unknown> | undefined)?.schema;
  if (given !== undefined && given !== key.schema) {
    throw outsideItsSchema(key, String(given));
  }
  return { ...(values as Record<string, unknown> | undefined), schema: key.schema };
}

/** The key types a route's access lets in: keyScope's rule, for the sign-in read (lib/http/authenticate). */
export function keyTypesFor(access: Access): readonly KeyType[] {
  if (access === 'read') return ['anon', 'service_role'];
  if (access === 'write') return ['service_role'];
  return [];
}

/**
 * What an API key may do: nothing admin-only (schemas, keys), no writes with an `anon` key, and
 * nothing outside its schema. The database enforces the same again through the key's role.
 */
export const keyScope = (
  route: AnyRoute,
): MiddlewareObj<HttpEvent, unknown, Error, AuthContext & Context> => ({
  before: (request) => {
    const principal = request.context.principal;
    if (principal?.kind !== 'key') return;
    if (!keyTypesFor(route.access).includes(principal.keyType)) {
      throw new Forbidden(
        route.access === 'write'
          ? 'anon keys are read-only; use a service_role key to change data'
          : 'API keys cannot use this endpoint; it needs the admin credentials',
      );
    }
    const event = request.event as HttpEvent & { body?: unknown };
    if (takesSchema(route.query)) {
      event.queryStringParameters = scoped(event.queryStringParameters ?? undefined, principal) as Record<
        string,
        string
      >;
    }
    if (takesSchema(route.body)) event.body = scoped(event.body, principal);
  },
});
