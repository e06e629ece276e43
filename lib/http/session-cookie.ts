import { type SessionOwner, type StartedSession, startSession } from '#lib/admin/person-sessions';
import { type Config, isLambda } from '#lib/config';
import type { AuditDraft } from '#lib/db/audit-log';
import { trustedProxies } from '#lib/http/cross-site';
import { forwardedScheme, fromTrustedProxy, gatewayDomain, type HttpEvent, header } from '#lib/http/event';

/**
 * The console session's cookie: HttpOnly (no script reads it), SameSite=Strict (no other site's
 * page sends it), Path=/, for the session's absolute lifetime. Over HTTPS it is Secure and named
 * `__Host-dbadmin_session`, which a browser keeps only from this very host over HTTPS, so a
 * sibling subdomain cannot plant one; over plain HTTP (localhost) it is `dbadmin_session`, and
 * only read over plain HTTP.
 */

const SECURE_NAME = '__Host-dbadmin_session';
const PLAIN_NAME = 'dbadmin_session';

/**
 * Whether the browser reached us over HTTPS: API Gateway always; a proxy of TRUSTED_PROXIES (the
 * container's Caddy) that says so. The same trust as the cross-site check's (lib/http/cross-site).
 */
export function overHttps(event: HttpEvent): boolean {
  if (isLambda() && gatewayDomain(event)) return true;
  return fromTrustedProxy(event, trustedProxies()) && forwardedScheme(event) === 'https';
}

/** Every `name=value` the request's cookies carry (payload 2.0's `cookies`, or the Cookie header). */
function cookies(event: HttpEvent): string[] {
  const listed = (event as { cookies?: unknown }).cookies;
  if (Array.isArray(listed)) return listed.filter((c): c is string => typeof c === 'string');
  return (header(event, 'cookie') ?? '').split(';').map((c) => c.trim());
}

/** The value of the request's cookie `name`, if it carries one. */
export function cookieNamed(event: HttpEvent, name: string): string | undefined {
  for (const cookie of cookies(event)) {
    const at = cookie.indexOf('=');
    if (at > 0 && cookie.slice(0, at).trim() === name) return cookie.slice(at + 1).trim();
  }
  return undefined;
}

/** The session secret the request carries in the cookie its scheme allows, if any. */
export const sessionCookie = (event: HttpEvent): string | undefined =>
  cookieNamed(event, overHttps(event) ? SECURE_NAME : PLAIN_NAME);

/** The Set-Cookie that starts a session (`secret`, for `maxAgeS`) or ends it (no secret). */
export function sessionSetCookie(secure: boolean, secret?: string, maxAgeS = 0): string {
  const parts = [
    `${secure ? SECURE_NAME : PLAIN_NAME}=${secret ?? ''}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Strict',
    `Max-Age=${secret ? maxAgeS : 0}`,
    ...(secure ? ['Secure'] : []),
  ];
  return parts.join('; ');
}

/** Where a sign-in came from, for the session's record and its cookie. */
export interface SignInInput {
  clientAddress: string | undefined;
  userAgent: string | undefined;
  overHttps: boolean;
  audit: AuditDraft | undefined;
}

/** A new console session for `owner`, and the Set-Cookie that hands it to the browser. */
export async function openConsoleSession(
  db: Parameters<typeof startSession>[0],
  config: Config,
  owner: SessionOwner,
  via: 'password' | 'sso',
  input: SignInInput,
): Promise<{ session: StartedSession; setCookie: string }> {
  const seen = { address: input.clientAddress, userAgent: input.userAgent };
  const session = await startSession(db, owner, via, config, seen, input.audit);
  const maxAge = Math.floor((session.endsAt.getTime() - Date.now()) / 1000);
  return { session, setCookie: sessionSetCookie(input.overHttps, session.secret, maxAge) };
}

/**
 * The cookie that holds a single sign-on attempt, sealed (lib/admin/sso), in the browser that
 * started it: SameSite=Lax, since the provider's redirect back is a navigation from another site;
 * over HTTPS named `__Host-dbadmin_sso`, which no sibling subdomain can plant.
 */
export const SSO_COOKIE = (secure: boolean) => (secure ? '__Host-dbadmin_sso' : 'dbadmin_sso');

export function ssoSetCookie(secure: boolean, sealed: string, maxAgeS: number): string {
  return [
    `${SSO_COOKIE(secure)}=${sealed}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Lax',
    `Max-Age=${maxAgeS}`,
    ...(secure ? ['Secure'] : []),
  ].join('; ');
}
