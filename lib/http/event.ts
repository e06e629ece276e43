import { BlockList, isIP, isIPv6 } from 'node:net';

/** The parts of an API Gateway HTTP event (payload 1.0 or 2.0) that dbadmin reads. */
export interface HttpEvent {
  headers?: Record<string, string | undefined> | null;
  body?: unknown;
  isBase64Encoded?: boolean;
  pathParameters?: Record<string, string | undefined> | null;
  queryStringParameters?: Record<string, string | undefined> | null;
  /** Payload 2.0: the query as sent, where a repeated name keeps each of its values. */
  rawQueryString?: string;
  /** Payload 1.0: every value of each name. */
  multiValueQueryStringParameters?: Record<string, string[] | undefined> | null;
}

/** Query names that may repeat (`filter=a.eq.1&filter=b.gt.2`): their values are kept apart. */
const REPEATABLE = new Set(['filter']);
/** The row-finding language's parameters: read from the raw query, so every host decodes them alike. */
const FROM_RAW = ['filter', 'or', 'and', 'q', 'order', 'select'];

/**
 * The query as a route's schema reads it: one value per name, except the repeatable ones, which
 * come as every value in order. API Gateway's payload 2.0 joins repeated values with commas in
 * queryStringParameters, which a filter's own commas make ambiguous, and hosts differ on whether
 * `+` is a space there: the row-finding parameters are read from the raw query, as the browser's
 * URLSearchParams wrote them.
 */
export function queryInput(event: HttpEvent): Record<string, string | string[] | undefined> {
  const single: Record<string, string | string[] | undefined> = { ...(event.queryStringParameters ?? {}) };
  const raw =
    typeof event.rawQueryString === 'string' ? new URLSearchParams(event.rawQueryString) : undefined;
  for (const name of FROM_RAW) {
    const values = raw ? raw.getAll(name) : event.multiValueQueryStringParameters?.[name];
    if (!values || values.length === 0) continue;
    single[name] = REPEATABLE.has(name) ? values : values.at(-1);
  }
  return single;
}

/** The request's method, upper case (payload 2.0 or 1.0). */
export function requestMethod(event: HttpEvent): string {
  const { requestContext, httpMethod } = event as {
    requestContext?: { http?: { method?: string } };
    httpMethod?: string;
  };
  return (requestContext?.http?.method ?? httpMethod ?? 'GET').toUpperCase();
}

/** The caller's address as API Gateway (or serverless-offline) saw it (payload 2.0 or 1.0). */
function peerAddress(event: unknown): string | undefined {
  const context = (
    event as { requestContext?: { http?: { sourceIp?: unknown }; identity?: { sourceIp?: unknown } } }
  ).requestContext;
  const address = context?.http?.sourceIp ?? context?.identity?.sourceIp;
  return typeof address === 'string' ? address : undefined;
}

const unmapped = (address: string) => address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');

const trustLists = new WeakMap<readonly string[], BlockList>();
function trustList(trusted: readonly string[]): BlockList {
  let list = trustLists.get(trusted);
  if (!list) {
    list = new BlockList();
    for (const entry of trusted) {
      const [address = '', prefix] = entry.split('/');
      const type = isIPv6(address) ? 'ipv6' : 'ipv4';
      if (prefix === undefined) list.addAddress(address, type);
      else list.addSubnet(address, Number(prefix), type);
    }
    trustLists.set(trusted, list);
  }
  return list;
}

const isTrusted = (address: string, trusted: readonly string[]) =>
  isIP(address) !== 0 && trustList(trusted).check(address, isIPv6(address) ? 'ipv6' : 'ipv4');

/** The scheme a proxy says the client used (its first X-Forwarded-Proto), lower case. */
export const forwardedScheme = (event: HttpEvent) =>
  header(event, 'x-forwarded-proto')?.split(',')[0]?.trim().toLowerCase();

/** API Gateway's own domain name for the request, when it came through API Gateway. */
export function gatewayDomain(event: HttpEvent): string | undefined {
  const domain = (event as { requestContext?: { domainName?: unknown } }).requestContext?.domainName;
  return typeof domain === 'string' ? domain.toLowerCase() : undefined;
}

/** Whether the request came through a proxy in `trusted` (TRUSTED_PROXIES), which vouches for its headers. */
export function fromTrustedProxy(event: HttpEvent, trusted: readonly string[]): boolean {
  const peer = peerAddress(event);
  return !!peer && trusted.length > 0 && isTrusted(unmapped(peer), trusted);
}

/**
 * The client's address: the peer's, unless the peer is a trusted proxy; then the last address in
 * X-Forwarded-For that no trusted proxy added (each proxy appends the peer it saw; what comes
 * before that is the client's own say, never believed).
 */
export function clientAddress(event: HttpEvent, trusted: readonly string[] = []): string | undefined {
  const peer = peerAddress(event);
  if (!peer || trusted.length === 0 || !isTrusted(unmapped(peer), trusted)) return peer;
  const forwarded = (header(event, 'x-forwarded-for') ?? '')
    .split(',')
    .map((entry) => unmapped(entry.trim()))
    .filter(Boolean);
  for (let i = forwarded.length - 1; i >= 0; i--) {
    const hop = forwarded[i] as string;
    if (!isTrusted(hop, trusted)) return hop;
  }
  return forwarded[0] ?? peer;
}

/** Header lookup that does not depend on the host's casing (API Gateway v2 lower-cases, v1 does not). */
export function header(event: HttpEvent, name: string): string | undefined {
  const headers = event.headers ?? {};
  const direct = headers[name];
  if (direct !== undefined) return direct;
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === wanted) return value;
  }
  return undefined;
}
