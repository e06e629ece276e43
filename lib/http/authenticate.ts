import { createHmac, hash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import type pg from 'pg';
import { type Grant, narrowed, type PersonRole } from '#lib/access';
import { hashKey, KEY_PATTERN, touchKey } from '#lib/admin/keys';
import { csrfToken, SECRET_PATTERN, secretDigest } from '#lib/admin/passwords';
import { sessionLifetimes, touchSession, touchToken } from '#lib/admin/person-sessions';
import { type Config, getConfig } from '#lib/config';
import type { CatalogRead, CatalogRow } from '#lib/db/catalog-read';
import { getDatabase } from '#lib/db/pool';
import type { KeyType } from '#lib/db/role-names';
import { Forbidden, Unauthorized } from '#lib/errors';
import type { AuthContext, Carried } from '#lib/http/auth-context';
import { AuthThrottle, clientKey, type FailureCount } from '#lib/http/auth-throttle';
import { READS, trustedProxies } from '#lib/http/cross-site';
import { clientAddress, type HttpEvent, header, queryInput, requestMethod } from '#lib/http/event';
import { keyTypesFor } from '#lib/http/key-scope';
import type { AnyRoute } from '#lib/http/route';
import { sessionCookie } from '#lib/http/session-cookie';
import type { Principal } from '#lib/principal';

/**
 * Sign-in: the admin's Basic credentials or a key's Bearer token, checked in one statement with
 * the address's failed sign-ins (the throttle) and, for a route that starts with one, its catalog
 * read carried along; the principal it finds is what every later step acts for.
 */

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

export type Presented =
  | { kind: 'bearer'; token: string }
  | { kind: 'basic'; user: string; pass: string }
  /** A console session's cookie (lib/http/session-cookie), when no Authorization header was sent. */
  | { kind: 'session'; secret: string };

/** Credentials that were presented and are wrong: a guess, counted against the client's address. */
export class WrongCredentials extends Unauthorized {}

/**
 * Reads the credentials without judging them: `Bearer <key or personal token>`, `Basic ...` the
 * admin's credentials, else the console session's cookie; anything else is no credentials at all
 * (401, not a guess). An Authorization header outranks the cookie.
 */
export function presentedCredentials(authorization: string | undefined, sessionSecret?: string): Presented {
  if (authorization === undefined && sessionSecret) return { kind: 'session', secret: sessionSecret };
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

/** A person the session or personal token stands for, as they stand now. */
interface FoundPerson extends Grant {
  id: number;
  login: string;
}

/** A console session still open: a person's, or (no person) the AUTH_USER administrator's. */
interface FoundSession {
  id: number;
  via: 'password' | 'sso';
  /** The administrator's session: SHA-256 of the AUTH_USER and AUTH_PASS it signed in with. */
  adminDigest: Buffer | null;
}

/** The failed sign-in counts every sign-in shares (Basic, keys, tokens, the console's form, a password change). */
export const signInThrottle = (config: Config, db: pg.Pool): AuthThrottle => checksFor(config, db).throttle;

/** What the request's sign-in read found: the address's failures, the Bearer token's active key, the person. */
interface SignInRead {
  failures?: FailureCount;
  key?: { id: number; name: string; schema: string; keyType: KeyType };
  person?: FoundPerson;
  session?: FoundSession;
  token?: { id: number } & Grant;
  /** The catalog read it carried, when PostgreSQL ran it (see Carry). */
  carried?: Carried;
}

/**
 * A route's catalog read (lib/http/route `reads`) for the sign-in read to carry. PostgreSQL runs it
 * only for credentials that are about to pass: an address the throttle does not block (the same
 * limit and clock as AuthThrottle.refuseIfBlocked), and the admin's right password (compared in
 * memory before, acted on after the throttle) or an active key of a type the route allows, in the
 * read's schema. A wrong guess, a blocked address (whatever it sends: a right guess during the
 * block must take as long as a wrong one) and a key outside its reach never run it. It is still
 * parsed and planned for every caller: see CatalogRead's contract.
 */
interface Carry {
  read: CatalogRead<unknown>;
  admin: boolean;
  keyTypes: readonly KeyType[];
  limit: number;
}

type SignInRow = {
  failures: number | null;
  window_ends: Date | null;
  id: number | null;
  schema_name: string | null;
  key_type: KeyType | null;
  key_name: string | null;
  person_id: number | null;
  person_login: string | null;
  person_role: PersonRole | null;
  person_schemas: string[] | null;
  session_id: string | null;
  session_via: 'password' | 'sso' | null;
  /** Hex: text whatever type parsers the pool has. */
  session_admin: string | null;
  token_id: number | null;
  token_role: PersonRole | null;
  token_schemas: string[] | null;
  carried?: [CatalogRow | null] | null;
};

/**
 * The sign-in read's columns and FROM, its five parameters (the client, the digests of a key, a
 * session and a personal token, the time) numbered after `n` others. Its names are ones no catalog
 * read uses, so a read's own names never reach out to them.
 */
const SIGN_IN_COLUMNS = `failed.failures, failed.window_ends, api_key.id, api_key.schema_name, api_key.key_type,
       api_key.key_name, person.id AS person_id, person.login AS person_login, person.role AS person_role,
       person.schemas AS person_schemas, sess.id AS session_id, sess.via AS session_via,
       pg_catalog.encode(sess.admin_digest, 'hex') AS session_admin, tok.id AS token_id,
       tok.role AS token_role, tok.schemas AS token_schemas`;
const signInFrom = (n: number) => `
    FROM (VALUES (1)) AS sign_in (one)
    LEFT JOIN _dbadmin.sign_in_failures failed ON failed.client = $${n + 1}
    LEFT JOIN _dbadmin.api_keys api_key ON api_key.key_hash = $${n + 2} AND api_key.is_active
    LEFT JOIN _dbadmin.person_sessions sess
           ON sess.token_hash = $${n + 3} AND sess.idle_until > $${n + 5} AND sess.ends_at > $${n + 5}
    LEFT JOIN _dbadmin.person_tokens tok ON tok.token_hash = $${n + 4} AND tok.expires_at > $${n + 5}
    LEFT JOIN _dbadmin.people person ON person.id = coalesce(sess.person_id, tok.person_id)`;

const SIGN_IN = `SELECT ${SIGN_IN_COLUMNS}${signInFrom(0)}`;

/** PostgreSQL's limit on a prepared statement's name, in bytes. */
const MAX_NAME_BYTES = 63;
const CARRYING = 'dbadmin.sign-in+';

/**
 * The sign-in read with a catalog read as one more column: the read's parameters first, then the
 * sign-in's and the Carry's. An uncorrelated subquery in a CASE branch runs only when the branch is
 * taken; `json_build_array` tells "ran, no row" ([null]) from "did not run" (NULL). The read's text
 * ends on a line of its own, so a trailing comment in it cannot swallow what follows.
 */
function carrying(read: CatalogRead<unknown>): string {
  if (Buffer.byteLength(CARRYING + read.name) > MAX_NAME_BYTES)
    throw new Error(`catalog read name too long for a prepared statement: ${read.name}`);
  const $ = (i: number) => `$${read.values.length + i}`;
  const schema = `${$(9)}::text`;
  return `SELECT ${SIGN_IN_COLUMNS},
         CASE WHEN NOT coalesce(failed.failures >= ${$(6)}::int8 AND failed.window_ends > ${$(5)}::timestamptz, false)
               AND (${$(7)}::bool OR (api_key.key_type = ANY (${$(8)}::text[]) AND api_key.schema_name = ${schema})
                    OR (person.id IS NOT NULL AND (person.schemas IS NULL OR ${schema} = ANY (person.schemas))
                        AND (tok.schemas IS NULL OR ${schema} = ANY (tok.schemas))))
              THEN pg_catalog.json_build_array((SELECT pg_catalog.row_to_json(carried) FROM (${read.text}
              ) AS carried))
         END AS carried${signInFrom(read.values.length)}`;
}

/** The carrying statements' texts, by the read's text: made once each. */
const carryingTexts = new Map<string, string>();

function signInQuery(signIn: unknown[], carry: Carry | undefined): pg.QueryConfig {
  if (!carry) return { name: 'dbadmin.sign-in', text: SIGN_IN, values: signIn };
  const { read } = carry;
  let text = carryingTexts.get(read.text);
  if (text === undefined) {
    text = carrying(read);
    carryingTexts.set(read.text, text);
  }
  return {
    name: CARRYING + read.name,
    text,
    values: [...read.values, ...signIn, carry.limit, carry.admin, carry.keyTypes, read.schema],
  };
}

/**
 * One round trip before any work, whatever the credentials: the address's failed sign-ins and,
 * for a well-formed Bearer token, the active key it stands for (looked up on every request, so a
 * key deleted or disabled anywhere fails at once); with a Carry, the route's catalog read too.
 */
export async function signInRead(
  db: pg.Pool,
  address: string | undefined,
  presented: Presented,
  carry?: Carry,
  now = new Date(),
): Promise<SignInRead> {
  const query = signInQuery([clientKey(address), ...secretDigests(presented), now], carry);
  const row = (await db.query<SignInRow>(query)).rows[0];
  return {
    ...(row ? found(row) : {}),
    failures:
      row?.failures != null && row.window_ends
        ? { failures: row.failures, windowEnds: row.window_ends }
        : undefined,
    key:
      row?.id != null && row.schema_name && row.key_type && row.key_name !== null
        ? { id: row.id, name: row.key_name, schema: row.schema_name, keyType: row.key_type }
        : undefined,
    carried: carry && row?.carried ? { read: carry.read, row: row.carried[0] ?? undefined } : undefined,
  };
}

/** The digests the sign-in read looks up: an API key's, a console session's, a personal token's (null: none sent). */
function secretDigests(presented: Presented): [Buffer | null, Buffer | null, Buffer | null] {
  if (presented.kind === 'session')
    return [null, isSecret(presented.secret, 'dbs_') ? secretDigest(presented.secret) : null, null];
  if (presented.kind !== 'bearer') return [null, null, null];
  const { token } = presented;
  return [
    KEY_PATTERN.test(token) ? hashKey(token) : null,
    null,
    isSecret(token, 'dbp_') ? secretDigest(token) : null,
  ];
}

const isSecret = (value: string, prefix: string) => value.startsWith(prefix) && SECRET_PATTERN.test(value);

/** The person, session and personal token the sign-in read found, as they stand now. */
function found(row: SignInRow): Pick<SignInRead, 'person' | 'session' | 'token'> {
  const person =
    row.person_id !== null && row.person_login !== null && row.person_role !== null
      ? { id: row.person_id, login: row.person_login, role: row.person_role, schemas: row.person_schemas }
      : undefined;
  const session =
    row.session_id !== null && row.session_via !== null
      ? {
          id: Number(row.session_id),
          via: row.session_via,
          adminDigest: row.session_admin === null ? null : Buffer.from(row.session_admin, 'hex'),
        }
      : undefined;
  const token =
    row.token_id !== null && row.token_role !== null
      ? { id: row.token_id, role: row.token_role, schemas: row.token_schemas }
      : undefined;
  return { person, session, token };
}

/** METRICS_TOKEN, compared as digests; never matches when the setting is unset. */
const metricsTokenMatches = (token: string, config: Config) =>
  config.METRICS_TOKEN !== undefined && timingSafeEqual(digest(token), digest(config.METRICS_TOKEN));

const sameToken = (sent: string | undefined, expected: string) =>
  sent !== undefined && timingSafeEqual(digest(sent), digest(expected));

/**
 * A console session's person, or the administrator's session while AUTH_USER and AUTH_PASS are
 * still the ones it signed in with; a change it carries must bring the session's CSRF token.
 */
function sessionPrincipal(read: SignInRead, { db, config, admin }: Checks, event: HttpEvent): Principal {
  const { session, person } = read;
  const ofAdmin =
    session?.adminDigest != null &&
    timingSafeEqual(session.adminDigest, adminDigest(admin, config.DBADMIN_SECRET));
  // A session that ended is not a guess (its secret was ours): a 401, not counted.
  if (!session || !(person || ofAdmin))
    throw new Unauthorized(
      'your session has ended (signed out, expired or ended by an owner); sign in again',
    );
  const changes = !READS.has(requestMethod(event));
  if (changes && !sameToken(header(event, 'x-csrf-token'), csrfToken(config.DBADMIN_SECRET, session.id)))
    throw new Forbidden(
      'a change made with the console session needs its X-CSRF-Token header (GET /api/session)',
    );
  touchSession(db, session.id, sessionLifetimes(config));
  if (!person) return { kind: 'admin', sessionId: session.id };
  const { id, login, role, schemas } = person;
  return { kind: 'person', id, login, role, schemas, via: session.via, sessionId: session.id };
}

/**
 * What an administrator's session is bound to: AUTH_USER and AUTH_PASS as they are now, keyed
 * with DBADMIN_SECRET, so a copy of the database gives no way to test guesses of AUTH_PASS.
 */
export const adminDigest = ({ user, pass }: Credentials, secret: string) =>
  createHmac('sha256', secret)
    .update(Buffer.concat([user, pass]))
    .digest();

/** A personal token's person, with the lower of the token's grant and theirs as they stand now. */
function tokenPrincipal({ person, token }: SignInRead, db: pg.Pool): Principal {
  if (!person || !token) throw new WrongCredentials('Invalid personal token');
  touchToken(db, token.id);
  const { id, login } = person;
  return { kind: 'person', id, login, ...narrowed(token, person), via: 'token', tokenId: token.id };
}

function principalOf(
  route: AnyRoute,
  presented: Presented,
  adminOk: boolean,
  read: SignInRead,
  checks: Checks,
  event: HttpEvent,
): Principal {
  if (presented.kind === 'basic') {
    if (!adminOk) throw new WrongCredentials('Invalid credentials');
    return { kind: 'admin' };
  }
  if (presented.kind === 'session') return sessionPrincipal(read, checks, event);
  if (isSecret(presented.token, 'dbp_')) return tokenPrincipal(read, checks.db);
  // The metrics token stands for the admin on the metrics route alone.
  if (route.access === 'metrics') {
    if (!metricsTokenMatches(presented.token, checks.config))
      throw new WrongCredentials('Invalid metrics token');
    return { kind: 'admin' };
  }
  if (!read.key) throw new WrongCredentials('Invalid API key');
  touchKey(checks.db, read.key.id);
  return { kind: 'key', ...read.key };
}

/**
 * The route's catalog read as the request asks it before authentication, when its path and query
 * are valid as they stand and the route makes a read of them; otherwise nothing is carried, and
 * the route answers (400, or the read alone) after authentication, as it would have.
 */
function readAhead(route: AnyRoute, event: HttpEvent): CatalogRead<unknown> | undefined {
  if (!route.reads) return undefined;
  const params = route.params?.safeParse(event.pathParameters ?? {});
  const query = route.query?.safeParse(queryInput(event));
  if (params?.success === false || query?.success === false) return undefined;
  try {
    return route.reads({ params: params?.data, query: query?.data });
  } catch {
    return undefined;
  }
}

/**
 * Basic (AUTH_USER / AUTH_PASS) or Bearer (API key); the principal goes on the context. An
 * address with too many recent failures gets 429 whatever it sent, so a guess that happens to be
 * right looks exactly like a wrong one: the Basic credentials are compared first, in memory and in
 * constant time, but only acted on once the throttle has let the address through. The sign-in read
 * carries the route's catalog read (Carry), which goes on the context too.
 */
export const authenticate = (
  route: AnyRoute,
): MiddlewareObj<HttpEvent, unknown, Error, AuthContext & Context> => ({
  before: async (request) => {
    // No credentials at all is a 401 that costs nothing and counts for nothing.
    const config = await getConfig();
    const presented = presentedCredentials(
      header(request.event, 'authorization'),
      sessionCookie(request.event),
    );
    const db = await getDatabase();
    const current = checksFor(config, db);
    const { throttle } = current;
    const address = clientAddress(request.event, trustedProxies());
    const now = new Date();
    const adminOk = presented.kind === 'basic' && adminMatches(presented, current.admin);
    const read = readAhead(route, request.event);
    const signIn = await signInRead(
      db,
      address,
      presented,
      read && { read, admin: adminOk, keyTypes: keyTypesFor(route.access), limit: throttle.limit },
      now,
    );
    throttle.refuseIfBlocked(signIn.failures, now);
    try {
      request.context.principal = principalOf(route, presented, adminOk, signIn, current, request.event);
    } catch (error) {
      if (error instanceof WrongCredentials) await throttle.countFailure(address);
      throw error;
    }
    request.context.carried = signIn.carried;
  },
});
