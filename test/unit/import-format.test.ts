import {
  arrayText,
  CSV_DEFAULTS,
  checkCsvOptions,
  csvRecords,
  exactNumbers,
  JsonRowSplitter,
  MAX_ROW_CHARS,
  rowLine,
} from '#lib/admin/import-format';

/** The file side of an import: CSV records, JSON rows split as their bytes arrive, COPY lines. */

describe('csvRecords', () => {
  it('reads quoted fields with delimiters, doubled quotes and line breaks; CRLF; a BOM; NULL', () => {
    const text = '\ufeffid,name,note\r\n1,"Smith, Ann","said ""hi""\nthen left"\r\n2,,""\n';

    expect(csvRecords(text, CSV_DEFAULTS)).toEqual([
      ['id', 'name', 'note'],
      ['1', 'Smith, Ann', 'said "hi"\nthen left'],
      ['2', null, ''],
    ]);
  });

  it('takes the delimiter, quote and null string it is given', () => {
    const options = { ...CSV_DEFAULTS, delimiter: ';', quote: "'", null: 'NA' };

    expect(csvRecords("a;'b;c';NA;'NA'\n", options)).toEqual([['a', 'b;c', null, 'NA']]);
  });

  it('leaves out a record cut short, unless the text is complete', () => {
    expect(csvRecords('a,b\n1,2\n3,"fo', CSV_DEFAULTS, 10)).toEqual([
      ['a', 'b'],
      ['1', '2'],
    ]);
    expect(csvRecords('a,b\n1,2', CSV_DEFAULTS, 10, true)).toEqual([
      ['a', 'b'],
      ['1', '2'],
    ]);
    expect(csvRecords('a,b\n1,2\n3,4\n', CSV_DEFAULTS, 2)).toHaveLength(2);
  });
});

describe('checkCsvOptions', () => {
  it.each([
    [{ delimiter: ',,' }, /delimiter must be one single-byte character/],
    [{ delimiter: '\n' }, /delimiter must be/],
    [{ quote: '€' }, /quote must be one single-byte character/],
    [{ delimiter: '"' }, /delimiter and quote must differ/],
    [{ null: 'a\nb' }, /null must be/],
  ])('refuses %j', (change, message) => {
    expect(() => checkCsvOptions({ ...CSV_DEFAULTS, ...change })).toThrow(message);
  });

  it('takes a tab and a single quote', () => {
    expect(checkCsvOptions({ ...CSV_DEFAULTS, delimiter: '\t', quote: "'" }).delimiter).toBe('\t');
  });
});

describe('JsonRowSplitter', () => {
  const rows = [
    { id: 1, name: 'a, [b] {c}', tags: ['x', 'y'], meta: { deep: [1, { z: '"}]' }] } },
    { id: 2, name: 'quote \\" and \u00e9\ud83d\ude00', tags: [], meta: null },
    { id: 3 },
  ];
  const text = `\ufeff [\n ${rows.map((r) => JSON.stringify(r, null, 1)).join(' ,\n')} ]\n`;

  /** Feeds `text` in pieces of `size` characters; answers every row and the splitter. */
  function split(source: string, size: number, format: 'json' | 'ndjson' = 'json') {
    const splitter = new JsonRowSplitter(format);
    const found: unknown[] = [];
    for (let at = 0; at < source.length; at += size)
      found.push(...splitter.push(source.slice(at, at + size)));
    found.push(...splitter.end());
    return { found, splitter };
  }

  it.each([1, 2, 3, 7, 64, 100_000])('splits a JSON array fed %i characters at a time', (size) => {
    expect(split(text, size).found).toEqual(rows);
  });

  it('refuses a row over MAX_ROW_CHARS, JSON or NDJSON, before holding more of it', () => {
    const giant = `[{"a": "${'x'.repeat(MAX_ROW_CHARS)}`;

    expect(() => split(giant, 1024 * 1024)).toThrow(/row 1 is over 16777216 characters/);
    expect(() => split(`{"a": 1}\n{"a": "${'x'.repeat(MAX_ROW_CHARS)}`, 1024 * 1024, 'ndjson')).toThrow(
      /line 2 is over 16777216 characters/,
    );
  });

  it('takes an empty array', () => {
    expect(split(' [ ] ', 1).found).toEqual([]);
  });

  it.each([
    ['{"a": 1}', /must start with "\["/],
    ['[{"a": 1}, {"a": 2}', /ends without "\]" after row 1/],
    ['[{"a": 1}] x', /text after the JSON array/],
    ['[{"a": 1}, 5]', /row 2 is not an object/],
    ['[{"a": 1},, {"a": 2}]', /two commas after row 1/],
    ['[{"a": 1}, {"a": }]', /row 2 is not valid JSON/],
    ['', /holds no "\["/],
  ])('refuses %j, naming the row', (source, message) => {
    expect(() => split(source, 3)).toThrow(message);
  });

  it('splits NDJSON by line, skipping blank lines and naming the line of a bad one', () => {
    const ndjson = '{"id":1}\r\n\n  \n{"id":2,"s":"a\\nb"}\n{"id":3}';
    const { found, splitter } = split(ndjson, 4, 'ndjson');

    expect(found).toEqual([{ id: 1 }, { id: 2, s: 'a\nb' }, { id: 3 }]);
    expect([1, 2, 3].map((row) => splitter.lineOf(row))).toEqual([1, 4, 5]);
    expect(() => split('{"id":1}\n\n{"id":\n', 5, 'ndjson')).toThrow(/line 3 is not valid JSON/);
  });
});

describe('rowLine', () => {
  const columns = [
    { name: 'id', array: false },
    { name: 'name', array: false },
    { name: 'tags', array: true },
    { name: 'meta', array: false },
  ];

  it('writes a row as one line of COPY text: NULL as N, breaks, tabs and backslashes escaped', () => {
    expect(
      rowLine(
        { id: 1, name: 'say "x",\ty\nz \\ w', tags: ['a b', null, 'q"'], meta: { k: [1] } },
        columns,
        'row 1',
      ),
    ).toBe('1\tsay "x",\\ty\\nz \\\\ w\t{"a b",NULL,"q\\\\""}\t{"k":[1]}\n');
    expect(rowLine({ id: 2, name: '' }, columns, 'row 2')).toBe('2\t\t\\N\t\\N\n');
  });

  it('takes own keys only: a column named constructor or __proto__ is NULL when the row lacks it', () => {
    const odd = [
      { name: 'constructor', array: false },
      { name: '__proto__', array: false },
      { name: 'toString', array: false },
    ];

    expect(rowLine({}, odd, 'row 1')).toBe('\\N\t\\N\t\\N\n');
    expect(rowLine(JSON.parse('{"constructor": "x", "__proto__": "y"}'), odd, 'row 1')).toBe('x\ty\t\\N\n');
  });

  it('refuses a key that is not one of the columns, naming the row', () => {
    expect(() => rowLine({ id: 1, nmae: 'x' }, columns, 'row 7')).toThrow(
      /row 7 has "nmae", which is not one of/,
    );
  });

  it('writes nested arrays and objects inside arrays', () => {
    expect(
      arrayText([
        [1, 2],
        [3, null],
      ]),
    ).toBe('{{"1","2"},{"3",NULL}}');
    expect(arrayText([{ a: 1 }])).toBe('{"{\\"a\\":1}"}');
  });
});

describe('exactNumbers', () => {
  it('quotes a row’s number JSON.parse would round, and nothing else', () => {
    const text =
      '{"id": 9007199254740993, "big": 1e400, "ok": 12.5, "s": "9007199254740993", "deep": {"n": 9007199254740993}}';

    expect(JSON.parse(exactNumbers(text))).toEqual({
      id: '9007199254740993',
      big: '1e400',
      ok: 12.5,
      s: '9007199254740993',
      // Nested, it stays a number, as JSON.parse reads it.
      deep: { n: 2 ** 53 },
    });
    expect(exactNumbers('{"id": 1}')).toBe('{"id": 1}');
  });
});
