import type { HttpResponse } from '#lib/http/respond';
import { envelopeBytes, LAMBDA_RESPONSE_LIMIT } from '#lib/http/response-limit';

const response = (body: string): HttpResponse => ({
  statusCode: 200,
  headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' },
  body,
});

const exactBytes = (reply: HttpResponse) => Buffer.byteLength(JSON.stringify(reply));

/** Repeats `unit` until the envelope is one unit over the limit (each unit escapes on its own). */
function justOver(unit: string): HttpResponse {
  const empty = exactBytes(response(''));
  const perUnit = exactBytes(response(unit)) - empty;
  const reply = response(unit.repeat(Math.floor((LAMBDA_RESPONSE_LIMIT - empty) / perUnit) + 1));
  expect(exactBytes(reply) - perUnit).toBeLessThanOrEqual(LAMBDA_RESPONSE_LIMIT);
  return reply;
}

describe('envelopeBytes', () => {
  // Each escapes differently: as is, one byte more, five more, three more than byteLength counts.
  it.each([
    ['ASCII', 'abc'],
    ['quotes and backslashes', '"\\'],
    ['control characters', '\u0001\u001f'],
    ['newlines and tabs', '\n\t'],
    ['two- and three-byte characters', 'é€'],
    ['surrogate pairs', '😀'],
    ['lone surrogates', '\ud800x\udc00'],
    ['JSON a page read renders', '{"name":"item \\"1\\"","n":1},'],
  ])('never lets a body of %s just over the limit pass as small', (_kind, unit) => {
    const reply = justOver(unit);

    expect(envelopeBytes(reply)).toBe(exactBytes(reply));
    expect(envelopeBytes(reply)).toBeGreaterThan(LAMBDA_RESPONSE_LIMIT);
  });

  it('measures a base64 body exactly by its length, without stringifying it', () => {
    const small = { ...response('QUJD'.repeat(1_000_000)), isBase64Encoded: true };
    const over = { ...small, body: 'QUJD'.repeat(LAMBDA_RESPONSE_LIMIT / 4) };
    const expected = [exactBytes(small), exactBytes(over)];
    const stringify = jest.spyOn(JSON, 'stringify');

    expect([envelopeBytes(small), envelopeBytes(over)]).toEqual(expected);
    expect(envelopeBytes(over)).toBeGreaterThan(LAMBDA_RESPONSE_LIMIT);
    expect(stringify.mock.calls.every(([value]) => (value as HttpResponse).body === '')).toBe(true);
    stringify.mockRestore();
  });

  it('passes a megabyte of JSON by its bound, without stringifying it', () => {
    const reply = response(`[${'{"id":1,"name":"item \\"1\\""},'.repeat(35_000)}{}]`);
    const stringify = jest.spyOn(JSON, 'stringify');

    expect(envelopeBytes(reply)).toBe(0);
    expect(stringify).not.toHaveBeenCalled();
    stringify.mockRestore();
  });
});
