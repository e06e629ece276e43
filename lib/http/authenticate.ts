import { hash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import type pg from 'pg';
import { hashKey, KEY_PATTERN, touchKey } from '#lib/admin/keys';
import { type Config, getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import type { KeyType } from '#lib/db/schema-roles';
import { Unauthorized } from '#lib/errors';
import { AuthThrottle, clientKey, type FailureCount } from '#lib/http/auth-throttle';
import { clientAddress, type HttpEvent, header } from '#lib/http/event';
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
export function verifyAdmin({ user, pass }: { user: string; pass: string }, admin: Credentials): void {
  const userOk = timingSafeEqual(digest(user), admin.user);
  const passOk = timingSafeEqual(digest(pass), admin.pass);
  if (!(userOk && passOk)) throw new WrongCredentials('Invalid credentials');
}

export interface AuthContext {
  principal?: Principal;
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
}

/**
 * One round trip before any work, whatever the credentials: the address's failed sign-ins and,
 * for a well-formed Bearer token, the active key it stands for (looked up on every request, so a
 * key deleted or disabled anywhere fails at once).
 */
export async function signInRead(
  db: pg.Pool,
  address: string | undefined,
  presented: Presented,
): Promise<SignInRead> {
  const token =
    presented.kind === 'bearer' && KEY_PATTERN.test(presented.token) ? presented.token : undefined;
  const { rows } = await db.query<{
    failures: number | null;
    window_ends: Date | null;
    id: number | null;
    schema_name: string | null;
    key_type: KeyType | null;
  }>({
    name: 'dbadmin.sign-in',
    text: `SELECT f.failures, f.window_ends, k.id, k.schema_name, k.key_type
             FROM (VALUES (1)) AS request (one)
             LEFT JOIN _dbadmin.sign_in_failures f ON f.client = $1
             LEFT JOIN _dbadmin.api_keys k ON k.key_hash = $2 AND k.is_active`,
    values: [clientKey(address), token === undefined ? null : hashKey(token)],
  });
  const row = rows[0];
  return {
    failures:
      row?.failures != null && row.window_ends
        ? { failures: row.failures, windowEnds: row.window_ends }
        : undefined,
    key:
      row?.id != null && row.schema_name && row.key_type
        ? { id: row.id, schema: row.schema_name, keyType: row.key_type }
        : undefined,
  };
}

function principalOf(presented: Presented, read: SignInRead, { admin, db }: Checks): Principal {
  if (presented.kind === 'basic') {
    verifyAdmin(presented, admin);
    return { kind: 'admin' };
  }
  if (!read.key) throw new WrongCredentials('Invalid API key');
  touchKey(db, read.key.id);
  return { kind: 'key', ...read.key };
}

/**
 * Basic (AUTH_USER / AUTH_PASS) or Bearer (API key); the principal goes on the context. An
 * address with too many recent failures gets 429 before its credentials are even read, so a
 * guess that happens to be right looks exactly like a wrong one.
 */
export const authenticate = (): MiddlewareObj<HttpEvent, unknown, Error, AuthContext & Context> => ({
  before: async (request) => {
    // No credentials at all is a 401 that costs nothing and counts for nothing.
    const presented = presentedCredentials(header(request.event, 'authorization'));
    const [config, db] = await Promise.all([getConfig(), getDatabase()]);
    const current = checksFor(config, db);
    const { throttle } = current;
    const address = clientAddress(request.event, config.TRUSTED_PROXIES);
    const read = await signInRead(db, address, presented);
    throttle.refuseIfBlocked(read.failures);
    try {
      request.context.principal = principalOf(presented, read, current);
    } catch (error) {
      if (error instanceof WrongCredentials) await throttle.countFailure(address);
      throw error;
    }
  },
});
