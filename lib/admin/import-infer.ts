import { type CsvOptions, csvRecords, type ImportFormat, JsonRowSplitter } from '#lib/admin/import-format';
import { BadRequest } from '#lib/errors';

/**
 * "New table from a file": the columns a sample of it suggests, each a name PostgreSQL takes
 * without quotes and the narrowest type every value in the sample fits (boolean, integer, bigint,
 * numeric, date, timestamp, timestamptz, uuid, jsonb, else text), for the caller to correct before
 * the table is made. Pure functions over the sample's text.
 */

export const SAMPLE_ROWS = 1000;

/**
 * A name is made of the source's first this many characters: it holds 63 at most, and a header
 * of megabytes costs no more than a short one.
 */
const MAX_NAME_SOURCE = 256;

/** A name as an unquoted identifier: lower case, `_` for the rest, never a leading digit, at most 63 bytes. */
export function columnNameFor(source: string): string {
  const name = withoutEdgeUnderscores(
    source
      .slice(0, MAX_NAME_SOURCE)
      .normalize('NFKD')
      .replace(/[\u0300-\u036f]/g, '')
      .toLowerCase()
      .replace(/[^a-z0-9_]+/g, '_'),
  ).slice(0, 63);
  if (name === '') return 'column';
  return /^[0-9]/.test(name) ? `c_${name}`.slice(0, 63) : name;
}

/** The text without its leading and trailing underscores, in one pass (`/^_+|_+$/` is quadratic). */
function withoutEdgeUnderscores(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && text[start] === '_') start++;
  while (end > start && text[end - 1] === '_') end--;
  return text.slice(start, end);
}

type Value = string | number | boolean | object;

const INTEGER = /^[-+]?\d+$/;
// No nested quantifiers over the same digits: linear on any text.
const NUMBER = /^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$/;
/** Longer values are text: no type test runs over a 5 MB field. */
const MAX_TYPED_LENGTH = 100;
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(?<zone>Z|[+-]\d{2}(:?\d{2})?)?$/i;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const BOOLEAN_TEXT = new Set(['true', 'false', 't', 'f', 'yes', 'no']);

const text = (value: Value) => (typeof value === 'string' ? value.trim() : String(value));
const isJsonText = (value: string) => {
  if (!/^[[{]/.test(value)) return false;
  try {
    JSON.parse(value);
    return true;
  } catch {
    return false;
  }
};
const validDate = (value: string) => !Number.isNaN(Date.parse(value.slice(0, 10)));

/** Each candidate type, narrowest first, with whether a value fits it. */
const CANDIDATES: [string, (value: Value) => boolean][] = [
  [
    'BOOLEAN',
    (v) => typeof v === 'boolean' || (typeof v === 'string' && BOOLEAN_TEXT.has(v.trim().toLowerCase())),
  ],
  ['INTEGER', (v) => INTEGER.test(text(v)) && Math.abs(Number(text(v))) <= 2_147_483_647],
  [
    'BIGINT',
    (v) =>
      INTEGER.test(text(v)) &&
      BigInt(text(v)) <= 9_223_372_036_854_775_807n &&
      BigInt(text(v)) >= -9_223_372_036_854_775_808n,
  ],
  ['NUMERIC', (v) => typeof v === 'number' || NUMBER.test(text(v))],
  ['DATE', (v) => typeof v === 'string' && DATE.test(v.trim()) && validDate(v.trim())],
  [
    'TIMESTAMP',
    (v) =>
      typeof v === 'string' &&
      !TIMESTAMP.exec(v.trim())?.groups?.zone &&
      TIMESTAMP.test(v.trim()) &&
      validDate(v.trim()),
  ],
  ['TIMESTAMPTZ', (v) => typeof v === 'string' && TIMESTAMP.test(v.trim()) && validDate(v.trim())],
  ['UUID', (v) => typeof v === 'string' && UUID.test(v.trim())],
  ['JSONB', (v) => (typeof v === 'object' && v !== null) || (typeof v === 'string' && isJsonText(v.trim()))],
];

/** The narrowest type all values fit; TEXT when none (or no value at all). */
export function typeFor(values: Value[]): string {
  if (values.length === 0) return 'TEXT';
  if (values.some((v) => typeof v === 'string' && v.length > MAX_TYPED_LENGTH)) {
    return values.every((v) => typeof v === 'string' && isJsonText(v.trim())) ? 'JSONB' : 'TEXT';
  }
  return CANDIDATES.find(([, fits]) => values.every(fits))?.[0] ?? 'TEXT';
}

export interface InferredColumn {
  /** As the file names it (the header, the key; `column_3` when a CSV has no header). */
  source: string;
  name: string;
  type: string;
  nullable: boolean;
  /** An `id` column (or the first uuid column named like one) whose sample values are unique. */
  primaryKey: boolean;
}

/** Names made unique: a second `name` becomes `name_2`. */
function uniqueNames(sources: string[]): string[] {
  const taken = new Set<string>();
  return sources.map((source) => {
    const base = columnNameFor(source);
    let name = base;
    for (let n = 2; taken.has(name); n++) name = `${base.slice(0, 60)}_${n}`;
    taken.add(name);
    return name;
  });
}

/** The sample as source names and rows of values (null where empty or absent). */
function sampleRows(format: ImportFormat, sample: string, csv: CsvOptions) {
  if (format === 'csv') {
    // The sample may end mid-record: that record is left out.
    const records = csvRecords(sample, csv, SAMPLE_ROWS + 1, sample.endsWith('\n'));
    const width = Math.max(0, ...records.map((r) => r.length));
    const header = csv.header ? (records.shift() ?? []) : [];
    const sources = Array.from({ length: width }, (_, i) => header[i] ?? `column_${i + 1}`);
    return { sources, rows: records.map((record) => sources.map((_, i) => record[i] ?? null)) };
  }
  const splitter = new JsonRowSplitter(format);
  // A sample is the start of a file: rows cut off at its end are left out.
  const objects = splitter.push(sample).slice(0, SAMPLE_ROWS) as Record<string, unknown>[];
  const sources = [...new Set(objects.flatMap((row) => Object.keys(row)))];
  return {
    sources,
    rows: objects.map((row) => sources.map((key) => (row[key] ?? null) as Value | null)),
  };
}

export function inferColumns(format: ImportFormat, sample: string, csv: CsvOptions) {
  const { sources, rows } = sampleRows(format, sample, csv);
  if (sources.length === 0) throw new BadRequest('Nothing to infer', 'the sample holds no column');
  const names = uniqueNames(sources);
  const columns: InferredColumn[] = sources.map((source, i) => {
    const values = rows.map((row) => row[i]).filter((v): v is Value => v !== null && v !== '');
    return {
      source,
      name: names[i] as string,
      type: typeFor(values),
      nullable: values.length < rows.length,
      primaryKey: false,
    };
  });
  const key = columns.findIndex(
    (c, i) =>
      /^(id|uuid)$/.test(c.name) &&
      ['INTEGER', 'BIGINT', 'UUID'].includes(c.type) &&
      !c.nullable &&
      new Set(rows.map((row) => String(row[i]))).size === rows.length,
  );
  if (key >= 0) (columns[key] as InferredColumn).primaryKey = true;
  return { columns, rows: rows.slice(0, 10), sampled: rows.length };
}
