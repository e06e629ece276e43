import type { Download } from '#lib/download';

/**
 * The HTTP answers a handler gives: JSON, JSON text already rendered, downloads with their file
 * name, and redirects (single sign-on's); none of them cached or sniffed (no-store, nosniff).
 */

export interface HttpResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
  /** The body is base64 (compressed assets, binary downloads); API Gateway decodes it. */
  isBase64Encoded?: boolean;
}

const JSON_HEADERS = {
  'content-type': 'application/json; charset=utf-8',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

export function json(statusCode: number, data: unknown, headers: Record<string, string> = {}): HttpResponse {
  return jsonText(statusCode, JSON.stringify(data), headers);
}

/** JSON rendered elsewhere (lib/json-text), sent as it is. */
export function jsonText(
  statusCode: number,
  body: string,
  headers: Record<string, string> = {},
): HttpResponse {
  return { statusCode, headers: { ...JSON_HEADERS, ...headers }, body };
}

/** A file download (an export) as an attachment; without a file name, a plain answer. */
export function download(file: Download): HttpResponse {
  const binary = Buffer.isBuffer(file.body);
  return {
    statusCode: 200,
    headers: {
      'content-type': file.contentType,
      ...(file.filename === undefined
        ? {}
        : { 'content-disposition': `attachment; filename="${file.filename.replace(/["\\\r\n]/g, '_')}"` }),
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      ...file.headers,
    },
    body: binary ? file.body.toString('base64') : (file.body as string),
    ...(binary && { isBase64Encoded: true }),
  };
}

/** A route's JSON answer with headers of its own (a session's Set-Cookie). */
export class Reply<T = unknown> {
  constructor(
    readonly body: T,
    readonly headers: Record<string, string>,
  ) {}
}

/**
 * A redirect (303 See Other unless the route says) to `location`, with these headers too;
 * `refused`: it only carries a refusal to a page that shows it (nothing changed).
 */
export class Redirect {
  constructor(
    readonly location: string,
    readonly headers: Record<string, string> = {},
    readonly refused = false,
  ) {}
}

export function redirect(statusCode: number, { location, headers }: Redirect): HttpResponse {
  return { statusCode, headers: { location, 'cache-control': 'no-store', ...headers }, body: '' };
}
