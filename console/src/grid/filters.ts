/**
 * The filter bar's conditions as the API's `filter=column.operator.value` (PostgREST's vocabulary,
 * README "Finding rows"), and back into words for the bar's chips. Pure functions: the URL keeps
 * the filters in the API's own syntax, so a shared link and the API read the same text.
 */
import { inputKind } from '../values';

/** Which operators fit a column: by its type as the catalog names it (`integer`, `text[]`, `jsonb`). */
export type Family = 'text' | 'ordered' | 'boolean' | 'collection';

export function familyOf(type: string): Family {
  if (type.endsWith('[]') || type === 'jsonb') return 'collection';
  const kind = inputKind(type);
  if (kind === 'number' || kind === 'date' || kind === 'datetime' || kind === 'time') return 'ordered';
  if (kind === 'boolean') return 'boolean';
  return 'text';
}

export interface Operator {
  id: string;
  label: string;
  families: Family[];
  /** `operator.value` as the API reads it, from what the user typed (undefined: takes no value). */
  write: ((value: string, type: string) => string) | { fixed: string };
}

/** `\`, `%` and `_` taken literally in a like pattern; `*` stays the API's wildcard. */
const likeText = (text: string) => text.replace(/[\\%_]/g, (char) => `\\${char}`);
const unlike = (text: string) => text.replace(/\\([\\%_])/g, '$1');

/** An array's elements as `{a,b}` (braces added when left out); jsonb as the JSON typed. */
const collection = (value: string, type: string) =>
  type.endsWith('[]') && !value.trim().startsWith('{') ? `{${value}}` : value;

const SYMBOLS = { eq: '=', neq: '≠', gt: '>', gte: '≥', lt: '<', lte: '≤' } as const;

export const OPERATORS: Operator[] = [
  { id: 'contains', label: 'contains', families: ['text'], write: (v) => `ilike.*${likeText(v)}*` },
  {
    id: 'excludes',
    label: 'does not contain',
    families: ['text'],
    write: (v) => `not.ilike.*${likeText(v)}*`,
  },
  { id: 'starts', label: 'starts with', families: ['text'], write: (v) => `ilike.${likeText(v)}*` },
  { id: 'equals', label: 'equals', families: ['text'], write: (v) => `eq.${v}` },
  { id: 'differs', label: 'is not', families: ['text'], write: (v) => `neq.${v}` },
  ...Object.entries(SYMBOLS).map(
    ([api, symbol]): Operator => ({
      id: api,
      label: symbol,
      families: ['ordered'],
      write: (v) => `${api}.${v}`,
    }),
  ),
  { id: 'has', label: 'contains', families: ['collection'], write: (v, type) => `cs.${collection(v, type)}` },
  { id: 'true', label: 'is true', families: ['boolean'], write: { fixed: 'is.true' } },
  { id: 'false', label: 'is false', families: ['boolean'], write: { fixed: 'is.false' } },
  {
    id: 'null',
    label: 'is null',
    families: ['text', 'ordered', 'boolean', 'collection'],
    write: { fixed: 'is.null' },
  },
  {
    id: 'not-null',
    label: 'is not null',
    families: ['text', 'ordered', 'boolean', 'collection'],
    write: { fixed: 'not.is.null' },
  },
];

export const operatorsFor = (family: Family) => OPERATORS.filter((op) => op.families.includes(family));

export const takesValue = (operator: Operator) => typeof operator.write === 'function';

/** A column name as filter, order and select read it: double-quoted when it holds `.`, `,` or parentheses. */
export const columnRef = (name: string) => (/[.,()"]/.test(name) ? `"${name}"` : name);

/** The API's `filter=` text for a condition of the bar. A value is never quoted: it runs to the end. */
export function writeFilter(column: string, type: string, operator: Operator, value: string): string {
  const tail = typeof operator.write === 'function' ? operator.write(value, type) : operator.write.fixed;
  return `${columnRef(column)}.${tail}`;
}

/** A `filter=` text split as the API splits it: the column (quoted or up to a dot), then the rest. */
export function splitFilter(filter: string): { column: string; rest: string } | undefined {
  if (filter.startsWith('"')) {
    const end = filter.indexOf('"', 1);
    if (end < 0 || filter[end + 1] !== '.') return undefined;
    return { column: filter.slice(1, end), rest: filter.slice(end + 2) };
  }
  const dot = filter.indexOf('.');
  return dot > 0 ? { column: filter.slice(0, dot), rest: filter.slice(dot + 1) } : undefined;
}

const quoted = (text: string) => JSON.stringify(text);

/** The bar's words for `[not.]operator.value`, or undefined when the bar does not write it. */
function barWords(operator: string, negated: boolean, value: string): string | undefined {
  if (operator === 'is') return `is ${negated ? 'not ' : ''}${value}`;
  if (operator === 'ilike' && value.length >= 2 && /^\*.*\*$/s.test(value))
    return `${negated ? 'does not contain' : 'contains'} ${quoted(unlike(value.slice(1, -1)))}`;
  if (negated) return undefined;
  if (operator === 'ilike' && /^[^*]*\*$/s.test(value))
    return `starts with ${quoted(unlike(value.slice(0, -1)))}`;
  if (operator === 'cs') return `contains ${value}`;
  if (operator in SYMBOLS) return `${SYMBOLS[operator as keyof typeof SYMBOLS]} ${value}`;
  return undefined;
}

/** A filter in the bar's words: `name contains "ann"`; one the bar does not write shows as the API's. */
export function describeFilter(filter: string): { column: string; words: string } {
  const parts = splitFilter(filter);
  if (!parts) return { column: '', words: filter };
  const negated = parts.rest.startsWith('not.');
  const body = negated ? parts.rest.slice(4) : parts.rest;
  const dot = body.indexOf('.');
  const operator = dot < 0 ? body : body.slice(0, dot);
  const value = dot < 0 ? '' : body.slice(dot + 1);
  const words = barWords(operator, negated, value) ?? `${negated ? 'not ' : ''}${operator} ${value}`;
  return { column: parts.column, words };
}

/** A value of an `in.(...)` list: double-quoted (`\"`, `\\` escaped) when it would not read back as it is. */
const inItem = (value: string) =>
  value === '' || /[,()"\\]|^\s|\s$/.test(value) ? `"${value.replace(/[\\"]/g, '\\$&')}"` : value;

/** `column.in.(a,b,"c,d")`: the rows whose column is one of `values`. */
export const writeInFilter = (column: string, values: string[]) =>
  `${columnRef(column)}.in.(${values.map(inItem).join(',')})`;
