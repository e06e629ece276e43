import { hash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareObj } from '@middy/core';
import type { Context } from 'aws-lambda';
import { resolveKey, touchKey } from '#lib/admin/keys';
import { type Config, getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { Unauthorized } from '#lib/errors';
import { AuthThrottle } from '#lib/http/auth-throttle';
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

export type Presented = { kind: 'admin' } | { kind: 'bearer'; token: string };

/** Credentials that were presented and are wrong: a guess, counted against the client's address. */
export class WrongCredentials extends Unauthorized {}

/**
 * Reads the Authorization header: `Bearer <key>` is an API key (checked against the database
 * next); anything else must be the admin's Basic credentials.
 */
export function authenticateHeader(authorization: string | undefined, admin: Credentials): Presented {
  if (authorization?.startsWith('Bearer ')) return { kind: 'bearer', token: authorization.slice(7).trim() };
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (!match?.[1]) throw new Unauthorized('Authentication required');

  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon < 0 ? decoded : decoded.slice(0, colon);
  const pass = colon < 0 ? '' : decoded.slice(colon + 1);
  // Both compared, always: which of the two was wrong is not revealed by timing.
  const userOk = timingSafeEqual(digest(user), admin.user);
  const passOk = timingSafeEqual(digest(pass), admin.pass);
  if (!(userOk && passOk)) throw new WrongCredentials('Invalid credentials');
  return { kind: 'admin' };
}

export interface AuthContext {
  principal?: Principal;
}

interface Checks {
  config: Config;
  admin: Credentials;
  throttle: AuthThrottle;
}

let checks: Checks | undefined;

/** The admin credentials' digests and the failure counts, made once per configuration. */
function checksFor(config: Config): Checks {
  if (checks?.config !== config) {
    checks = {
      config,
      admin: adminCredentials(config.AUTH_USER, config.AUTH_PASS),
      throttle: new AuthThrottle(config.AUTH_MAX_FAILURES, config.AUTH_FAILURE_WINDOW_S),
    };
  }
  return checks;
}

async function keyPrincipal(token: string): Promise<Principal> {
  const db = await getDatabase();
  const key = await resolveKey(db, token);
  if (!key) throw new WrongCredentials('Invalid API key');
  touchKey(db, key.id);
  return { kind: 'key', id: key.id, schema: key.schema, keyType: key.keyType };
}

async function principalOf(authorization: string | undefined, admin: Credentials): Promise<Principal> {
  const presented = authenticateHeader(authorization, admin);
  return presented.kind === 'bearer' ? keyPrincipal(presented.token) : presented;
}

/**
 * Basic (AUTH_USER / AUTH_PASS) or Bearer (API key); the principal goes on the context. An
 * address with too many recent failures gets 429 before its credentials are even read, so a
 * guess that happens to be right looks exactly like a wrong one.
 */
export const authenticate = (): MiddlewareObj<HttpEvent, unknown, Error, AuthContext & Context> => ({
  before: async (request) => {
    const config = await getConfig();
    const { admin, throttle } = checksFor(config);
    const address = clientAddress(request.event, config.TRUSTED_PROXIES);
    await throttle.refuseIfBlocked(address);
    try {
      request.context.principal = await principalOf(header(request.event, 'authorization'), admin);
    } catch (error) {
      if (error instanceof WrongCredentials) await throttle.countFailure(address);
      throw error;
    }
  },
});
