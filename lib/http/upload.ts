import type { MiddlewareObj } from '@middy/core';
import { PayloadTooLarge, UnsupportedMediaType } from '#lib/errors';
import { type HttpEvent, header } from '#lib/http/event';

/**
 * A route that takes a file (or a part of one) as its body rather than JSON: the bytes as they
 * came, of one of the route's content types, at most its size. Every such type needs the browser
 * to ask first (none is text/plain, a form's or no type at all), so another site's page cannot send
 * one with the admin's cached credentials (see lib/http/json-body jsonContentType).
 */

export interface Upload {
  bytes: Buffer;
  /** The media type, lowercased, without its parameters. */
  contentType: string;
}

export interface UploadRule {
  types: readonly string[];
  maxBytes: number;
  /** What a caller with more should do, after the limit in the 413's message. */
  tooLarge?: string;
}

/** Types a browser sends without asking first: never taken as an upload. */
const SIMPLE_TYPES = new Set(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data']);

export function uploadBody(rule: UploadRule): MiddlewareObj<HttpEvent & { body?: unknown }> {
  for (const type of rule.types)
    if (SIMPLE_TYPES.has(type)) throw new Error(`${type} cannot be an upload type`);
  return {
    before: ({ event }) => {
      const contentType = (header(event, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      if (!rule.types.includes(contentType)) {
        throw new UnsupportedMediaType(
          contentType || 'no Content-Type',
          `Content-Type: ${rule.types.join(', or ')}`,
        );
      }
      const raw = typeof event.body === 'string' ? event.body : '';
      const bytes = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
      if (bytes.length > rule.maxBytes) throw new PayloadTooLarge(rule.maxBytes, rule.tooLarge ?? '');
      event.body = { bytes, contentType } satisfies Upload;
    },
  };
}
