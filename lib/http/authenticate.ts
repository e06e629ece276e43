import { hash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import type pg from 'pg';
import { hashKey, KEY_PATTERN, touchKey } from '#lib/admin/keys';
import { type Config, getConfig } from '#lib/config';
import type { CatalogRead, CatalogRow } from '#lib/db/catalog-read';
import { getDatabase } from '#lib/db/pool';
import type { KeyType } from '#lib/db/schema-roles';
import { Unauthorized } from '#lib/errors';
import { AuthThrottle, clientKey, type FailureCount } from '#lib/http/auth-throttle';
import { clientAddress, type HttpEvent, header } from '#lib/http/event';
import { keyTypesFor } from '#lib/http/key-scope';
import type { AnyRoute } from '#lib/http/route';
import type { Principal } from '#lib/principal';

const digest = (value: string) => hash('sha256', value, 'buffer');

/** Compared as equal-length digests, so the time taken does not depend on the input. */
export interface Credentials {
  user: Buffer;
  pass: Buffer;
}

export const adminCredentials = (user: string, pass: string): Credentials => ({
  user: digest(user),
  pass: digest(pass),
});

export type Presented = { kind: 'bearer'; token: string } | { kind: 'basic'; user: string; pass: string };

/** Credentials that were presented and are wrong: a guess, counted against the client's address. */
export class WrongCredentials extends Unauthorized {}

/**
 * Reads the Authorization header without judging it: `Bearer <key>` is an API key, `Basic ...`
 * the admin's credentials; anything else is no credentials at all (401, not a guess).
 */
export function presentedCredentials(authorization: string | undefined): Presented {
  if (authorization?.startsWith('Bearer ')) return { kind: 'bearer', token: authorization.slice(7).trim() };
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (!match?.[1]) throw new Unauthorized('Authentication required');
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0
    ? { kind: 'basic', user: decoded, pass: '' }
    : { kind: 'basic', user: decoded.slice(0, colon), pass: decoded.slice(colon + 1) };
}

/** The admin's Basic credentials, compared as digests: which of the two was wrong is not revealed by timing. */
export function adminMatches({ user, pass }: { user: string; pass: string }, admin: Credentials): boolean {
  const userOk = timingSafeEqual(digest(user), admin.user);
  const passOk = timingSafeEqual(digest(pass), admin.pass);
  return userOk && passOk;
}

export function verifyAdmin(presented: { user: string; pass: string }, admin: Credentials): void {
  if (!adminMatches(presented, admin)) throw new WrongCredentials('Invalid credentials');
}

/** A catalog read that travelled with the sign-in read, and the row it found (undefined: none). */
export interface Rode {
  read: CatalogRead<unknown>;
  row: CatalogRow | undefined;
}

export interface AuthContext {
  principal?: Principal;
  /** The route's catalog read, when it travelled with the sign-in read (lib/http/handler takes it). */
  rode?: Rode;
}

interface Checks {
  config: Config;
  db: pg.Pool;
  admin: Credentials;
  throttle: AuthThrottle;
}

let checks: Checks | undefined;

/** The admin credentials' digests and the shared failure counts, made once per configuration. */
function checksFor(config: Config, db: pg.Pool): Checks {
  if (checks?.config !== config || checks.db !== db) {
    checks = {
      config,
      db,
      admin: adminCredentials(config.AUTH_USER, config.AUTH_PASS),
      throttle: new AuthThrottle(db, config.AUTH_MAX_FAILURES, config.AUTH_FAILURE_WINDOW_S),
    };
  }
  return checks;
}

/** What the request's sign-in read found: the address's failures and the Bearer token's active key. */
interface SignInRead {
  failures?: FailureCount;
  key?: { id: number; schema: string; keyType: KeyType };
  /** The catalog read that travelled with it, when PostgreSQL ran it (see Ride). */
  rode?: Rode;
}

/**
 * A route's catalog read (lib/http/route `reads`) to send with the sign-in read. PostgreSQL runs it
 * only for credentials that are about to pass: an address the throttle does not block, and the
 * admin's right password (checked before, in memory) or an active key of a type the route allows,
 * in the read's schema. A wrong guess, a blocked address (whatever it sends: a right guess during
 * the block must take as long as a wrong one) and a key outside its reach cost no more than today.
 */
export interface Ride {
  read: CatalogRead<unknown>;
  admin: boolean;
  keyTypes: readonly KeyType[];
  limit: number;
  now: Date;
}

type SignInRow = {
  failures: number | null;
  window_ends: Date | null;
  id: number | null;
  schema_name: string | null;
  key_type: KeyType | null;
  rode?: [CatalogRow | null] | null;
};

/** The sign-in read's FROM, its two parameters numbered after `n` others. */
const signInFrom = (n: number) => `
    FROM (VALUES (1)) AS request (one)
    LEFT JOIN _dbadmin.sign_in_failures f ON f.client = $${n + 1}
    LEFT JOIN _dbadmin.api_keys k ON k.key_hash = $${n + 2} AND k.is_active`;

const SIGN_IN = `SELECT f.failures, f.window_ends, k.id, k.schema_name, k.key_type${signInFrom(0)}`;

/**
 * The sign-in read with a catalog read as one more column: the read's parameters first, then the
 * sign-in's and the Ride's. An uncorrelated subquery in a CASE branch runs only when the branch is
 * taken; `json_build_array` tells "ran, no row" ([null]) from "did not run" (NULL).
 */
const withRead = (read: CatalogRead<unknown>) => {
  const $ = (i: number) => `$${read.values.length + i}`;
  return `SELECT f.failures, f.window_ends, k.id, k.schema_name, k.key_type,
         CASE WHEN NOT coalesce(f.failures >= ${$(3)}::int4 AND f.window_ends > ${$(4)}::timestamptz, false)
               AND (${$(5)}::bool OR (k.key_type = ANY (${$(6)}::text[]) AND k.schema_name = ${$(7)}::text))
              THEN pg_catalog.json_build_array((SELECT pg_catalog.row_to_json(r) FROM (${read.text}) AS r))
         END AS rode${signInFrom(read.values.length)}`;
};

/** The combined statements' texts, made once per catalog read (a prepared statement's name has one text). */
const combined = new Map<string, string>();

function signInQuery(signIn: unknown[], ride: Ride | undefined): pg.QueryConfig {
  if (!ride) return { name: 'dbadmin.sign-in', text: SIGN_IN, values: signIn };
  const { read } = ride;
  const text = combined.get(read.name) ?? withRead(read);
  combined.set(read.name, text);
  return {
    name: `dbadmin.sign-in+${read.name}`,
    text,
    values: [...read.values, ...signIn, ride.limit, ride.now, ride.admin, ride.keyTypes, read.schema],
  };
}

/**
 * One round trip before any work, whatever the credentials: the address's failed sign-ins and,
 * for a well-formed Bearer token, the active key it stands for (looked up on every request, so a
 * key deleted or disabled anywhere fails at once); with a Ride, the route's catalog read too.
 */
export async function signInRead(
  db: pg.Pool,
  address: string | undefined,
  presented: Presented,
  ride?: Ride,
): Promise<SignInRead> {
  const token =
    presented.kind === 'bearer' && KEY_PATTERN.test(presented.token) ? presented.token : undefined;
  const query = signInQuery([clientKey(address), token === undefined ? null : hashKey(token)], ride);
  const row = (await db.query<SignInRow>(query)).rows[0];
  return {
    failures:
      row?.failures != null && row.window_ends
        ? { failures: row.failures, windowEnds: row.window_ends }
        : undefined,
    key:
      row?.id != null && row.schema_name && row.key_type
        ? { id: row.id, schema: row.schema_name, keyType: row.key_type }
        : undefined,
    rode: ride && row?.rode ? { read: ride.read, row: row.rode[0] ?? undefined } : undefined,
  };
}

function principalOf(presented: Presented, adminOk: boolean, read: SignInRead, { db }: Checks): Principal {
  if (presented.kind === 'basic') {
    if (!adminOk) throw new WrongCredentials('Invalid credentials');
    return { kind: 'admin' };
  }
  if (!read.key) throw new WrongCredentials('Invalid API key');
  touchKey(db, read.key.id);
  return { kind: 'key', ...read.key };
}

/**
 * The route's catalog read as the request asks it before authentication, when its path and query
 * are valid as they stand (else the route answers 400 after authentication, as before).
 */
function readAhead(route: AnyRoute, event: HttpEvent): CatalogRead<unknown> | undefined {
  if (!route.reads) return undefined;
  const params = route.params?.safeParse(event.pathParameters ?? {});
  const query = route.query?.safeParse(event.queryStringParameters ?? {});
  if (params?.success === false || query?.success === false) return undefined;
  return route.reads({ params: params?.data, query: query?.data });
}

/**
 * Basic (AUTH_USER / AUTH_PASS) or Bearer (API key); the principal goes on the context. An
 * address with too many recent failures gets 429 before its credentials are even read, so a
 * guess that happens to be right looks exactly like a wrong one. The route's catalog read travels
 * with the sign-in read (Ride) and goes on the context too.
 */
export const authenticate = (
  route: AnyRoute,
): MiddlewareObj<HttpEvent, unknown, Error, AuthContext & Context> => ({
  before: async (request) => {
    // No credentials at all is a 401 that costs nothing and counts for nothing.
    const presented = presentedCredentials(header(request.event, 'authorization'));
    const [config, db] = await Promise.all([getConfig(), getDatabase()]);
    const current = checksFor(config, db);
    const { throttle } = current;
    const address = clientAddress(request.event, config.TRUSTED_PROXIES);
    const now = new Date();
    // Judged now, in memory and in constant time; acted on only after the throttle has spoken.
    const adminOk = presented.kind === 'basic' && adminMatches(presented, current.admin);
    const read = readAhead(route, request.event);
    const signIn = await signInRead(
      db,
      address,
      presented,
      read && { read, admin: adminOk, keyTypes: keyTypesFor(route.access), limit: throttle.limit, now },
    );
    throttle.refuseIfBlocked(signIn.failures, now);
    try {
      request.context.principal = principalOf(presented, adminOk, signIn, current);
    } catch (error) {
      if (error instanceof WrongCredentials) await throttle.countFailure(address);
      throw error;
    }
    request.context.rode = signIn.rode;
  },
});
