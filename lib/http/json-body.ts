import type { MiddlewareObj } from '@middy/core';
import { BadRequest, PayloadTooLarge, UnsupportedMediaType } from '#lib/errors';
import { type HttpEvent, header } from '#lib/http/event';

/**
 * Request bodies: JSON only, said so by Content-Type, at most MAX_BODY_BYTES, parsed before the
 * route's zod schema sees them; anything else is a 4xx naming what to fix.
 */

export const MAX_BODY_BYTES = 1024 * 1024;

const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

/**
 * Parses a JSON request body. Written here rather than taken from @middy/http-json-body-parser,
 * which answers malformed JSON with 415 where our contract says 400, and has no size limit.
 */
export function parseJsonBody(event: HttpEvent, maxBytes = MAX_BODY_BYTES): unknown {
  const raw = event.body;
  if (raw === undefined || raw === null || raw === '') return undefined;
  if (typeof raw !== 'string') return raw;

  const bytes = event.isBase64Encoded ? Buffer.from(raw, 'base64') : Buffer.from(raw, 'utf8');
  if (bytes.length > maxBytes) throw new PayloadTooLarge(maxBytes);

  const contentType = header(event, 'content-type');
  // No content type at all is accepted as JSON (curl --data-raw); a different one is not.
  if (contentType && !JSON_TYPE.test(contentType)) throw new UnsupportedMediaType(contentType);

  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new BadRequest('Invalid JSON', `request body is not valid JSON: ${(error as Error).message}`);
  }
}

/**
 * Another site's page can make a browser POST here without asking first (a form; fetch in no-cors
 * mode with a text/plain or type-less body), and the browser adds the Basic credentials it has
 * cached for us. None of those can carry a JSON content type: an authenticated POST must, with
 * or without a body. (DELETE and PATCH are never sent that way: the browser asks first, and we
 * grant no other origin anything.)
 */
export const jsonContentType = (): MiddlewareObj<HttpEvent> => ({
  before: ({ event }) => {
    const contentType = header(event, 'content-type');
    if (!contentType || !JSON_TYPE.test(contentType))
      throw new UnsupportedMediaType(contentType ?? 'no Content-Type');
  },
});

export const jsonBody = (maxBytes = MAX_BODY_BYTES): MiddlewareObj<HttpEvent> => ({
  before: (request) => {
    request.event.body = parseJsonBody(request.event, maxBytes);
  },
});
