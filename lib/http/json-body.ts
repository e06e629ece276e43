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
 * How deep a body may nest arrays and objects. Generous for any jsonb value a row carries, and
 * far within what the service's own recursion over a body takes (JSON.stringify with a replacer,
 * zod, PostgreSQL's jsonb parser), none of which may meet a stack overflow (a 500) on a tenant's say.
 */
export const MAX_JSON_DEPTH = 256;

/** Where the string opened by the quote at `start` ends (its closing quote), escapes skipped. */
function stringEnd(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length && text.charCodeAt(i) !== 0x22) i += text.charCodeAt(i) === 0x5c ? 2 : 1;
  return i;
}

const OPENS = new Set([0x5b, 0x7b]);
const CLOSES = new Set([0x5d, 0x7d]);

/** Whether the JSON text nests arrays and objects deeper than `max` (brackets in strings are text). */
function nestedDeeper(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) i = stringEnd(text, i);
    else if (OPENS.has(c)) {
      if (++depth > max) return true;
    } else if (CLOSES.has(c)) depth--;
  }
  return false;
}

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

  const text = bytes.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new BadRequest('Invalid JSON', `request body is not valid JSON: ${(error as Error).message}`);
  }
  if (nestedDeeper(text, MAX_JSON_DEPTH)) {
    throw new BadRequest(
      'JSON nested too deep',
      `request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep; at most ${MAX_JSON_DEPTH} levels are taken`,
    );
  }
  return parsed;
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
