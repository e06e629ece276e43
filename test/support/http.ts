import { randomBytes } from 'node:crypto';
import type { Context } from 'aws-lambda';

type Handler = (event: any, context: Context, ...rest: any[]) => Promise<unknown>;

export interface Call {
  method?: string;
  path: string;
  /** An array repeats the name (`filter=a&filter=b`). */
  query?: Record<string, string | string[]>;
  headers?: Record<string, string>;
  /** An object is sent as JSON; a string as it is; bytes as base64, as API Gateway sends binary. */
  body?: unknown;
  /** Basic credentials; defaults to the test admin. `null` sends no Authorization header. */
  auth?: { user: string; pass: string } | null;
  /** The client's address as API Gateway reports it; 127.0.0.1 unless a test needs another. */
  sourceIp?: string;
}

export interface Reply {
  status: number;
  headers: Record<string, string>;
  body: any;
  text: string;
  /** The body's bytes: decoded when the answer is base64 (binary downloads, compressed assets). */
  bytes: Buffer;
}

export const ADMIN = { user: 'test-admin', pass: 'test-admin-password' };

export const basic = ({ user, pass }: { user: string; pass: string }) =>
  `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;

/** An API Gateway HTTP API (payload 2.0) event, as API Gateway and serverless-offline send it. */
export function httpEvent(call: Call) {
  const method = call.method ?? 'GET';
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(call.headers ?? {})) headers[name.toLowerCase()] = value;
  const auth = call.auth === undefined ? ADMIN : call.auth;
  if (auth && !headers.authorization) headers.authorization = basic(auth);
  let body: string | undefined;
  const binary = Buffer.isBuffer(call.body);
  if (typeof call.body === 'string') body = call.body;
  else if (Buffer.isBuffer(call.body)) body = call.body.toString('base64');
  else if (call.body !== undefined) {
    body = JSON.stringify(call.body);
    headers['content-type'] ??= 'application/json';
  }
  const query = call.query ?? {};
  const pairs = Object.entries(query).flatMap(([name, value]) =>
    (Array.isArray(value) ? value : [value]).map((one): [string, string] => [name, one]),
  );
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: call.path,
    rawQueryString: new URLSearchParams(pairs).toString(),
    headers,
    // API Gateway joins a repeated name's values with commas here.
    queryStringParameters:
      pairs.length > 0
        ? Object.fromEntries(Object.entries(query).map(([name, value]) => [name, [value].flat().join(',')]))
        : undefined,
    requestContext: {
      http: {
        method,
        path: call.path,
        protocol: 'HTTP/1.1',
        sourceIp: call.sourceIp ?? '127.0.0.1',
        userAgent: 'jest',
      },
      requestId: randomBytes(8).toString('hex'),
      stage: '$default',
    },
    body,
    isBase64Encoded: binary,
  };
}

export function lambdaContext(): Context {
  return {
    functionName: 'test',
    awsRequestId: randomBytes(8).toString('hex'),
    getRemainingTimeInMillis: () => 30_000,
  } as unknown as Context;
}

/** Sends one request through a real handler, the way API Gateway would. */
export async function call(handler: Handler, request: Call): Promise<Reply> {
  const response = (await handler(httpEvent(request), lambdaContext())) as {
    statusCode: number;
    headers?: Record<string, string>;
    body?: string;
    isBase64Encoded?: boolean;
  };
  const text = response.body ?? '';
  const bytes = Buffer.from(text, response.isBase64Encoded ? 'base64' : 'utf8');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: leave as text
  }
  return { status: response.statusCode, headers: response.headers ?? {}, body, text, bytes };
}
