import type { MiddlewareObj } from '@middy/core';
import { ApiError } from '#lib/errors';
import type { HttpResponse } from '#lib/http/respond';
import { JSON_BYTES_PER_UNIT_AT_MOST } from '#lib/json-text';

/** Lambda's limit on a synchronous invocation's response: the whole envelope, as JSON. */
export const LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024;

/** The envelope's other fields (status, headers) and the body's own quotes. */
const ENVELOPE_ALLOWANCE = 64 * 1024;

export class ResponseTooLarge extends ApiError {
  constructor(bytes: number) {
    super(
      413,
      'Response too large',
      `the answer would be ${bytes} bytes, over the 6 MB (${LAMBDA_RESPONSE_LIMIT} bytes) a Lambda response may carry; export or select fewer rows (limit) or columns`,
    );
  }
}

/**
 * The characters JSON.stringify writes in more than one byte over their UTF-8 size: control
 * characters (`\u001f`, 6 bytes for 1) and surrogates (a lone one is `\udc00`, 6 bytes for the 3
 * Buffer.byteLength counts; a pair is 4 bytes either way). Every other character takes its UTF-8
 * bytes, or one more (`"` and `\`).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
const WIDE_ESCAPES = /[\u0000-\u001f\ud800-\udfff]/;

/**
 * The response's size as Lambda measures it (the envelope as JSON); exact only when it could
 * matter, else 0. A base64 body is measured by its length. Else two bounds come first: the body's length alone (free), then a scan of it (its
 * UTF-8 bytes, plus at most 1 byte of escaping per character, 5 with WIDE_ESCAPES), which spares
 * stringifying the megabytes of an export.
 */
export function envelopeBytes(response: HttpResponse): number {
  const { body } = response;
  if (body.length * JSON_BYTES_PER_UNIT_AT_MOST + ENVELOPE_ALLOWANCE <= LAMBDA_RESPONSE_LIMIT) return 0;
  // Base64 is ASCII JSON never escapes: exact without a scan (a backup's part is 5.6 MB of it).
  if (response.isBase64Encoded)
    return Buffer.byteLength(JSON.stringify({ ...response, body: '' })) + body.length;
  const escaping = WIDE_ESCAPES.test(body) ? 5 : 1;
  const bound = Buffer.byteLength(body) + escaping * body.length + ENVELOPE_ALLOWANCE;
  if (bound <= LAMBDA_RESPONSE_LIMIT) return 0;
  return Buffer.byteLength(JSON.stringify(response));
}

/**
 * An answer Lambda could not return becomes a 413 in the API's format instead of API Gateway's
 * bare 502; the container keeps the same limit, so an answer never depends on the host.
 */
export const responseLimit = (): MiddlewareObj<unknown, HttpResponse> => ({
  after: ({ response }) => {
    if (!response) return;
    const bytes = envelopeBytes(response);
    if (bytes > LAMBDA_RESPONSE_LIMIT) throw new ResponseTooLarge(bytes);
  },
});
