import {
  describeFilter,
  familyOf,
  OPERATORS,
  operatorsFor,
  splitFilter,
  writeFilter,
  writeInFilter,
} from '../../console/src/grid/filters';
import {
  indentJson,
  isLongType,
  jsonProblem,
  longEditorText,
  readArrayLiteral,
  readLongValue,
  writeArrayLiteral,
} from '../../console/src/grid/json-and-arrays';
import { pickerColumns, referenceOf } from '../../console/src/grid/references';
import { matchingRows, rowsText, selectedRowsQuery } from '../../console/src/grid/selection';
import { MAX_ROWS, readSheet, splitSheet } from '../../console/src/grid/sheet';
import {
  firstPage,
  type GridView,
  nextSort,
  readView,
  reversedOrder,
  rowsQuery,
  writeView,
} from '../../console/src/grid/view';
import type { Column, TableStructure } from '../../console/src/values';

/**
 * The grid's pure modules (console/src/grid): filters as the API reads them, the view in the URL,
 * spreadsheet text as rows, JSON and array values, foreign keys and the selection's filter. The
 * browser test (test/browser/console.test.ts) drives the same code through the page.
 */

const column = (name: string, type: string, extra: Partial<Column> = {}): Column => ({
  name,
  type,
  maxLength: null,
  nullable: true,
  defaultValue: null,
  primaryKey: false,
  ...extra,
});

const operator = (id: string) => {
  const found = OPERATORS.find((op) => op.id === id);
  if (!found) throw new Error(`no operator ${id}`);
  return found;
};

describe('filter values as the API reads them', () => {
  it('offers the operators that fit each type family', () => {
    expect(familyOf('integer')).toBe('ordered');
    expect(familyOf('timestamp with time zone')).toBe('ordered');
    expect(familyOf('boolean')).toBe('boolean');
    expect(familyOf('text[]')).toBe('collection');
    expect(familyOf('jsonb')).toBe('collection');
    expect(familyOf('character varying')).toBe('text');
    expect(operatorsFor('boolean').map((op) => op.id)).toEqual(['true', 'false', 'null', 'not-null']);
  });

  it('writes contains as ilike with % and _ taken literally and * as the wildcard', () => {
    expect(writeFilter('name', 'text', operator('contains'), 'a_b%c')).toBe('name.ilike.*a\\_b\\%c*');
    expect(writeFilter('name', 'text', operator('starts'), 'Ann')).toBe('name.ilike.Ann*');
    expect(writeFilter('name', 'text', operator('excludes'), 'x')).toBe('name.not.ilike.*x*');
  });

  it('double-quotes a column name holding a dot, comma, parenthesis or quote', () => {
    expect(writeFilter('my.col', 'integer', operator('gte'), '5')).toBe('"my.col".gte.5');
    expect(splitFilter('"my.col".gte.5')).toEqual({ column: 'my.col', rest: 'gte.5' });
    expect(splitFilter('age.gte.5')).toEqual({ column: 'age', rest: 'gte.5' });
    expect(splitFilter('"unterminated.eq.1')).toBeUndefined();
  });

  it('adds braces to an array value typed without them, and leaves jsonb as typed', () => {
    expect(writeFilter('tags', 'text[]', operator('has'), 'a,b')).toBe('tags.cs.{a,b}');
    expect(writeFilter('tags', 'text[]', operator('has'), '{a}')).toBe('tags.cs.{a}');
    expect(writeFilter('data', 'jsonb', operator('has'), '{"k":1}')).toBe('data.cs.{"k":1}');
  });

  it('writes operators without a value as fixed text, whatever was typed', () => {
    expect(writeFilter('age', 'integer', operator('null'), 'ignored')).toBe('age.is.null');
    expect(writeFilter('active', 'boolean', operator('not-null'), '')).toBe('active.not.is.null');
  });

  it('describes what the bar writes in the bar’s words, and anything else as the API’s', () => {
    expect(describeFilter('name.ilike.*a\\_b*')).toEqual({ column: 'name', words: 'contains "a_b"' });
    expect(describeFilter('name.not.ilike.*x*')).toEqual({ column: 'name', words: 'does not contain "x"' });
    expect(describeFilter('name.ilike.Ann*')).toEqual({ column: 'name', words: 'starts with "Ann"' });
    expect(describeFilter('age.gte.18')).toEqual({ column: 'age', words: '≥ 18' });
    expect(describeFilter('age.not.is.null')).toEqual({ column: 'age', words: 'is not null' });
    expect(describeFilter('id.in.(1,2)')).toEqual({ column: 'id', words: 'in (1,2)' });
  });
});

describe('in-lists of the selected rows', () => {
  it('leaves plain values bare', () => {
    expect(writeInFilter('id', ['1', '2', 'abc'])).toBe('id.in.(1,2,abc)');
  });

  it('double-quotes a value holding a comma, parenthesis, quote or backslash, escaping quote and backslash', () => {
    expect(writeInFilter('code', ['a,b', 'c)d', 'say "hi"', 'back\\slash'])).toBe(
      'code.in.("a,b","c)d","say \\"hi\\"","back\\\\slash")',
    );
  });

  it('quotes an empty value and one with edge spaces, so they read back as they are', () => {
    expect(writeInFilter('code', ['', ' x'])).toBe('code.in.(""," x")');
  });

  it('quotes the column as every filter does', () => {
    expect(writeInFilter('my.key', ['1'])).toBe('"my.key".in.(1)');
  });

  it('sends the selection as its keys with maxAffected the number selected, and counts rows in words', () => {
    expect(selectedRowsQuery('id', ['4', '5'])).toEqual({ filter: 'id.in.(4,5)', maxAffected: 2 });
    expect(rowsText(1)).toBe('1 row');
    expect(rowsText(2)).toBe('2 rows');
    expect(rowsText(12000)).toBe('12,000 rows');
  });
});

describe('the grid’s view in the URL', () => {
  const view: GridView = {
    filters: ['age.gte.18', 'name.ilike.*a,b*'],
    sort: [
      { column: 'age', descending: false },
      { column: 'my.col', descending: true },
    ],
    q: 'ann & bob',
    hidden: ['notes', 'a,b'],
    page: 3,
    limit: 100,
    after: 'cursor-3',
  };

  it('reads back every part of a view it wrote', () => {
    expect(readView(writeView(view))).toEqual(view);
  });

  it('writes nothing for the default view, and reads nothing as the default view', () => {
    const plain = readView(undefined);

    expect(writeView(plain)).toBe('');
    expect(plain).toEqual({ filters: [], sort: [], q: '', hidden: [], page: 1, limit: 50 });
  });

  it('drops a page size it does not offer, a page below 2 and a cursor on page 1', () => {
    expect(readView('limit=7&page=0&after=x')).toEqual(readView(''));
    expect(readView('page=abc').page).toBe(1);
  });

  it('goes back to the first page, without the cursor, when what matches changes', () => {
    const changed = firstPage(view, { q: 'new' });

    expect(changed.page).toBe(1);
    expect(changed.after).toBeUndefined();
    expect(changed.q).toBe('new');
    expect(changed.filters).toEqual(view.filters);
  });

  it('asks the API for the view’s rows, keeping the key while it is hidden', () => {
    const columns = [
      { name: 'id', primaryKey: true },
      { name: 'my.col', primaryKey: false },
      { name: 'notes', primaryKey: false },
    ];
    const hidden = { ...view, hidden: ['id', 'notes'] };

    expect(rowsQuery(hidden, columns, { keepKey: true })).toEqual({
      filter: view.filters,
      order: 'age,"my.col".desc',
      q: 'ann & bob',
      select: 'id,"my.col"',
    });
    expect(rowsQuery(hidden, columns, { keepKey: false }).select).toBe('"my.col"');
    expect(rowsQuery(readView(''), columns, { keepKey: true })).toEqual({
      filter: undefined,
      order: undefined,
      q: undefined,
      select: undefined,
    });
  });

  it('cycles a header’s sort asc, desc, off, and shift-click adds or changes one column in place', () => {
    const byAge = nextSort([], 'age', false);

    expect(byAge).toEqual([{ column: 'age', descending: false }]);
    expect(nextSort(byAge, 'age', false)).toEqual([{ column: 'age', descending: true }]);
    expect(nextSort([{ column: 'age', descending: true }], 'age', false)).toEqual([]);
    const both = nextSort(byAge, 'name', true);
    expect(both).toEqual([
      { column: 'age', descending: false },
      { column: 'name', descending: false },
    ]);
    expect(nextSort(both, 'age', true)).toEqual([
      { column: 'age', descending: true },
      { column: 'name', descending: false },
    ]);
    expect(nextSort(both, 'name', false)).toEqual([{ column: 'name', descending: true }]);
  });
});

describe('rows pasted from a spreadsheet', () => {
  const people: TableStructure = {
    table: 'people',
    foreignKeys: [],
    columns: [
      column('id', 'integer', { primaryKey: true, nullable: false }),
      column('name', 'text'),
      column('age', 'integer'),
    ],
  };

  it('splits by tab and line, with quoted cells holding tabs, line breaks and doubled quotes', () => {
    expect(splitSheet('a\tb\r\n"x\ty"\t"line\nbreak ""q"""\n\n')).toEqual([
      ['a', 'b'],
      ['x\ty', 'line\nbreak "q"'],
    ]);
  });

  it('reads a first line of column names as the header', () => {
    const sheet = readSheet('name\tage\nAnn\t31\nBob\t\n', people);

    expect(sheet.header).toBe(true);
    expect(sheet.columns.map((c) => c.name)).toEqual(['name', 'age']);
    expect(sheet.rows).toEqual([{ name: 'Ann', age: 31 }, { name: 'Bob' }]);
  });

  it('reads cells in the table’s column order when the first line is not all column names', () => {
    const sheet = readSheet('7\tCy\t40', people);

    expect(sheet.header).toBe(false);
    expect(sheet.rows).toEqual([{ id: 7, name: 'Cy', age: 40 }]);
  });

  it('names the line of a value that does not fit, and of a line with too many cells', () => {
    expect(() => readSheet('name\tage\nAnn\told', people)).toThrow('line 2: age: not a number');
    expect(() => readSheet('1\ta\t2\textra', people)).toThrow('line 1 has 4 cells; there are 3 columns');
  });

  it('refuses no rows, and more rows than one insert takes', () => {
    expect(() => readSheet('name\tage\n', people)).toThrow('no rows to insert');
    expect(() =>
      readSheet(
        Array(MAX_ROWS + 1)
          .fill('Ann')
          .join('\n'),
        people,
      ),
    ).toThrow(`at most ${MAX_ROWS} rows`);
  });
});

describe('JSON and array cells', () => {
  const json = column('data', 'jsonb');
  const tags = column('tags', 'text[]');

  it('opens json, jsonb and arrays in the multi-line editor, and nothing else', () => {
    expect(['json', 'jsonb', 'text[]', 'integer[]'].every(isLongType)).toBe(true);
    expect(['text', 'integer', 'character varying'].some(isLongType)).toBe(false);
  });

  it('shows JSON text indented and saves the text itself, every number with its digits', () => {
    const value = '{"a": [12345678901234567890, "t\\"w,o:"], "b": null, "c": {}, "d": [], "e": 1.50}';
    const text = longEditorText(json, value);

    expect(text).toBe(
      '{\n  "a": [\n    12345678901234567890,\n    "t\\"w,o:"\n  ],\n  "b": null,\n  "c": {},\n  "d": [],\n  "e": 1.50\n}',
    );
    expect(readLongValue(json, text)).toBe(text);
    expect(longEditorText(json, '"plain"')).toBe('"plain"');
    expect(longEditorText(json, null)).toBe('');
    expect(indentJson('not json {')).toBe('not json {');
  });

  it('says at which line and column JSON stops being JSON, and why', () => {
    expect(() => readLongValue(json, '{\n  "a": 1,\n  b: 2\n}')).toThrow(
      'data: not valid JSON at line 3, column 3: expected a "quoted" key',
    );
    expect(() => readLongValue(json, '{"a": 1')).toThrow(
      'at line 1, column 8: the text ends where , or } should be',
    );
    expect(() => readLongValue(json, 'hello')).toThrow('a string needs "double quotes"');
    expect(() => readLongValue(json, '[1, 2] x')).toThrow('line 1, column 8: text after the value');
    expect(() => readLongValue(json, '{"a": 01}')).toThrow('column 7: not a number as JSON writes it');
    expect(() => readLongValue(json, '"tab\there"')).toThrow('written \\n or \\t');
  });

  it('finds no problem where JSON.parse finds none', () => {
    for (const text of ['{"a":[1,-2.5e3,true,false,null,"\\u00e9\\n"]}', '[]', '{}', ' "x" '])
      expect(jsonProblem(text).message).toBe('not valid JSON');
  });

  it('takes empty as NULL in a nullable column, and refuses it in a NOT NULL one', () => {
    expect(readLongValue(json, '  ')).toBeNull();
    expect(() => readLongValue({ ...json, nullable: false }, '')).toThrow(
      'the text ends where a value should be',
    );
  });

  it('writes arrays as PostgreSQL does, quoting what would not read back', () => {
    expect(writeArrayLiteral(['a', 'b c', '', 'null', 'x,y', 'q"\\', null, 3, true])).toBe(
      '{a,"b c","","null","x,y","q\\"\\\\",NULL,3,true}',
    );
    expect(
      writeArrayLiteral([
        [1, 2],
        [3, 4],
      ]),
    ).toBe('{{1,2},{3,4}}');
    expect(longEditorText(tags, ['a', 'b c'])).toBe('{a,"b c"}');
    expect(longEditorText(tags, '{x}')).toBe('{x}');
  });

  it('reads an array literal back into the elements it was written from', () => {
    const elements = ['a', 'b c', '', 'null', 'x,y', 'q"\\', null, ['1', '2']];

    expect(readArrayLiteral(writeArrayLiteral(elements))).toEqual(elements);
    expect(readArrayLiteral(' { a , NULL ,"b" } ')).toEqual(['a', null, 'b']);
    expect(readArrayLiteral('{}')).toEqual([]);
    expect(readArrayLiteral('{a\\,b}')).toEqual(['a,b']);
  });

  it('takes a JSON array in an array column too, and refuses JSON that is not an array', () => {
    expect(readLongValue(tags, '["a", "b"]')).toEqual(['a', 'b']);
    expect(() => readLongValue(tags, '[1,')).toThrow('tags: not valid JSON');
    expect(readLongValue(tags, '{a,b}')).toEqual(['a', 'b']);
  });

  it('says where an array literal goes wrong', () => {
    expect(() => readLongValue(tags, 'a,b')).toThrow(
      'tags: not an array at line 1, column 1: an array starts with {',
    );
    expect(() => readLongValue(tags, '{a,b')).toThrow('column 5: the text ends where , or } should be');
    expect(() => readLongValue(tags, '{a,,b}')).toThrow('column 4: an empty element is written ""');
    expect(() => readLongValue(tags, '{"a}')).toThrow('a quoted element does not end');
    expect(() => readLongValue(tags, '{a"b}')).toThrow('" inside an element');
    expect(() => readLongValue(tags, '{a} x')).toThrow('text after the array');
  });
});

describe('foreign keys in the grid', () => {
  const cities: TableStructure = {
    table: 'cities',
    foreignKeys: [],
    columns: [
      column('id', 'integer', { primaryKey: true }),
      column('population', 'integer'),
      column('name', 'text'),
      column('country', 'character varying'),
      column('note', 'text'),
      column('motto', 'citext'),
    ],
  };
  const people: TableStructure = {
    table: 'people',
    columns: [
      column('id', 'integer', { primaryKey: true }),
      column('city', 'integer'),
      column('a', 'integer'),
    ],
    foreignKeys: [
      {
        column: 'city',
        referencedTable: 'cities',
        referencedColumn: 'id',
        constraintName: 'people_city_fkey',
      },
      { column: 'a', referencedTable: 'pairs', referencedColumn: 'x', constraintName: 'people_pair_fkey' },
      { column: 'b', referencedTable: 'pairs', referencedColumn: 'y', constraintName: 'people_pair_fkey' },
    ],
  };

  it('finds the referenced table of a single-column key in the schema', () => {
    const reference = referenceOf(people, [people, cities], 'city');

    expect(reference?.table).toBe(cities);
    expect(reference?.foreignKey.referencedColumn).toBe('id');
  });

  it('leaves a column of a key of several columns, one without a key, and a table outside the schema to the plain editor', () => {
    expect(referenceOf(people, [people, cities], 'a')).toBeUndefined();
    expect(referenceOf(people, [people, cities], 'id')).toBeUndefined();
    expect(referenceOf(people, [people], 'city')).toBeUndefined();
    expect(referenceOf(undefined, [cities], 'city')).toBeUndefined();
  });

  it('leaves a key to a table of the same name in another schema to the plain editor', () => {
    const elsewhere = {
      ...people,
      foreignKeys: people.foreignKeys.map((fk) => ({ ...fk, referencedSchema: 'other' })),
    };

    expect(referenceOf(elsewhere, [elsewhere, cities], 'city', 'here')).toBeUndefined();
    expect(referenceOf(elsewhere, [elsewhere, cities], 'city', 'other')?.table).toBe(cities);
  });

  it('shows the referenced column and up to three text columns of a picked row', () => {
    const reference = referenceOf(people, [people, cities], 'city');
    if (!reference) throw new Error('no reference');

    expect(pickerColumns(reference)).toEqual(['id', 'name', 'country', 'note']);
    expect(pickerColumns(reference, 1)).toEqual(['id', 'name']);
  });
});

describe('the last page, from the end', () => {
  it('turns each sort key, else the primary key, else has no order to turn', () => {
    expect(
      reversedOrder(
        [
          { column: 'age', descending: false },
          { column: 'name', descending: true },
        ],
        ['id'],
      ),
    ).toBe('age.desc,name');
    expect(reversedOrder([], ['tenant', 'id'])).toBe('tenant.desc,id.desc');
    expect(reversedOrder([], [])).toBeUndefined();
  });

  it('keeps the last page in the URL, and a change of what matches leaves it', () => {
    const view = readView('filter=age.gte.3&last=1&page=7');
    expect(view.fromEnd).toBe(true);
    expect(writeView(view)).toContain('last=1');
    expect(firstPage(view, { q: 'x' }).fromEnd).toBeUndefined();
  });
});

describe('bulk changes of every row a filter finds', () => {
  it('sends the view’s filter and search with the count as maxAffected, and all=true without either', () => {
    expect(matchingRows({ filters: ['team.eq.red'], q: '' }, 80)).toEqual({
      query: { filter: ['team.eq.red'], q: undefined, all: undefined, maxAffected: 80 },
      count: 80,
      named: 'matching the filter',
    });
    expect(matchingRows({ filters: [], q: '' }, 240).query).toEqual({
      filter: undefined,
      q: undefined,
      all: 'true',
      maxAffected: 240,
    });
  });
});
