import type { MiddlewareObj } from '@middy/core';
import { ApiError } from '#lib/errors';
import type { HttpResponse } from '#lib/http/respond';

/** Lambda's limit on a synchronous invocation's response: the whole envelope, as JSON. */
export const LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024;

/** JSON escapes one UTF-16 unit into at most 6 bytes (`\u001f`); the envelope's other fields are small. */
const MAX_BYTES_PER_CHAR = 6;
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

/** The response's size as Lambda measures it; exact only when it could matter. */
export function envelopeBytes(response: HttpResponse): number {
  const cheap = response.body.length * MAX_BYTES_PER_CHAR + ENVELOPE_ALLOWANCE;
  if (cheap <= LAMBDA_RESPONSE_LIMIT) return 0;
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
