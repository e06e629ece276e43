import pg from 'pg';
import { jsonKindOf, jsonRowTypes, jsonSql, parseArray } from '#lib/db/json-rows';

/**
 * The driver's side of the value mapping (README: Values in JSON): what each type's text becomes.
 * Against PostgreSQL, through every endpoint: test/integration/value-round-trip.
 */

const { builtins } = pg.types;
const parse = (oid: number, text: string) =>
  (jsonRowTypes.getTypeParser(oid, 'text') as (value: string) => unknown)(text);

describe('values that leave as JSON, by type', () => {
  it('keeps booleans, smallint, integer and oid as JSON booleans and numbers', () => {
    expect(parse(builtins.BOOL, 't')).toBe(true);
    expect(parse(builtins.BOOL, 'f')).toBe(false);
    expect(parse(builtins.INT2, '-32768')).toBe(-32768);
    expect(parse(builtins.INT4, '2147483647')).toBe(2147483647);
    expect(parse(builtins.OID, '4294967295')).toBe(4294967295);
  });

  it('gives every other type PostgreSQL’s own text, small bigints and zone-less instants alike', () => {
    const texts: [number, string][] = [
      [builtins.INT8, '1'],
      [builtins.INT8, '-9223372036854775808'],
      [builtins.NUMERIC, '1234567890123456789012345678901234567890.5'],
      [builtins.FLOAT4, '-0'],
      [builtins.FLOAT8, 'NaN'],
      [builtins.FLOAT8, '-Infinity'],
      [builtins.MONEY, '$1,234.50'],
      [builtins.TIMESTAMPTZ, '2024-05-05 10:11:12.123456+00'],
      [builtins.TIMESTAMPTZ, '0044-03-15 10:00:00+00 BC'],
      [builtins.TIMESTAMP, 'infinity'],
      [builtins.DATE, '2024-05-05'],
      [builtins.INTERVAL, '1 year 2 mons 00:00:00.000001'],
      [builtins.JSON, '{"big": 12345678901234567890,  "dup": 1, "dup": 2}'],
      [builtins.JSONB, '"a string"'],
      [builtins.BYTEA, '\\x00ff'],
      [600, '(1.5,2)'], // point
      [builtins.CIRCLE, '<(1,2),3>'],
      [16_390, '{red,green}'], // a schema's own array type: its text
    ];
    for (const [oid, text] of texts) expect([oid, parse(oid, text)]).toEqual([oid, text]);
  });

  it('reads built-in arrays as nested JSON arrays of their elements’ JSON, NULL as null', () => {
    expect(parse(1007, '{{1,NULL},{3,4}}')).toEqual([
      [1, null],
      [3, 4],
    ]);
    expect(parse(1000, '{t,f,NULL}')).toEqual([true, false, null]);
    expect(parse(1016, '{9223372036854775807,1}')).toEqual(['9223372036854775807', '1']);
    expect(parse(1022, '{NaN,-0,Infinity}')).toEqual(['NaN', '-0', 'Infinity']);
    expect(parse(1185, '{"2024-05-05 10:11:12.123456+00",NULL}')).toEqual([
      '2024-05-05 10:11:12.123456+00',
      null,
    ]);
    expect(parse(3807, '{"{\\"a\\": 1}",NULL}')).toEqual(['{"a": 1}', null]);
    expect(parse(1001, '{"\\\\x00ff"}')).toEqual(['\\x00ff']);
  });

  it('tells a NULL element from the text NULL, and reads quotes, escapes, empty and odd elements', () => {
    expect(parseArray('{NULL,"NULL","","a b","x\\"y","back\\\\slash",",","{}",plain}', String)).toEqual([
      null,
      'NULL',
      '',
      'a b',
      'x"y',
      'back\\slash',
      ',',
      '{}',
      'plain',
    ]);
    expect(parseArray('{}', String)).toEqual([]);
    expect(parseArray('{{},{}}', String)).toEqual([[], []]);
  });

  it('leaves box arrays as their text (their own delimiter, no writer gives back), and reads past lower bounds other than 1', () => {
    expect(parse(1020, '{(1,1),(0,0);(2,2),(1,1)}')).toBe('{(1,1),(0,0);(2,2),(1,1)}');
    expect(parseArray('{(1,1),(0,0);(2,2),(1,1)}', String, ';')).toEqual(['(1,1),(0,0)', '(2,2),(1,1)']);
    expect(parseArray('[0:1]={1,2}', Number)).toEqual([1, 2]);
    expect(parseArray('[1:2][3:4]={{1,2},{3,4}}', Number)).toEqual([
      [1, 2],
      [3, 4],
    ]);
  });

  it('reads an element of a million backslashes in one pass', () => {
    const element = '\\'.repeat(1_000_000);
    const text = `{"${element.replace(/\\/g, '\\\\')}",${Array(100_000).fill('"x"').join(',')}}`;
    const started = performance.now();
    const [first, ...rest] = parseArray(text, String);

    expect(first).toBe(element);
    expect(rest).toHaveLength(100_000);
    // Linear: well under a second here; a pass per escape would take hours.
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('refuses text that is not an array rather than guessing', () => {
    for (const text of ['{"open', '{a,b', 'a,b}', '{a}b']) {
      expect(() => parseArray(text, String)).toThrow(/array text/);
    }
  });
});

describe('the JSON export’s expression for each type', () => {
  it('renders JSON’s own types as they are and every other type as its output function’s text', () => {
    const output =
      "CASE WHEN pg_catalog.num_nonnulls(c) OPERATOR(pg_catalog.=) 1 THEN pg_catalog.format('%s', c) END";
    expect(jsonSql('c', builtins.INT4)).toBe('c');
    expect(jsonSql('c', 1000)).toBe('c');
    expect(jsonSql('c', builtins.OID)).toBe('c::pg_catalog.int8');
    expect(jsonSql('c', 1028)).toBe('c::pg_catalog.int8[]');
    // row_to_json would write these as numbers, ISO 8601 with a T, or embedded JSON.
    expect(jsonSql('c', builtins.INT8)).toBe('c::pg_catalog.text');
    expect(jsonSql('c', builtins.TIMESTAMPTZ)).toBe('c::pg_catalog.text');
    expect(jsonSql('c', builtins.JSONB)).toBe('c::pg_catalog.text');
    expect(jsonSql('c', 1185)).toBe('c::pg_catalog.text[]');
    // It writes other built-in types, and arrays of them, by their output function already.
    expect(jsonSql('c', builtins.TEXT)).toBe('c');
    expect(jsonSql('c', builtins.INET)).toBe('c');
    expect(jsonSql('c', 1041)).toBe('c');
    // A schema's own type: an enum, a composite, an array of them.
    expect(jsonSql('c', 16_390)).toBe(output);
  });

  it('agrees with the driver’s side on which types are arrays and of what', () => {
    expect(jsonKindOf(1016)).toEqual({ kind: 'string', array: true });
    expect(jsonKindOf(1005)).toEqual({ kind: 'number', array: true });
    expect(jsonKindOf(builtins.INT8)).toEqual({ kind: 'string', array: false });
    expect(jsonKindOf(builtins.BOOL)).toEqual({ kind: 'boolean', array: false });
  });
});
