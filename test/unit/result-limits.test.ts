import { jsonBytesAtMost } from '#lib/db/result-limits';

/**
 * QUERY_MAX_BYTES is the exact size of the rows' JSON; boundedQuery counts it exactly only once a
 * cheap bound passes the limit. The bound must never be below the exact size, whatever the values.
 */
const exact = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? '');

const STRINGS = [
  '',
  'plain',
  'quote " and backslash \\',
  'controls \u0000\u0001\u001f\b\f\n\r\t',
  'lone surrogates \ud800 \udfff',
  'astral 😀𝄞 and é',
  '\u2028\u2029',
  '\u007f\u0080\uffff',
];
const NUMBERS = [
  0,
  -0,
  1,
  -1,
  0.1,
  1e21,
  -1.7976931348623157e308,
  -2.2250738585072014e-308,
  5e-324,
  Number.MAX_SAFE_INTEGER,
  Number.NaN,
  -Infinity,
];
const DATES = [new Date(0), new Date(8.64e15), new Date(-8.64e15), new Date(Number.NaN)];
const OTHERS = [
  null,
  true,
  false,
  undefined,
  Buffer.from('\u0000\xff'),
  { x: 1.5, y: -2 },
  { 'key "quoted"\n': STRINGS, nested: { deeper: [DATES, NUMBERS] }, gone: undefined },
  [[[]], {}, [null, undefined]],
  // Past the depth where the bound measures exactly.
  Array.from({ length: 100 }).reduce<unknown>((inner) => ({ 'a\n': [inner, 'é'] }), 'x\u0000'),
];

describe('jsonBytesAtMost', () => {
  it.each(
    [...STRINGS, ...NUMBERS, ...DATES, ...OTHERS].map((value) => [
      JSON.stringify(value) ?? String(value),
      value,
    ]),
  )('is at least the JSON of %s', (_, value) => {
    expect(jsonBytesAtMost(value)).toBeGreaterThanOrEqual(exact(value));
  });

  it('is at least the JSON of rows made of every kind together', () => {
    const values = [...STRINGS, ...NUMBERS, ...DATES, ...OTHERS];
    for (let i = 0; i < 500; i++) {
      const row = Array.from({ length: 1 + (i % 7) }, (_, j) => values[(i * 31 + j * 17) % values.length]);
      const named = Object.fromEntries(row.map((value, j) => [`${STRINGS[j % STRINGS.length]}${j}`, value]));
      expect(jsonBytesAtMost(row)).toBeGreaterThanOrEqual(exact(row));
      expect(jsonBytesAtMost(named)).toBeGreaterThanOrEqual(exact(named));
    }
  });
});
