/**
 * Rows pasted from a spreadsheet, as the bulk insert's rows (POST /api/table/:t/rows). Pure
 * functions: text in, rows out.
 */
import { type Column, parseInput, type TableStructure } from '../values';

type Row = Record<string, unknown>;

/** POST /api/table/:t/rows takes at most this many rows in one (all-or-nothing) statement. */
export const MAX_ROWS = 1000;

/**
 * Tab-separated text as a spreadsheet copies it: rows by line, cells by tab; a cell in double
 * quotes may hold tabs, line breaks and `""` for a quote (how Excel and Sheets copy such a cell).
 */
export function splitSheet(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  const source = text.replace(/\r\n?/g, '\n');
  for (let i = 0; i < source.length; i++) {
    const char = source[i] as string;
    if (char === '"' && cell === '') {
      const quoted = quotedCell(source, i + 1);
      cell = quoted.text;
      i = quoted.end;
    } else if (char === '\t') {
      row.push(cell);
      cell = '';
    } else if (char === '\n') {
      rows.push([...row, cell]);
      row = [];
      cell = '';
    } else cell += char;
  }
  rows.push([...row, cell]);
  // Blank lines (a trailing line break) hold no row.
  return rows.filter((cells) => cells.some((c) => c.trim() !== ''));
}

/** A quoted cell's text from `start` (after its opening quote), and where its closing quote is. */
function quotedCell(source: string, start: number): { text: string; end: number } {
  let text = '';
  for (let i = start; i < source.length; i++) {
    if (source[i] !== '"') text += source[i];
    else if (source[i + 1] === '"') {
      text += '"';
      i++;
    } else return { text, end: i };
  }
  return { text, end: source.length };
}

export interface Sheet {
  columns: Column[];
  rows: Row[];
  /** Whether the first line named the columns. */
  header: boolean;
}

/**
 * The pasted rows as the insert's rows: the first line names the columns when every cell of it is
 * a column of the table; otherwise the cells are in the table's column order. An empty cell is
 * left out (the column's default, or NULL). Throws, naming the row, when a value does not fit.
 */
export function readSheet(text: string, table: TableStructure): Sheet {
  const lines = splitSheet(text);
  const first = (lines[0] ?? []).map((cell) => cell.trim());
  const byName = (name: string) => table.columns.find((c) => c.name === name);
  const header = first.length > 0 && first.every(byName) && new Set(first).size === first.length;
  const columns = header ? first.map((name) => byName(name) as Column) : table.columns;
  const body = header ? lines.slice(1) : lines;
  if (body.length === 0) throw new Error('no rows to insert');
  if (body.length > MAX_ROWS) throw new Error(`at most ${MAX_ROWS} rows at a time (${body.length} pasted)`);
  const rows = body.map((cells, index) => {
    const line = index + (header ? 2 : 1);
    if (cells.length > columns.length)
      throw new Error(`line ${line} has ${cells.length} cells; there are ${columns.length} columns`);
    const row: Row = {};
    cells.forEach((text, i) => {
      const column = columns[i] as Column;
      if (text === '') return;
      try {
        row[column.name] = parseInput(column, text);
      } catch (error) {
        throw new Error(`line ${line}: ${(error as Error).message}`);
      }
    });
    return row;
  });
  return { columns, rows, header };
}
