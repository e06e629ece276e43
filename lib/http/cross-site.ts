import { isIP } from 'node:net';
import type { MiddlewareObj } from '@middy/core';
import { commaSeparated, isLambda } from '#lib/config';
import { ApiError } from '#lib/errors';
import {
  forwardedScheme,
  fromTrustedProxy,
  gatewayDomain,
  type HttpEvent,
  header,
  requestMethod,
} from '#lib/http/event';

/**
 * What a page on another site may do with the admin's browser: nothing. Any page can make a
 * browser send a form, or a no-cors fetch with a body, to any address, with whatever credentials
 * the browser holds for it, and no preflight asks first. So every request that may change
 * something (any method but GET, HEAD and OPTIONS), on every route (the public trial and
 * activation included), is refused before any work when a browser says it comes from elsewhere:
 * `Sec-Fetch-Site: cross-site` or `same-site`, or an `Origin` that is neither the service's own
 * nor in CORS_ALLOWED_ORIGINS. Non-browser clients (curl, SDKs) send neither header.
 *
 * Reading answers is the browser's to refuse: no other origin is ever granted CORS headers but
 * those of CORS_ALLOWED_ORIGINS (deploy/cors-plugin.cjs, for both hosts).
 */

export class CrossSiteRefused extends ApiError {
  constructor(message: string) {
    super(403, 'Cross-site request refused', message);
  }
}

/** Methods that change nothing: no cross-site refusal, and no CSRF token asked (lib/http/authenticate). */
export const READS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

const listed = new Map<string, { setting: string | undefined; entries: readonly string[] }>();

/**
 * A list setting as the environment has it now (the service checks both at start, lib/config),
 * parsed once per value: the same array each time, so lib/http/event's trust list built from it
 * is built once, not on every request.
 */
function envList(name: 'CORS_ALLOWED_ORIGINS' | 'TRUSTED_PROXIES'): readonly string[] {
  const setting = process.env[name];
  let kept = listed.get(name);
  if (kept?.setting !== setting || !kept) {
    kept = { setting, entries: commaSeparated(setting) };
    listed.set(name, kept);
  }
  return kept.entries;
}

const allowedOrigins = () => envList('CORS_ALLOWED_ORIGINS');

/** TRUSTED_PROXIES as the environment has it now: read here without the service's whole config (the license server has none). */
export const trustedProxies = () => envList('TRUSTED_PROXIES');

/** A name only this machine answers to: an address, `localhost` or a `.localhost` name. */
const loopbackOrAddress = (hostname: string) =>
  isIP(hostname.replace(/^\[|\]$/g, '')) !== 0 || hostname === 'localhost' || hostname.endsWith('.localhost');

/**
 * Whether `origin` is the one the request was sent to. Its host must be the Host header's, and
 * that Host one that no other site's page can send: a page whose DNS name an attacker points at
 * this machine (DNS rebinding) sends its own name as Host and as Origin alike. So Host is trusted
 * when a trusted proxy (TRUSTED_PROXIES; the container's Caddy serves its one domain) or API
 * Gateway (its own domain) delivered the request, both with the scheme they say, or when it is an
 * address or a localhost name. Any other name is served from CORS_ALLOWED_ORIGINS.
 */
function ownOrigin(origin: string, event: HttpEvent): boolean {
  const host = header(event, 'host')?.toLowerCase();
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // `null` (a sandboxed frame, a file), or nothing a browser sends
  }
  if (!host || url.host !== host) return false;
  if (fromTrustedProxy(event, trustedProxies())) {
    const scheme = forwardedScheme(event);
    return !scheme || url.protocol === `${scheme}:`;
  }
  if (gatewayDomain(event) === url.hostname && isLambda()) return url.protocol === 'https:';
  return loopbackOrAddress(url.hostname);
}

/** Why the request must be refused as another site's, or undefined when it may proceed. */
export function crossSiteReason(
  event: HttpEvent,
  allowed: readonly string[] = allowedOrigins(),
): string | undefined {
  if (READS.has(requestMethod(event))) return undefined;
  const origin = header(event, 'origin');
  if (origin !== undefined && allowed.includes(origin)) return undefined;
  if (origin !== undefined && !ownOrigin(origin, event))
    return `a page at ${origin.slice(0, 100)} may not change anything here; if that is this service's own address, name it in CORS_ALLOWED_ORIGINS`;
  const site = header(event, 'sec-fetch-site');
  if (site === 'cross-site' || site === 'same-site')
    return 'a page on another site may not change anything here; use the console or an API client';
  return undefined;
}

/** The first check of every request (lib/http/handler): another site's change never starts. */
export const refuseCrossSite = (): MiddlewareObj<HttpEvent> => ({
  before: ({ event }) => {
    const reason = crossSiteReason(event);
    if (reason) throw new CrossSiteRefused(reason);
  },
});

/**
 * Whether a browser sent the request (a navigation or a page's fetch): a 401 to it asks for no
 * Basic credentials (lib/http/error-mapper), so the browser never prompts for them and never
 * keeps them for other pages to use. Browsers send Sec-Fetch-Site with every request over HTTPS
 * or to localhost (Node's fetch sends Sec-Fetch-Mode, never Site); a navigation over plain HTTP
 * still says Upgrade-Insecure-Requests and asks for HTML.
 */
export function fromBrowser(event: HttpEvent): boolean {
  return (
    header(event, 'sec-fetch-site') !== undefined ||
    header(event, 'upgrade-insecure-requests') !== undefined ||
    /\btext\/html\b/i.test(header(event, 'accept') ?? '')
  );
}
