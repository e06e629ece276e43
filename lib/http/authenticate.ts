import { hash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareObj } from '@middy/core';
import { getConfig } from '#lib/config';
import { Unauthorized } from '#lib/errors';
import { type HttpEvent, header } from '#lib/http/event';
import type { Principal } from '#lib/http/route';

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

/** Decides who is calling, from the Authorization header alone. */
export function authenticateHeader(authorization: string | undefined, admin: Credentials): Principal {
  if (authorization?.startsWith('Bearer ')) {
    // API keys come with their own issue; until then no key is valid.
    throw new Unauthorized('Invalid API key');
  }
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (!match?.[1]) throw new Unauthorized('Authentication required');

  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const user = colon < 0 ? decoded : decoded.slice(0, colon);
  const pass = colon < 0 ? '' : decoded.slice(colon + 1);
  // Both compared, always: which of the two was wrong is not revealed by timing.
  const userOk = timingSafeEqual(digest(user), admin.user);
  const passOk = timingSafeEqual(digest(pass), admin.pass);
  if (!(userOk && passOk)) throw new Unauthorized('Invalid credentials');
  return { kind: 'admin' };
}

export interface AuthContext {
  principal?: Principal;
}

// The admin credentials' digests, computed once per configuration rather than per request.
let admin: Credentials = adminCredentials('', '');
let digestedFor: unknown;

/** Basic authentication against AUTH_USER / AUTH_PASS; the principal goes on the context. */
export const authenticate = (): MiddlewareObj<
  HttpEvent,
  unknown,
  Error,
  AuthContext & import('aws-lambda').Context
> => ({
  before: async (request) => {
    const config = await getConfig();
    if (config !== digestedFor) {
      admin = adminCredentials(config.AUTH_USER, config.AUTH_PASS);
      digestedFor = config;
    }
    request.context.principal = authenticateHeader(header(request.event, 'authorization'), admin);
  },
});
