import { isLambda } from '#lib/config';
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

/** The session secret the request carries in the cookie its scheme allows, if any. */
export function sessionCookie(event: HttpEvent): string | undefined {
  const name = overHttps(event) ? SECURE_NAME : PLAIN_NAME;
  for (const cookie of cookies(event)) {
    const at = cookie.indexOf('=');
    if (at > 0 && cookie.slice(0, at).trim() === name) return cookie.slice(at + 1).trim();
  }
  return undefined;
}

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
