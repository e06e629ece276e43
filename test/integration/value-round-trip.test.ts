import type pg from 'pg';
import { handler as imports } from '#functions/imports';
import { handler as query } from '#functions/query';
import { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { jsonKindOf } from '#lib/db/json-rows';
import { closePool } from '#lib/db/pool';
import { loginAs } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * Issue 35: a value leaves exactly as PostgreSQL stores it, each column type as one JSON type
 * whatever the value, and what is read writes back unchanged (README: Values in JSON). One table
 * of the types a user meets, edge values in every column, is read through the page read, SQL
 * results (the schema's role and the admin's) and both exports, then written back through the
 * single-row and bulk writes, the bulk update and both imports; every write must leave the rows
 * PostgreSQL stores exactly as they were (each row compared as PostgreSQL prints it).
 */

afterAll(closePool);

type Row = Record<string, unknown>;

/**
 * A sample: PostgreSQL's input text, and the JSON the API answers when it is not that text (a
 * function of the row as PostgreSQL prints it, when that depends on the database's time zone).
 */
type Sample = string | { input: string; json: unknown };
/** A sample's JSON answer, from the text PostgreSQL prints for it (its zone is the database's). */
type Expected = (printed: string) => unknown;

const text: Expected = (printed) => printed;
const number: Expected = Number;

/** Column name, type, its JSON answer, and the samples row by row (a row past them holds NULL). */
const COLUMNS: [string, string, Expected, Sample[]][] = [
  [
    'tstz',
    'timestamptz',
    text,
    [
      '2024-05-05 10:11:12.123456+00',
      '0044-03-15 10:00:00.000001+00 BC',
      'infinity',
      '-infinity',
      '2024-05-05 10:11:12.5+05:30',
      '294276-12-31 23:59:59.999999+00',
    ],
  ],
  [
    'ts',
    'timestamp',
    text,
    ['2024-05-05 10:11:12.123456', '4713-01-01 00:00:00 BC', '-infinity', '294276-12-31 23:59:59.999999'],
  ],
  ['d', 'date', text, ['2024-05-05', '0044-03-15 BC', 'infinity', '5874897-12-31']],
  ['t', 'time', text, ['10:11:12.123456', '24:00:00', '00:00:00']],
  ['ttz', 'timetz', text, ['10:11:12.123456+05:30', '23:59:59.999999-14']],
  ['iv', 'interval', text, ['1 year 2 mons 3 days 04:05:06.789012', '-178000000 years', '00:00:00.000001']],
  [
    'num',
    'numeric',
    text,
    [
      '1234567890123456789012345678901234567890',
      '-0.0000000000000000000000000000000000000001',
      'NaN',
      'Infinity',
      '-Infinity',
      '1.10',
    ],
  ],
  ['f4', 'real', text, ['NaN', 'Infinity', '-Infinity', '-0', '0.1', '3.4028235e+38', '1e-45']],
  [
    'f8',
    'double precision',
    text,
    ['NaN', 'Infinity', '-Infinity', '-0', '0.1', '1.7976931348623157e+308', '5e-324', '0.30000000000000004'],
  ],
  // Small ones too: a string always, never a number that turns into a string past 2^53.
  ['i8', 'bigint', text, ['9223372036854775807', '-9223372036854775808', '1', '0', '9007199254740993']],
  ['i4', 'integer', number, ['2147483647', '-2147483648', '0']],
  ['i2', 'smallint', number, ['-32768', '32767']],
  ['m', 'money', text, ['-92233720368547758.08', '92233720368547758.07', '0.01']],
  ['b', 'bytea', text, ['\\x00ff0a5c22', '\\x', 'plain bytes']],
  ['u', 'uuid', text, ['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11']],
  ['ip', 'inet', text, ['192.168.0.1/24', '::ffff:1.2.3.4', '2001:db8::1/64']],
  ['net', 'cidr', text, ['10.0.0.0/8', '2001:db8::/32']],
  ['mac', 'macaddr', text, ['08:00:2b:01:02:03']],
  ['bits', 'bit varying', text, ['10101', '']],
  ['flag', 'boolean', (printed) => printed === 't', ['true', 'false']],
  ['ch', 'char(5)', text, ['ab', '']],
  ['chars', 'char(3)[]', text, [{ input: '{a,NULL,abc}', json: ['a  ', null, 'abc'] }]],
  [
    'addrs',
    'inet[]',
    text,
    [{ input: '{::ffff:1.2.3.4,10.0.0.1/8}', json: ['::ffff:1.2.3.4', '10.0.0.1/8'] }],
  ],
  ['txt', 'text', text, ['', 'NULL', 'quotes " \\ \' and\nlines,\t"tabs"', '=1+2', '-x']],
  [
    'ints',
    'integer[]',
    text,
    [
      {
        input: '{{1,NULL},{3,4}}',
        json: [
          [1, null],
          [3, 4],
        ],
      },
      { input: '{}', json: [] },
      { input: '{NULL}', json: [null] },
    ],
  ],
  [
    'texts',
    'text[]',
    text,
    [
      { input: '{"a b",NULL,"NULL","","x,\\"y\\"}"}', json: ['a b', null, 'NULL', '', 'x,"y"}'] },
      {
        input: '{{a,b},{c,d}}',
        json: [
          ['a', 'b'],
          ['c', 'd'],
        ],
      },
    ],
  ],
  [
    'bigs',
    'bigint[]',
    text,
    [{ input: '{9223372036854775807,-1,NULL}', json: ['9223372036854775807', '-1', null] }],
  ],
  [
    'stamps',
    'timestamptz[]',
    text,
    [
      {
        input: '{"2024-05-05 10:11:12.123456+00",-infinity,NULL}',
        json: (printed: Record<string, string>) => [printed.tstz, '-infinity', null],
      },
    ],
  ],
  [
    'floats',
    'double precision[]',
    text,
    [{ input: '{NaN,-0,Infinity,0.1}', json: ['NaN', '-0', 'Infinity', '0.1'] }],
  ],
  [
    'nums',
    'numeric[]',
    text,
    [
      {
        input: '{1234567890123456789012345678901234567890.5,NaN}',
        json: ['1234567890123456789012345678901234567890.5', 'NaN'],
      },
    ],
  ],
  [
    'bools',
    'boolean[]',
    text,
    [
      {
        input: '{{t,NULL},{f,t}}',
        json: [
          [true, null],
          [false, true],
        ],
      },
    ],
  ],
  [
    'docs',
    'jsonb[]',
    text,
    [{ input: '{"{\\"a\\": 12345678901234567890}",NULL}', json: ['{"a": 12345678901234567890}', null] }],
  ],
  [
    'j',
    'json',
    text,
    [
      '{"big": 123456789012345678901234567890, "dup": 1,  "dup": 2}',
      '"just a string"',
      '12345678901234567890.10',
      'null',
      '[]',
    ],
  ],
  [
    'jb',
    'jsonb',
    text,
    ['{"big": 123456789012345678901234567890, "f": 1.000}', '"a string"', '-9007199254740993', 'null'],
  ],
  ['r', 'int4range', text, ['[1,10)', 'empty', '(,)']],
  ['nr', 'numrange', text, ['[1.5,1234567890123456789012345678901234567890]']],
  ['tr', 'tstzrange', text, ['["2024-05-05 10:11:12.123456+00",infinity)']],
  ['pt', 'point', text, ['(1.5,-0)']],
  // box[] alone separates its elements with `;` (a box's text holds commas): it leaves as text.
  ['boxes', 'box[]', text, ['{(1,1),(0,0);(3,3),(2,2)}']],
  ['e', 'mood', text, ['happy', 'so "so"']],
  ['pr', 'pair', text, ['(1,"x, y")', '(,)']],
  ['pos', 'positive', number, ['2147483647']],
  ['bigd', 'big_d', text, ['9223372036854775807', '1']],
  ['st', 'stamp', text, ['2024-05-05 10:11:12.000001+00']],
  // A schema's own array type: PostgreSQL's array text, which the driver cannot tell from a scalar.
  ['moods', 'mood[]', text, ['{happy,"so \\"so\\""}']],
];

const TYPES = `CREATE TYPE mood AS ENUM ('happy', 'so "so"');
  CREATE TYPE pair AS (a integer, b text);
  CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
  CREATE DOMAIN big_d AS bigint;
  CREATE DOMAIN stamp AS timestamptz`;

const inputOf = (sample: Sample) => (typeof sample === 'string' ? sample : sample.input);
const ROWS = Math.max(...COLUMNS.map(([, , , samples]) => samples.length)) + 1;
const literal = (value: string) => `'${value.replace(/'/g, "''")}'`;

let schema: string;

/** SQL as the schema's own login, as the tenant would from psql: no code under test between. */
async function asTenant<T extends Row>(sql: string): Promise<T[]> {
  const client = loginAs(`${schema}_user`, 'schema-pass-1');
  await client.connect();
  try {
    const results = await client.query(`SET search_path = "${schema}"; ${sql}`);
    return ((Array.isArray(results) ? results.at(-1) : results)?.rows ?? []) as T[];
  } finally {
    await client.end();
  }
}

/** The table's rows as PostgreSQL sends them: each value its type's output text, unparsed. */
async function printedRows(table: string): Promise<Record<string, string | null>[]> {
  const client = loginAs(`${schema}_user`, 'schema-pass-1');
  await client.connect();
  try {
    const raw = { getTypeParser: () => (value: string) => value } as unknown as pg.CustomTypesConfig;
    const { rows } = await client.query({
      text: `SELECT * FROM "${schema}".${table} ORDER BY id`,
      types: raw,
    });
    return rows;
  } finally {
    await client.end();
  }
}

/** Each row of the table as PostgreSQL prints it: what must stay the same through every write. */
const stored = async (table: string) =>
  (await asTenant<{ row: string }>(`SELECT v::text AS row FROM ${table} v ORDER BY id`)).map((r) => r.row);

async function makeTable(table: string) {
  const values = (row: number) =>
    COLUMNS.map(([, type, , samples]) => {
      const sample = samples[row];
      return sample === undefined ? 'NULL' : `${literal(inputOf(sample))}::${type}`;
    });
  await asTenant(
    `CREATE TABLE ${table} (id integer PRIMARY KEY, ${COLUMNS.map(([name, type]) => `${name} ${type}`).join(', ')});
     INSERT INTO ${table} VALUES ${Array.from({ length: ROWS }, (_, row) => `(${row + 1}, ${values(row).join(', ')})`).join(',\n')}`,
  );
}

/** An empty table of the same columns, to write the rows into. */
const emptyCopy = (table: string) => asTenant(`CREATE TABLE ${table} (LIKE vals INCLUDING ALL)`);

/** The JSON every row should be answered as: PostgreSQL's text, or JSON's own type, per column. */
async function expectedRows(): Promise<Row[]> {
  const printed = await printedRows('vals');
  return printed.map((values, row) => ({
    id: row + 1,
    ...Object.fromEntries(
      COLUMNS.map(([name, , expected, samples]) => {
        const sample = samples[row];
        const value = values[name] ?? null;
        if (value === null) return [name, null];
        if (typeof sample !== 'object') return [name, expected(value)];
        return [name, typeof sample.json === 'function' ? sample.json(values) : sample.json];
      }),
    ),
  }));
}

const read = async (table = 'vals') => {
  const reply = await call(tables, { path: `/api/table/${table}`, query: { schema, limit: '1000' } });
  if (reply.status !== 200) throw new Error(reply.text);
  return reply.body.data as Row[];
};

const exported = (format: 'json' | 'csv') =>
  call(tables, { path: '/api/table/vals/export', query: { schema, format } });

const importInto = (table: string, body: string, contentType: string) =>
  call(imports, {
    method: 'POST',
    path: `/api/table/${table}/import`,
    query: { schema },
    headers: { 'content-type': contentType },
    body,
  });

beforeAll(async () => {
  schema = await freshSchema('vrt');
  await asTenant(TYPES);
  await makeTable('vals');
});

describe('values read', () => {
  it('are PostgreSQL’s own text, or JSON’s own type, in the page read: microseconds, BC, NaN, -0, 2^63', async () => {
    const data = await read();
    const want = await expectedRows();

    expect(data).toEqual(want);
    // Spot checks on what the issue lost, independent of the expectations' own reading.
    const first = data[0] as Row;
    expect(first.tstz).toMatch(/^2024-05-0[45] \d\d:\d\d:12\.123456[+-]/);
    expect(first.i8).toBe('9223372036854775807');
    expect(first.j).toBe('{"big": 123456789012345678901234567890, "dup": 1,  "dup": 2}');
    expect((data[2] as Row).i8).toBe('1');
    expect((data[3] as Row).f8).toBe('-0');
    expect(first.b).toBe('\\x00ff0a5c22');
  });

  it('give each column one JSON type whatever the value', async () => {
    const data = await read();
    const kinds = new Map<string, Set<string>>();
    const kindOf = (value: unknown): string =>
      Array.isArray(value)
        ? `array of ${[
            ...new Set(
              value
                .flat(5)
                .filter((v) => v !== null)
                .map(kindOf),
            ),
          ]}`
        : typeof value;
    for (const row of data) {
      for (const [name, value] of Object.entries(row)) {
        if (value === null || (Array.isArray(value) && value.flat(5).every((v) => v === null))) continue;
        kinds.set(name, (kinds.get(name) ?? new Set()).add(kindOf(value)));
      }
    }
    const mixed = [...kinds].filter(([, found]) => found.size > 1).map(([name, found]) => [name, [...found]]);

    expect(mixed).toEqual([]);
    expect(kinds.get('i8')).toEqual(new Set(['string']));
    expect(kinds.get('f8')).toEqual(new Set(['string']));
    expect(kinds.get('i4')).toEqual(new Set(['number']));
    expect(kinds.get('ints')).toEqual(new Set(['array of number']));
  });

  it('are the same in SQL results, as the schema’s role and as the admin', async () => {
    const data = await read();
    // The admin's own rights reach a tenant's table only where the tenant shared it.
    await withAdminClient((c) =>
      c.query(`GRANT USAGE ON SCHEMA "${schema}" TO PUBLIC; GRANT SELECT ON "${schema}".vals TO PUBLIC`),
    );
    for (const runAs of ['schema', 'admin']) {
      const reply = await call(query, {
        method: 'POST',
        path: '/api/query',
        body: { sql: `SELECT * FROM "${schema}".vals ORDER BY id`, schema, runAs },
      });

      expect([runAs, reply.status]).toEqual([runAs, 200]);
      expect(reply.body.rows).toEqual(data);
    }
  });

  it('are the same in the JSON export', async () => {
    const reply = await exported('json');

    expect(reply.status).toBe(200);
    expect(reply.body.data).toEqual(await read());
  });

  it('cover every built-in array type PostgreSQL has: each is read as a JSON array', async () => {
    const types = await withAdminClient(
      async (c) =>
        (
          await c.query<{ oid: number; name: string }>(
            `SELECT t.oid::int AS oid, t.typname AS name FROM pg_type t JOIN pg_type e ON e.oid = t.typelem
            WHERE t.typcategory = 'A' AND t.oid < 10000 AND t.typsubscript = 'array_subscript_handler'::regproc
              AND e.typtype <> 'c' AND t.oid NOT IN ('int2vector'::regtype, 'oidvector'::regtype, 'box[]'::regtype)`,
          )
        ).rows,
    );
    const missed = types.filter(({ oid }) => !jsonKindOf(oid).array).map(({ name }) => name);

    expect(types.length).toBeGreaterThan(60);
    expect(missed).toEqual([]);
  });
});

describe('values read in sessions that print otherwise', () => {
  it('keep their forms whatever DateStyle, IntervalStyle, bytea_output and extra_float_digits say', async () => {
    const page = await read();
    const csv = (await exported('csv')).text;
    // On the schema role's logins to this database alone: the database's settings would reach
    // other tests' sessions. Either outranks the server's; dbadmin's sessions outrank both.
    const role = `ALTER ROLE "${schema}_exec" IN DATABASE "${new URL(process.env.DATABASE_URL as string).pathname.slice(1)}"`;
    await withAdminClient((c) =>
      c.query(`${role} SET DateStyle = 'SQL, DMY'; ${role} SET IntervalStyle = 'sql_standard';
               ${role} SET bytea_output = 'escape'; ${role} SET extra_float_digits = -15`),
    );
    await closePool(); // the next sessions log in afresh
    try {
      const set = await withAdminClient(
        async (c) =>
          (
            await c.query(
              `SELECT s.setconfig FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
                WHERE r.rolname = $1 AND s.setdatabase <> 0`,
              [`${schema}_exec`],
            )
          ).rows[0]?.setconfig,
      );
      expect(set).toContain('DateStyle=SQL, DMY');

      expect(await read()).toEqual(page);
      expect((await exported('json')).body.data).toEqual(page);
      expect((await exported('csv')).text).toBe(csv);
    } finally {
      await withAdminClient((c) => c.query(`${role} RESET ALL`));
      await closePool();
    }
  });
});

describe('values written back', () => {
  let before: string[];
  beforeAll(async () => {
    before = await stored('vals');
  });
  afterEach(async () => {
    // Every write below writes the values it read: the rows must be exactly as they were.
    expect(await stored('vals')).toEqual(before);
  });

  it('are stored unchanged by the single-row write, one cell at a time, each answer the row read', async () => {
    const data = await read();
    for (const row of data) {
      for (const [column, value] of Object.entries(row)) {
        if (column === 'id') continue;
        const reply = await call(rows, {
          method: 'PATCH',
          path: `/api/table/vals/${row.id}`,
          body: { column, value, schema },
        });

        expect([column, reply.status]).toEqual([column, 200]);
        expect(reply.body.row).toEqual(row);
      }
    }
  }, 120_000);

  it('are stored unchanged by the bulk write (an upsert of every row), each answer the row read', async () => {
    const data = await read();
    const reply = await call(rows, {
      method: 'POST',
      path: '/api/table/vals/rows',
      body: { rows: data, onConflict: 'update', schema },
    });

    expect(reply.status).toBe(201);
    expect(reply.body.rows).toEqual(data);
  });

  it('are stored unchanged by the update of the rows a filter finds', async () => {
    for (const { id, ...set } of await read()) {
      const reply = await call(rows, {
        method: 'PATCH',
        path: '/api/table/vals/rows',
        query: { filter: `id.eq.${id}` },
        body: { set, schema },
      });

      expect(reply.status).toBe(200);
      expect(reply.body.rows).toEqual([{ id, ...set }]);
    }
  });

  it('are stored as they were by inserting the rows read into an empty table, one by one and in bulk', async () => {
    const data = await read();
    await emptyCopy('one_by_one');
    await emptyCopy('in_bulk');
    for (const row of data) {
      const reply = await call(rows, {
        method: 'POST',
        path: '/api/table/one_by_one/row',
        body: { data: row, schema },
      });
      expect(reply.status).toBe(201);
      expect(reply.body.row).toEqual(row);
    }
    const bulk = await call(rows, {
      method: 'POST',
      path: '/api/table/in_bulk/rows',
      body: { rows: data, schema },
    });

    expect(bulk.status).toBe(201);
    expect(await stored('one_by_one')).toEqual(before);
    expect(await stored('in_bulk')).toEqual(before);
  });

  it('are stored as they were by importing the JSON export, and the CSV export, into an empty table', async () => {
    const json = await exported('json');
    const csv = await exported('csv');
    await emptyCopy('from_json');
    await emptyCopy('from_csv');

    const fromJson = await importInto('from_json', JSON.stringify(json.body.data), 'application/json');
    const fromCsv = await importInto('from_csv', csv.text, 'text/csv');

    expect([fromJson.status, fromJson.body.rows]).toEqual([200, ROWS]);
    expect([fromCsv.status, fromCsv.body.rows]).toEqual([200, ROWS]);
    expect(await stored('from_json')).toEqual(before);
    expect(await stored('from_csv')).toEqual(before);
  });
});

describe('values a column’s type refuses', () => {
  it('are a 400 naming the type, and nothing is written', async () => {
    const before = await stored('vals');
    const cases: [string, unknown, RegExp][] = [
      ['jb', '{"a": ', /json/],
      ['j', 'not json', /json/],
      ['i8', '9223372036854775808', /bigint/],
      ['tstz', '2024-13-01 00:00:00+00', /date\/time|out of range/],
      ['ints', '{1,', /array/],
      ['b', '\\xzz', /bytea|hexadecimal/],
    ];
    for (const [column, value, message] of cases) {
      const reply = await call(rows, {
        method: 'PATCH',
        path: '/api/table/vals/1',
        body: { column, value, schema },
      });

      expect([column, reply.status]).toEqual([column, 400]);
      expect(reply.body).toEqual({ error: expect.any(String), message: expect.stringMatching(message) });
    }
    expect(await stored('vals')).toEqual(before);
  });
});
