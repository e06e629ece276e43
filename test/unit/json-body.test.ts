import { parseJsonBody } from '#lib/http/json-body';

const event = (body: string | undefined, contentType?: string, isBase64Encoded = false) => ({
  body,
  isBase64Encoded,
  headers: contentType ? { 'content-type': contentType } : {},
});

describe('parseJsonBody', () => {
  it('parses a JSON body, with or without a charset', () => {
    expect(parseJsonBody(event('{"a":1}', 'application/json'))).toEqual({ a: 1 });
    expect(parseJsonBody(event('{"a":1}', 'application/json; charset=utf-8'))).toEqual({ a: 1 });
    expect(parseJsonBody(event('{"a":1}', 'application/vnd.api+json'))).toEqual({ a: 1 });
  });

  it('accepts a body sent without any content type as JSON', () => {
    expect(parseJsonBody(event('[1,2]'))).toEqual([1, 2]);
  });

  it('decodes base64 bodies', () => {
    expect(
      parseJsonBody(event(Buffer.from('{"b":true}').toString('base64'), 'application/json', true)),
    ).toEqual({ b: true });
  });

  it('leaves an absent body undefined, for the route schema to report', () => {
    expect(parseJsonBody(event(undefined, 'application/json'))).toBeUndefined();
    expect(parseJsonBody(event('', 'application/json'))).toBeUndefined();
  });

  it('answers 400 Invalid JSON with the parser’s reason', () => {
    expect(() => parseJsonBody(event('{"a":', 'application/json'))).toThrow(
      expect.objectContaining({ status: 400, title: 'Invalid JSON' }),
    );
  });

  it('answers 413 for a body over the limit, before parsing it', () => {
    expect(() => parseJsonBody(event(`"${'x'.repeat(100)}"`, 'application/json'), 64)).toThrow(
      expect.objectContaining({ status: 413, message: 'request body must be at most 64 bytes' }),
    );
  });

  it('answers 415 for a body declared as something else', () => {
    expect(() => parseJsonBody(event('a=1', 'application/x-www-form-urlencoded'))).toThrow(
      expect.objectContaining({ status: 415 }),
    );
  });
});
