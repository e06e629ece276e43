import {
  type Column,
  cellText,
  editorText,
  lineAndColumn,
  parseInput,
  readOnlyReason,
} from '../../console/src/values';

const column = (type: string, nullable = true): Column => ({
  name: 'c',
  type,
  maxLength: null,
  nullable,
  defaultValue: null,
  primaryKey: false,
});

describe('console values', () => {
  it('keeps an empty string in a text column, and means NULL by empty elsewhere (nullable only)', () => {
    expect(parseInput(column('text'), '')).toBe('');
    expect(parseInput(column('integer'), '')).toBeNull();
    expect(() => parseInput(column('integer', false), '')).toThrow(/not a number/);
  });

  it('reads numbers exactly: safe integers as numbers, big and decimal ones as text', () => {
    expect(parseInput(column('integer'), '42')).toBe(42);
    expect(parseInput(column('bigint'), '9007199254740993')).toBe('9007199254740993');
    expect(parseInput(column('numeric'), '0.10')).toBe('0.10');
    expect(() => parseInput(column('integer'), '4x')).toThrow(/c: not a number/);
  });

  it('sends back the text of a number a JavaScript number would change: -0, NaN, the infinities', () => {
    expect(parseInput(column('double precision'), '-0')).toBe('-0');
    expect(parseInput(column('real'), 'NaN')).toBe('NaN');
    expect(parseInput(column('double precision'), '-Infinity')).toBe('-Infinity');
    expect(parseInput(column('numeric(10,2)'), 'Infinity')).toBe('Infinity');
    expect(parseInput(column('integer'), '007')).toBe('007');
    expect(() => parseInput(column('integer'), 'NaN')).toThrow(/c: not a number/);
    expect(() => parseInput(column('bigint'), 'Infinity')).toThrow(/c: not a number/);
  });

  it('accepts the boolean spellings PostgreSQL does, and refuses anything else rather than saving false', () => {
    expect(['t', 'TRUE', 'yes', '1', 'on'].map((text) => parseInput(column('boolean'), text))).toEqual([
      true,
      true,
      true,
      true,
      true,
    ]);
    expect(parseInput(column('boolean'), 'f')).toBe(false);
    expect(() => parseInput(column('boolean'), 'maybe')).toThrow(/expected true or false/);
  });

  it('edits JSON as the JSON text the API gives, and saves that text back unchanged', () => {
    const json = column('jsonb');
    const big = '{"id": 12345678901234567890, "n": 1.10}';

    expect(editorText(json, '"123"')).toBe('"123"');
    expect(editorText(json, '123')).toBe('123');
    expect(parseInput(json, editorText(json, '"123"'))).toBe('"123"');
    expect(parseInput(json, editorText(json, big))).toBe(big);
    expect(() => parseInput(json, 'abc')).toThrow(/needs "quotes"/);
    expect(cellText(big)).toBe(big);
  });

  it('says why a table is read-only', () => {
    const table = (keys: number) => ({
      table: 't',
      foreignKeys: [],
      columns: Array.from({ length: keys }, (_, i) => ({
        ...column('integer'),
        name: `k${i}`,
        primaryKey: true,
      })),
    });

    expect(readOnlyReason(table(0))).toMatch(/no primary key/);
    expect(readOnlyReason(table(2))).toMatch(/composite primary key/);
    expect(readOnlyReason(table(1))).toBeUndefined();
  });

  it('turns PostgreSQL’s 1-based error position into line and column', () => {
    expect(lineAndColumn('SELECT 1;\n  SELEC x', 13)).toEqual({ line: 2, column: 3 });
    expect(lineAndColumn('oops', 1)).toEqual({ line: 1, column: 1 });
  });
});
