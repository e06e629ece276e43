import { api } from './api';

export interface Column {
  name: string;
  type: string;
  maxLength: number | null;
  nullable: boolean;
  defaultValue: string | null;
  primaryKey: boolean;
}

export interface ForeignKey {
  column: string;
  referencedTable: string;
  referencedColumn: string;
  constraintName: string;
}

export interface TableStructure {
  table: string;
  columns: Column[];
  foreignKeys: ForeignKey[];
}

export async function loadStructure(schema: string): Promise<TableStructure[]> {
  return (await api<{ schema: TableStructure[] }>('GET', 'schema', { query: { schema } })).schema;
}

/** Why rows of this table cannot be edited in place, or undefined when they can. */
export function readOnlyReason(table: TableStructure | undefined): string | undefined {
  if (!table) return 'the table structure could not be read';
  const keys = table.columns.filter((column) => column.primaryKey);
  if (keys.length === 0)
    return 'this table has no primary key, so a row cannot be named: add one to edit rows here (or use SQL)';
  if (keys.length > 1) return 'this table has a composite primary key: edit its rows with SQL';
  return undefined;
}

export const primaryKeyOf = (table: TableStructure | undefined) =>
  table?.columns.find((column) => column.primaryKey);

/** The HTML input that fits a PostgreSQL type. */
export function inputKind(
  type: string,
): 'number' | 'boolean' | 'date' | 'datetime' | 'time' | 'json' | 'text' {
  if (/^(smallint|integer|bigint|numeric|real|double precision|decimal)/.test(type)) return 'number';
  if (type === 'boolean') return 'boolean';
  if (type === 'date') return 'date';
  if (type.startsWith('timestamp')) return 'datetime';
  if (type.startsWith('time')) return 'time';
  if (type === 'json' || type === 'jsonb') return 'json';
  return 'text';
}

/** What the user typed, as the JSON value the API expects for the column. */
export function parseInput(column: Column, text: string): unknown {
  if (text === '' && column.nullable) return null;
  switch (inputKind(column.type)) {
    case 'number': {
      if (/^(smallint|integer|bigint)/.test(column.type) && /^-?\d+$/.test(text)) {
        const value = Number(text);
        return Number.isSafeInteger(value) ? value : text;
      }
      return text;
    }
    case 'boolean':
      return text === 'true';
    case 'json':
      try {
        return JSON.parse(text);
      } catch {
        throw new Error(`${column.name}: not valid JSON`);
      }
    default:
      return text;
  }
}

/** A cell's value as text in the grid and in an editor. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}
