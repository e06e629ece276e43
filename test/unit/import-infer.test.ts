import { CSV_DEFAULTS } from '#lib/admin/import-format';
import { columnNameFor, inferColumns, typeFor } from '#lib/admin/import-infer';

/** New table from a file: names and types a sample suggests. */

describe('columnNameFor', () => {
  it.each([
    ['First Name', 'first_name'],
    ['Émigré-Count', 'emigre_count'],
    ['2024 total', 'c_2024_total'],
    ['   ', 'column'],
    ['id', 'id'],
    ['a'.repeat(80), 'a'.repeat(63)],
    ['__Total__Due__', 'total__due'],
    ['_'.repeat(500), 'column'],
    // Named from the header's first 256 characters: a name holds 63.
    [`${'-'.repeat(251)}price`, 'price'],
    [`${'-'.repeat(253)}price`, 'pri'],
  ])('%j is %j', (source, name) => {
    expect(columnNameFor(source)).toBe(name);
  });
});

describe('typeFor', () => {
  it.each([
    [['true', 'F', 'yes'], 'BOOLEAN'],
    [[true, false], 'BOOLEAN'],
    [['1', '-42', '+7'], 'INTEGER'],
    [['1', '3000000000'], 'BIGINT'],
    [['1', '99999999999999999999'], 'NUMERIC'],
    [['1.5', '2', '-3e4'], 'NUMERIC'],
    [[1.5, 2], 'NUMERIC'],
    [['2024-01-02', '1999-12-31'], 'DATE'],
    [['2024-01-02 10:11', '2024-01-02T10:11:12.5'], 'TIMESTAMP'],
    [['2024-01-02T10:11:12Z', '2024-01-02 10:11+02:00'], 'TIMESTAMPTZ'],
    [['2024-01-02', '2024-01-02T10:11'], 'TEXT'],
    [['3f2504e0-4f89-11d3-9a0c-0305e82c3301'], 'UUID'],
    [['{"a":1}', '[1,2]'], 'JSONB'],
    [[{ a: 1 }, [1]], 'JSONB'],
    [['1', 'x'], 'TEXT'],
    [[], 'TEXT'],
  ])('%j is %s', (values, type) => {
    expect(typeFor(values)).toBe(type);
  });
});

describe('inferColumns', () => {
  it('names a CSV’s columns from its header, types them from its rows, and proposes id as the key', () => {
    const sample =
      'id,First Name,joined,score,Note\n1,Ann,2024-01-02,1.5,\n2,Bo,2024-02-03,2,hi\n3,"Cy, Jr",2024-03-04,,x\n4,cut';

    const found = inferColumns('csv', sample, CSV_DEFAULTS);

    expect(found.columns).toEqual([
      { source: 'id', name: 'id', type: 'INTEGER', nullable: false, primaryKey: true },
      { source: 'First Name', name: 'first_name', type: 'TEXT', nullable: false, primaryKey: false },
      { source: 'joined', name: 'joined', type: 'DATE', nullable: false, primaryKey: false },
      { source: 'score', name: 'score', type: 'NUMERIC', nullable: true, primaryKey: false },
      { source: 'Note', name: 'note', type: 'TEXT', nullable: true, primaryKey: false },
    ]);
    expect(found.sampled).toBe(3);
    expect(found.rows[2]).toEqual(['3', 'Cy, Jr', '2024-03-04', null, 'x']);
  });

  it('names the columns of a CSV without a header, and makes names unique', () => {
    expect(
      inferColumns('csv', '1,2\n', { ...CSV_DEFAULTS, header: false }).columns.map((c) => c.name),
    ).toEqual(['column_1', 'column_2']);
    expect(inferColumns('csv', 'a,A,a!\n1,2,3\n', CSV_DEFAULTS).columns.map((c) => c.name)).toEqual([
      'a',
      'a_2',
      'a_3',
    ]);
  });

  it('takes every key of a JSON sample, leaving out a row cut off at its end; no key when ids repeat', () => {
    const sample = '[{"id": 1, "tags": ["a"], "ok": true}, {"id": 1, "extra": "x"}, {"id": 3, "ta';

    const found = inferColumns('json', sample, CSV_DEFAULTS);

    expect(found.columns).toEqual([
      { source: 'id', name: 'id', type: 'INTEGER', nullable: false, primaryKey: false },
      { source: 'tags', name: 'tags', type: 'JSONB', nullable: true, primaryKey: false },
      { source: 'ok', name: 'ok', type: 'BOOLEAN', nullable: true, primaryKey: false },
      { source: 'extra', name: 'extra', type: 'TEXT', nullable: true, primaryKey: false },
    ]);
  });

  it('refuses a sample with no column', () => {
    expect(() => inferColumns('ndjson', '\n\n', CSV_DEFAULTS)).toThrow(/holds no column/);
  });
});
