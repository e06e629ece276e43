import { BadRequest } from '#lib/errors';

/**
 * The file side of an import, without the database: its options, the records of a CSV text, JSON
 * arrays and NDJSON split into rows as their bytes arrive (a part may end anywhere), and each row
 * written as a CSV line for COPY. Pure functions, unit-tested (test/unit/import-format.test.ts).
 */

export const IMPORT_FORMATS = ['csv', 'json', 'ndjson'] as const;
export type ImportFormat = (typeof IMPORT_FORMATS)[number];
export const IMPORT_MODES = ['insert', 'upsert', 'replace'] as const;
export type ImportMode = (typeof IMPORT_MODES)[number];

export interface CsvOptions {
  delimiter: string;
  quote: string;
  /** The text of an unquoted field that means NULL ('' by default: an empty unquoted field). */
  null: string;
  header: boolean;
}

/** One row of JSON at most: a file whose element never ends is refused, not buffered. */
export const MAX_ROW_CHARS = 16 * 1024 * 1024;

export const CSV_DEFAULTS: CsvOptions = { delimiter: ',', quote: '"', null: '', header: true };

/** The content types a file may be sent as, and the format each means. */
export const FORMAT_OF_TYPE: Record<string, ImportFormat> = {
  'text/csv': 'csv',
  'application/json': 'json',
  'application/x-ndjson': 'ndjson',
  'application/ndjson': 'ndjson',
};

/** COPY's own rules: one single-byte character each, apart from each other and from line breaks. */
export function checkCsvOptions(options: CsvOptions): CsvOptions {
  for (const [name, value] of [
    ['delimiter', options.delimiter],
    ['quote', options.quote],
  ] as const) {
    if (Buffer.byteLength(value) !== 1 || /[\r\n]/.test(value)) {
      throw new BadRequest(
        'Invalid CSV option',
        `${name} must be one single-byte character other than a line break`,
      );
    }
  }
  if (options.delimiter === options.quote) {
    throw new BadRequest('Invalid CSV option', 'delimiter and quote must differ');
  }
  if (/[\r\n]/.test(options.null) || options.null.length > 100) {
    throw new BadRequest('Invalid CSV option', 'null must be at most 100 characters, without line breaks');
  }
  return options;
}

/** CSV records read one character at a time: the state between characters. */
class CsvReader {
  readonly records: (string | null)[][] = [];
  private record: (string | null)[] = [];
  private field = '';
  private quoted = false;
  private inQuotes = false;

  constructor(private readonly options: CsvOptions) {}

  /** Reads text[i]; answers how many characters it took (a doubled quote, CRLF: two). */
  read(text: string, i: number): number {
    const char = text[i] as string;
    if (this.inQuotes) return this.insideQuotes(char, text[i + 1]);
    if (char === this.options.quote) {
      this.inQuotes = true;
      this.quoted = true;
    } else if (char === this.options.delimiter) this.endField();
    else if (char === '\n' || char === '\r') {
      this.endRecord();
      return char === '\r' && text[i + 1] === '\n' ? 2 : 1;
    } else this.field += char;
    return 1;
  }

  private insideQuotes(char: string, next: string | undefined): number {
    if (char !== this.options.quote) this.field += char;
    else if (next === this.options.quote) {
      this.field += char;
      return 2;
    } else this.inQuotes = false;
    return 1;
  }

  private endField() {
    this.record.push(!this.quoted && this.field === this.options.null ? null : this.field);
    this.field = '';
    this.quoted = false;
  }

  private endRecord() {
    this.endField();
    this.records.push(this.record);
    this.record = [];
  }

  /** The text ended: a record begun counts as a whole one. */
  finish() {
    if (this.field !== '' || this.quoted || this.record.length > 0) this.endRecord();
  }
}

/**
 * The first `most` records of a CSV text, quote-aware (a quoted field may hold the delimiter, the
 * quote doubled, line breaks). An unquoted field equal to the null string is null. A record cut
 * short at the end of the text (a sample) is left out unless `complete`.
 */
export function csvRecords(text: string, options: CsvOptions, most = Infinity, complete = false) {
  const reader = new CsvReader(options);
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  while (i < text.length && reader.records.length < most) i += reader.read(text, i);
  if (complete && reader.records.length < most) reader.finish();
  return reader.records;
}

/**
 * A JSON string, a bracket, or a number outside strings. A string the text does not end takes the
 * rest of it: searched again from each quote inside it, a line of `\"` would cost its length squared.
 */
const JSON_TOKEN = /"(?:[^"\\]|\\[\s\S])*(?:"|\\?$)|[{}[\]]|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?/g;

/** JSON.parse gives this number as the file writes it (no 64-bit id past 2^53, no 1e400). */
const keepsItsDigits = (token: string) => {
  const value = Number(token);
  return (
    Number.isFinite(value) && !/\d{16}/.test(token) && (Number.isSafeInteger(value) || !/^-?\d+$/.test(token))
  );
};

/**
 * A row's value JSON.parse would round quoted, so that it reaches PostgreSQL as the digits the
 * file holds, which the column's type then reads exactly. Only the row's own values: a number
 * nested in a json value stays a number there. Text without a long number is left as it is.
 */
export function exactNumbers(text: string): string {
  if (!/\d{16}|[eE][-+]?\d{3}/.test(text)) return text;
  let depth = 0;
  return text.replace(JSON_TOKEN, (token) => {
    if (token === '{' || token === '[') depth++;
    else if (token === '}' || token === ']') depth--;
    else if (depth === 1 && !token.startsWith('"') && !keepsItsDigits(token)) return `"${token}"`;
    return token;
  });
}

/**
 * Rows of a JSON array or of NDJSON, as their text arrives in pieces: `push` answers the rows
 * completed so far, `end` those left and checks the file ended where a file may. `row` counts
 * from 1; `line` is the NDJSON line a row was on (blank lines skipped).
 */
export class JsonRowSplitter {
  private pending = '';
  private started = false;
  private finished = false;
  private depth = 0;
  private inString = false;
  private escaped = false;
  /** Where the current element starts in `pending`; -1 between elements. */
  private start = -1;
  /** How much of `pending` was scanned already (the unfinished element's text so far). */
  private scanned = 0;
  private rows = 0;
  private line = 0;
  /** NDJSON: where blank lines moved rows off their line numbers, as [row, line]. */
  private readonly marks: [number, number][] = [];
  private blankLines = 0;

  constructor(private readonly format: 'json' | 'ndjson') {}

  push(text: string): unknown[] {
    this.pending += text;
    return this.format === 'ndjson' ? this.ndjson(false) : this.json();
  }

  end(): unknown[] {
    if (this.format === 'ndjson') return this.ndjson(true);
    const rest = this.json();
    if (!this.started) throw new BadRequest('Import failed', 'the file is not a JSON array: it holds no "["');
    if (!this.finished) {
      throw new BadRequest('Import failed', `the JSON array ends without "]" after row ${this.rows}`);
    }
    return rest;
  }

  private parse(text: string, where: string): unknown {
    let value: unknown;
    try {
      value = JSON.parse(exactNumbers(text));
    } catch (error) {
      throw new BadRequest('Import failed', `${where} is not valid JSON: ${(error as Error).message}`);
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new BadRequest('Import failed', `${where} is not an object of column names and values`);
    }
    return value;
  }

  private ndjson(last: boolean): unknown[] {
    const rows: unknown[] = [];
    let from = 0;
    for (;;) {
      // The unfinished line's start was searched already: a long line is not searched again.
      const at = this.pending.indexOf('\n', Math.max(from, this.scanned));
      this.scanned = 0;
      if (at < 0 && !last) break;
      const end = at < 0 ? this.pending.length : at;
      const text = this.pending.slice(from, end).trim();
      this.line++;
      if (text !== '') {
        this.rows++;
        if (this.line - this.rows !== this.blankLines) {
          this.blankLines = this.line - this.rows;
          this.marks.push([this.rows, this.line]);
        }
        rows.push(this.parse(text, `line ${this.line}`));
      }
      if (at < 0) {
        from = this.pending.length;
        break;
      }
      from = at + 1;
    }
    this.pending = this.pending.slice(from);
    this.scanned = this.pending.length;
    this.holdsNoGiant(`line ${this.line + 1}`);
    return rows;
  }

  /** The unfinished row is already over MAX_ROW_CHARS: a 400, before it takes all the memory. */
  private holdsNoGiant(where: string) {
    if (this.pending.length > MAX_ROW_CHARS) {
      throw new BadRequest(
        'Import failed',
        `${where} is over ${MAX_ROW_CHARS} characters: one row is at most that; nothing was imported`,
      );
    }
  }

  /** The NDJSON line of row `row` (from 1), blank lines counted. */
  lineOf(row: number): number {
    const mark = this.marks.findLast(([from]) => from <= row) ?? [1, 1];
    return mark[1] + (row - mark[0]);
  }

  /** Scans for the array's top-level elements; keeps only the unfinished one. */
  private json(): unknown[] {
    const rows: unknown[] = [];
    const text = this.pending;
    for (let i = this.scanned; i < text.length; i++) {
      const char = text[i] as string;
      if (this.finished) this.afterArray(char);
      else if (!this.started) this.beforeArray(char);
      else if (this.inString) this.insideString(char);
      else this.insideArray(char, text, i, rows);
    }
    // Keep the unfinished element's text; its scan state stands, so scanning resumes after it.
    this.pending = this.start < 0 ? '' : text.slice(this.start);
    this.scanned = this.pending.length;
    if (this.start >= 0) this.start = 0;
    this.holdsNoGiant(`row ${this.rows + 1}`);
    return rows;
  }

  private beforeArray(char: string) {
    if (char === '[') this.started = true;
    else if (char !== '\ufeff' && !/\s/.test(char)) {
      throw new BadRequest(
        'Import failed',
        'the file is not a JSON array of objects (it must start with "[")',
      );
    }
  }

  private afterArray(char: string) {
    if (!/\s/.test(char)) throw new BadRequest('Import failed', `text after the JSON array's "]"`);
  }

  private insideString(char: string) {
    if (this.escaped) this.escaped = false;
    else if (char === '\\') this.escaped = true;
    else if (char === '"') this.inString = false;
  }

  /** Between elements: whether `char` starts one (else it is space, a comma, or the array's end). */
  private elementStarts(char: string, i: number): boolean {
    if (/\s/.test(char)) return false;
    // The comma after an element ended it: another one is an element left out.
    if (char === ',' && this.rows > 0) {
      throw new BadRequest('Import failed', `two commas after row ${this.rows}: an element is missing`);
    }
    if (char === ']') {
      this.finished = true;
      return false;
    }
    this.start = i;
    return true;
  }

  /** Outside strings, inside the array: between elements, or within one (tracking its depth). */
  private insideArray(char: string, text: string, i: number, rows: unknown[]) {
    if (char === '"') this.inString = true;
    if (this.start < 0 && !this.elementStarts(char, i)) return;
    if (char === '{' || char === '[') this.depth++;
    else if (char === '}' || char === ']') this.depth--;
    if (this.depth < 0 || (this.depth === 0 && (char === ',' || char === ']'))) {
      rows.push(this.element(text.slice(this.start, i)));
      this.depth = 0;
      this.start = -1;
      if (char === ']') this.finished = true;
    }
  }

  private element(text: string): unknown {
    this.rows++;
    return this.parse(text, `row ${this.rows}`);
  }
}

/** A column as a row of JSON is written for it: an array column takes PostgreSQL's array text. */
export interface TargetColumn {
  name: string;
  array: boolean;
}

/** A JS array as PostgreSQL's array text: `{1,"a b",NULL,{2,3}}`. */
export function arrayText(items: unknown[]): string {
  const item = (value: unknown): string => {
    if (value === null || value === undefined) return 'NULL';
    if (Array.isArray(value)) return arrayText(value);
    const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
    return `"${text.replace(/[\\"]/g, '\\$&')}"`;
  };
  return `{${items.map(item).join(',')}}`;
}

const TEXT_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * One field of COPY's text format: backslash, line breaks and tabs escaped, so that a row is
 * exactly one line and COPY's line number is the row's; NULL is `\N`.
 */
function field(value: unknown, column: TargetColumn): string {
  if (value === null || value === undefined) return '\\N';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  const text =
    typeof value === 'string'
      ? value
      : Array.isArray(value) && column.array
        ? arrayText(value)
        : JSON.stringify(value);
  return text.replace(/[\\\n\r\t]/g, (c) => TEXT_ESCAPES[c] as string);
}

/**
 * A row of JSON as a line of COPY's text format, the columns in their order: a missing key is
 * NULL; a key that is not one of the columns is a 400 naming the row, so a typo is never dropped.
 */
export function rowLine(row: Record<string, unknown>, columns: TargetColumn[], where: string): string {
  for (const key of Object.keys(row)) {
    if (!columns.some((c) => c.name === key)) {
      throw new BadRequest(
        'Import failed',
        `${where} has "${key}", which is not one of the columns imported (${columns.map((c) => c.name).join(', ')}); name them with columns=`,
      );
    }
  }
  // Own keys only: a column named constructor or __proto__ is not found on Object's prototype.
  const value = (c: TargetColumn) => (Object.hasOwn(row, c.name) ? row[c.name] : undefined);
  return `${columns.map((c) => field(value(c), c)).join('\t')}\n`;
}
