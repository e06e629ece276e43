import { MAX_JSON_DEPTH, parseJsonBody } from '#lib/http/json-body';

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

describe('parseJsonBody’s nesting limit', () => {
  const nested = (levels: number) => `${'['.repeat(levels)}${']'.repeat(levels)}`;

  it(`parses a body nested ${MAX_JSON_DEPTH} levels, which JSON.stringify with a replacer writes again`, () => {
    const parsed = parseJsonBody(event(nested(MAX_JSON_DEPTH), 'application/json'));

    expect(JSON.stringify(parsed, (_, value: unknown) => value)).toBe(nested(MAX_JSON_DEPTH));
  });

  it('answers 400 naming the limit for a body nested one level deeper', () => {
    expect(() => parseJsonBody(event(`{"a":${nested(MAX_JSON_DEPTH)}}`, 'application/json'))).toThrow(
      expect.objectContaining({
        status: 400,
        title: 'JSON nested too deep',
        message: `request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep; at most ${MAX_JSON_DEPTH} levels are taken`,
      }),
    );
  });

  it('counts brackets inside strings as text, not nesting', () => {
    const text = JSON.stringify({ a: '['.repeat(1000), b: '\\"[[[' });

    expect(parseJsonBody(event(text, 'application/json'))).toEqual(JSON.parse(text));
  });
});
