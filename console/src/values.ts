/**
 * Column values between the grid, its editors and the API: pure functions, unit-tested
 * (test/unit/console-values.test.ts). No browser or API access here.
 */

export interface Column {
  name: string;
  type: string;
  maxLength: number | null;
  nullable: boolean;
  defaultValue: string | null;
  /** An identity column: `always` takes no value on insert, `by default` may. */
  identity?: 'always' | 'by default' | null;
  /** A generated column: computed from others, never written. */
  generated?: boolean;
  primaryKey: boolean;
  comment?: string | null;
}

/** What PostgreSQL fills in itself and refuses a value for: an identity ALWAYS or generated column. */
export const filledByPostgres = (column: Column) => column.generated === true || column.identity === 'always';

export interface ForeignKey {
  column: string;
  referencedTable: string;
  referencedColumn: string;
  constraintName: string;
  /** Absent in structures the console made up for tests; the API always sends it. */
  referencedSchema?: string;
}

/** An index as the structure read lists it (GET /api/table/:t/indexes tells more). */
export interface IndexSummary {
  name: string;
  columns: (string | null)[];
  unique: boolean;
  primary: boolean;
  method: string;
  valid: boolean;
  sizeBytes: number;
}

export interface TableStructure {
  table: string;
  columns: Column[];
  foreignKeys: ForeignKey[];
  indexes?: IndexSummary[];
  constraints?: { name: string; type: 'unique' | 'check'; columns: string[] }[];
  comment?: string | null;
  sizeBytes?: number;
  estimatedRows?: number | null;
  /** A view or materialized view opened in the grid: its rows are read, never changed here. */
  relation?: 'view' | 'materialized view';
}

/** Why rows of this table cannot be edited in place, or undefined when they can. */
export function readOnlyReason(table: TableStructure | undefined): string | undefined {
  if (!table) return 'the table structure could not be read';
  if (table.relation) return `this is a ${table.relation}: change its rows in the tables it reads`;
  const keys = table.columns.filter((column) => column.primaryKey);
  if (keys.length === 0)
    return 'this table has no primary key, so a row cannot be named: add one to edit rows here (or use SQL)';
  if (keys.length > 1) return 'this table has a composite primary key: edit its rows with SQL';
  return undefined;
}

export const primaryKeyOf = (table: TableStructure | undefined) =>
  table?.columns.find((column) => column.primaryKey);

export type InputKind = 'number' | 'boolean' | 'date' | 'datetime' | 'time' | 'json' | 'text';

/** The HTML input that fits a PostgreSQL type (as information_schema names it). */
export function inputKind(type: string): InputKind {
  if (/^(smallint|integer|bigint|numeric|real|double precision|decimal)/.test(type)) return 'number';
  if (type === 'boolean') return 'boolean';
  if (type === 'date') return 'date';
  if (type.startsWith('timestamp')) return 'datetime';
  if (type.startsWith('time')) return 'time';
  if (type === 'json' || type === 'jsonb') return 'json';
  return 'text';
}

/** The numeric types that hold NaN and the infinities. */
const FLOATING = /^(numeric|decimal|real|double precision)/;

const TRUE = new Set(['true', 't', 'yes', 'y', 'on', '1']);
const FALSE = new Set(['false', 'f', 'no', 'n', 'off', '0']);

/**
 * What the user typed, as the JSON value the API expects for the column. Empty is NULL for a
 * nullable column that is not text (an empty string is a value of its own in a text column).
 * Throws, naming the column, when the text cannot be that type.
 */
export function parseInput(column: Column, text: string): unknown {
  const kind = inputKind(column.type);
  if (text === '' && column.nullable && kind !== 'text') return null;
  switch (kind) {
    case 'number':
      return parseNumber(column, text.trim());
    case 'boolean': {
      const word = text.trim().toLowerCase();
      if (TRUE.has(word)) return true;
      if (FALSE.has(word)) return false;
      throw new Error(`${column.name}: expected true or false`);
    }
    case 'json':
      try {
        JSON.parse(text);
      } catch {
        throw new Error(`${column.name}: not valid JSON (a string needs "quotes")`);
      }
      // The JSON text itself, as the API gives and takes a json value: parsed here, a number past
      // 2^53 would be rounded.
      return text;
    default:
      return text;
  }
}

/**
 * A number as typed: a safe integer that reads back as typed travels as a number; anything else
 * (big integers, decimals, -0, NaN, the infinities) as its text, which PostgreSQL reads exactly.
 */
function parseNumber(column: Column, typed: string): number | string {
  const special = FLOATING.test(column.type) && /^[-+]?(nan|inf|infinity)$/i.test(typed);
  if (!special && !/^-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(typed))
    throw new Error(`${column.name}: not a number`);
  const value = Number(typed);
  return Number.isSafeInteger(value) && String(value) === typed ? value : typed;
}

/** A cell's value as text in the grid. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/**
 * A cell's value as its editor starts: as the API gave it, which a save sends back unchanged (a
 * json value is its JSON text already: a JSON string keeps its quotes).
 */
export function editorText(column: Column | undefined, value: unknown): string {
  if (value === null || value === undefined) return '';
  if (column && inputKind(column.type) === 'json' && typeof value !== 'string') return JSON.stringify(value);
  return cellText(value);
}

/** `line L, column C` of a 1-based character position in `text` (PostgreSQL's error position). */
export function lineAndColumn(text: string, position: number): { line: number; column: number } {
  const before = text.slice(0, Math.max(0, position - 1));
  const lines = before.split('\n');
  return { line: lines.length, column: (lines.at(-1)?.length ?? 0) + 1 };
}
