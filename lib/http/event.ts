/** The parts of an API Gateway HTTP event (payload 1.0 or 2.0) that dbadmin reads. */
export interface HttpEvent {
  headers?: Record<string, string | undefined> | null;
  body?: unknown;
  isBase64Encoded?: boolean;
  pathParameters?: Record<string, string | undefined> | null;
  queryStringParameters?: Record<string, string | undefined> | null;
}

/** The caller's address as API Gateway saw it (payload 2.0 or 1.0). */
export function clientAddress(event: unknown): string | undefined {
  const context = (
    event as { requestContext?: { http?: { sourceIp?: unknown }; identity?: { sourceIp?: unknown } } }
  ).requestContext;
  const address = context?.http?.sourceIp ?? context?.identity?.sourceIp;
  return typeof address === 'string' ? address : undefined;
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
