import pg from 'pg';

/**
 * How a tenant's values leave as JSON: exactly as PostgreSQL stores them, one JSON type per
 * PostgreSQL type whatever the value (README: Values in JSON). booleans, smallint, integer and oid
 * are JSON's own; every other type is PostgreSQL's text for it, which its input reads back
 * unchanged: a bigint, numeric, float (NaN, -0) or money as its digits, a time as its ISO text to
 * the microsecond, json and jsonb as their JSON text (numbers past 2^53 stay), bytea as \x hex.
 * Arrays of built-in types are JSON arrays of those (nested per dimension, NULL as null); an array
 * of a type the schema made (an enum, a domain, a composite) is PostgreSQL's array text, as the
 * driver cannot tell it from a scalar. A domain is its base type: PostgreSQL sends the base type.
 *
 * The page read, SQL results and writes' answers parse with jsonRowTypes; the JSON export renders
 * the same in SQL (jsonSql); CSV is PostgreSQL's text already. dbadmin's own reads keep the
 * driver's parsers (lib/db/pool).
 */

const { builtins } = pg.types;

/** The JSON type a value of a PostgreSQL type leaves as. */
export type JsonKind = 'boolean' | 'number' | 'string';

/** The types whose every value JSON holds exactly in its own type. */
const NATIVE = new Map<number, JsonKind>([
  [builtins.BOOL, 'boolean'],
  [builtins.INT2, 'number'],
  [builtins.INT4, 'number'],
  [builtins.OID, 'number'],
]);

/** oid[]'s oid. */
const OID_ARRAY = 1028;
/** box[]'s oid: an array that leaves as its text (see ARRAYS). */
const BOX_ARRAY = 1020;

interface ArrayType {
  element: JsonKind;
  /** Between elements in the array's text: `,`, or `;` for box. */
  delimiter: string;
}

const arrayOf = (element: JsonKind, delimiter = ','): ArrayType => ({ element, delimiter });

/**
 * PostgreSQL's built-in array types (fixed oids: pg_type's typarray of each base type), with how
 * their elements leave. Arrays of the system catalogs' row types and information_schema's domains
 * are left out: they print as text.
 */
const ARRAYS = new Map<number, ArrayType>([
  [1000, arrayOf('boolean')], // bool[]
  [1005, arrayOf('number')], // int2[]
  [1007, arrayOf('number')], // int4[]
  [OID_ARRAY, arrayOf('number')], // oid[]
  // box[] (BOX_ARRAY) is left out: its elements are separated by `;` (a box's text holds commas), which
  // no writer of arrays here (pg's, the import's, the console's) would give back; it leaves as text.
  ...[
    143, // xml[]
    199, // json[]
    271, // xid8[]
    629, // line[]
    651, // cidr[]
    719, // circle[]
    775, // macaddr8[]
    791, // money[]
    1001, // bytea[]
    1002, // "char"[]
    1003, // name[]
    1006, // int2vector[]
    1008, // regproc[]
    1009, // text[]
    1010, // tid[]
    1011, // xid[]
    1012, // cid[]
    1013, // oidvector[]
    1014, // bpchar[]
    1015, // varchar[]
    1016, // int8[]
    1017, // point[]
    1018, // lseg[]
    1019, // path[]
    1021, // float4[]
    1022, // float8[]
    1027, // polygon[]
    1034, // aclitem[]
    1040, // macaddr[]
    1041, // inet[]
    1115, // timestamp[]
    1182, // date[]
    1183, // time[]
    1185, // timestamptz[]
    1187, // interval[]
    1231, // numeric[]
    1263, // cstring[]
    1270, // timetz[]
    1561, // bit[]
    1563, // varbit[]
    2201, // refcursor[]
    2207, // regprocedure[]
    2208, // regoper[]
    2209, // regoperator[]
    2210, // regclass[]
    2211, // regtype[]
    2949, // txid_snapshot[]
    2951, // uuid[]
    3221, // pg_lsn[]
    3643, // tsvector[]
    3644, // gtsvector[]
    3645, // tsquery[]
    3735, // regconfig[]
    3770, // regdictionary[]
    3807, // jsonb[]
    3905, // int4range[]
    3907, // numrange[]
    3909, // tsrange[]
    3911, // tstzrange[]
    3913, // daterange[]
    3927, // int8range[]
    4073, // jsonpath[]
    4090, // regnamespace[]
    4097, // regrole[]
    4192, // regcollation[]
    5039, // pg_snapshot[]
    6150, // int4multirange[]
    6151, // nummultirange[]
    6152, // tsmultirange[]
    6153, // tstzmultirange[]
    6155, // datemultirange[]
    6157, // int8multirange[]
  ].map((oid): [number, ArrayType] => [oid, arrayOf('string')]),
]);

/** How a value of the type with this oid leaves: its kind, or an array's element kind. */
export function jsonKindOf(oid: number): { kind: JsonKind; array: boolean } {
  const array = ARRAYS.get(oid);
  if (array) return { kind: array.element, array: true };
  return { kind: NATIVE.get(oid) ?? 'string', array: false };
}

/**
 * The setting values PostgreSQL's text of a value depends on, fixed for the sessions a tenant's
 * values are read on (their startup packet, which outranks a role's or database's own): dates and
 * times in ISO order and form, intervals as `1 day 02:00:00`, bytea as hex, floats to the last
 * digit that tells them apart. TimeZone stays the database's: it only says in which offset an
 * instant is written, never loses one.
 */
export const TEXT_OUTPUT_SETTINGS: Readonly<Record<string, string>> = {
  DateStyle: 'ISO',
  IntervalStyle: 'postgres',
  bytea_output: 'hex',
  extra_float_digits: '1',
  // money's symbol and separators, and whether xml takes a fragment: a tenant could set either for
  // one of its roles, and a value read under one would not go back under another.
  lc_monetary: 'C',
  xmloption: 'content',
};

const asText = (value: string) => value;
const asBoolean = (value: string) => value === 't';
const ELEMENT: Record<JsonKind, (value: string) => unknown> = {
  boolean: asBoolean,
  number: Number,
  string: asText,
};

/**
 * An array's text as nested JSON arrays: `{{1,NULL},{"a \"b\"",c}}` is `[["1",null],["a \"b\"","c"]]`
 * for text elements. An element is quoted (backslash escapes) or bare; bare NULL is null (a text
 * NULL is printed quoted). A leading `[0:1]=` (lower bounds other than 1) is read past: a JSON
 * array has no bounds. One pass over the text, whatever the elements hold.
 */
export function parseArray(text: string, element: (value: string) => unknown, delimiter = ','): unknown[] {
  return new ArrayText(text, element, delimiter.charCodeAt(0)).read();
}

const OPEN = 0x7b; // {
const CLOSE = 0x7d; // }
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

class ArrayText {
  private i: number;

  constructor(
    private readonly text: string,
    private readonly element: (value: string) => unknown,
    private readonly delimiter: number,
  ) {
    this.i = text.charCodeAt(0) === 0x5b /* [ */ ? text.indexOf('=') + 1 : 0;
  }

  read(): unknown[] {
    const items = this.array();
    if (this.i !== this.text.length) this.fail('goes on after its }');
    return items;
  }

  private fail(why: string): never {
    throw new Error(`array text ${why} at ${this.i}`);
  }

  private array(): unknown[] {
    if (this.text.charCodeAt(this.i) !== OPEN) this.fail('has no {');
    const items: unknown[] = [];
    if (this.text.charCodeAt(++this.i) === CLOSE) {
      this.i++;
      return items;
    }
    for (;;) {
      const code = this.text.charCodeAt(this.i);
      items.push(code === OPEN ? this.array() : code === QUOTE ? this.quoted() : this.bare());
      const after = this.text.charCodeAt(this.i++);
      if (after === CLOSE) return items;
      if (after !== this.delimiter) this.fail('has no delimiter or }');
    }
  }

  private quoted(): unknown {
    const { text } = this;
    let value = '';
    let from = ++this.i;
    for (let code = text.charCodeAt(this.i); code !== QUOTE; code = text.charCodeAt(this.i)) {
      if (Number.isNaN(code)) this.fail('ends inside a quoted element');
      if (code === BACKSLASH) {
        value += text.slice(from, this.i);
        from = this.i + 1;
        this.i += 2;
      } else this.i++;
    }
    value += text.slice(from, this.i++);
    return this.element(value);
  }

  private bare(): unknown {
    const { text } = this;
    const from = this.i;
    for (
      let code = text.charCodeAt(this.i);
      code !== this.delimiter && code !== CLOSE;
      code = text.charCodeAt(this.i)
    ) {
      if (Number.isNaN(code)) this.fail('ends inside an element');
      this.i++;
    }
    const value = text.slice(from, this.i);
    return value === 'NULL' ? null : this.element(value);
  }
}

const arrayParser = ({ element, delimiter }: ArrayType) => {
  const parse = ELEMENT[element];
  return (value: string) => parseArray(value, parse, delimiter);
};
const ARRAY_PARSERS = new Map([...ARRAYS].map(([oid, type]) => [oid, arrayParser(type)]));

/** The driver's parsers for values that leave as JSON: see the top of this module. */
export const jsonRowTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (format === 'binary') return pg.types.getTypeParser(oid, format);
    if (NATIVE.has(oid)) return pg.types.getTypeParser(oid, 'text');
    return ARRAY_PARSERS.get(oid) ?? asText;
  }) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * Below this oid, the types PostgreSQL's own source defines (the rest: its catalogs' row types,
 * information_schema's domains, and every type someone creates, extensions' included).
 */
const FIRST_GENERATED_OID = 10_000;

/**
 * The built-in types row_to_json writes other than as their text (as JSON numbers, ISO 8601 with
 * a T, embedded JSON), and the arrays of them: the export reads these through text.
 */
const JSON_WRITES_OTHERWISE = new Set<number>([
  builtins.INT8,
  builtins.FLOAT4,
  builtins.FLOAT8,
  builtins.NUMERIC,
  builtins.DATE,
  builtins.TIMESTAMP,
  builtins.TIMESTAMPTZ,
  builtins.JSON,
  builtins.JSONB,
  ...[1016, 1021, 1022, 1231, 1182, 1115, 1185, 199, 3807], // their arrays
]);

/**
 * The SQL expression the JSON export's row_to_json renders as jsonRowTypes parses the column `c`
 * of base type `oid`, that is as the text the type's output function makes (what the driver
 * receives) where it does not leave as JSON's own type. row_to_json writes most built-in types so
 * itself, and arrays of them as arrays of it; JSON_WRITES_OTHERWISE go through text (their casts
 * to text are their output functions), an oid through int8 (which it writes as a number). A type
 * the schema made (an enum, a composite, which row_to_json would write as an object, an array of
 * them, an extension's) goes through format('%s'), which prints by its output function whatever
 * casts the tenant made. Every name is pg_catalog's: nothing a tenant makes is picked.
 */
export function jsonSql(c: string, oid: number): string {
  const { array } = jsonKindOf(oid);
  const brackets = array ? '[]' : '';
  if (oid === builtins.OID || oid === OID_ARRAY) return `${c}::pg_catalog.int8${brackets}`;
  if (JSON_WRITES_OTHERWISE.has(oid)) return `${c}::pg_catalog.text${brackets}`;
  if (oid === BOX_ARRAY) return `${c}::pg_catalog.text`;
  if (oid < FIRST_GENERATED_OID) return c;
  // num_nonnulls: a composite of NULL fields IS NULL, yet is a value ('(,)').
  return `CASE WHEN pg_catalog.num_nonnulls(${c}) OPERATOR(pg_catalog.=) 1 THEN pg_catalog.format('%s', ${c}) END`;
}
