/**
 * JSON and PostgreSQL array values as the multi-line cell editor shows and checks them. Pure
 * functions: text in, the value the API takes out, or an error that says where the text went wrong.
 */
import { type Column, cellText, lineAndColumn } from '../values';

/** The columns whose cells open the multi-line editor: json, jsonb and arrays (`text[]`, `integer[]`). */
export const isLongType = (type: string) => type === 'json' || type === 'jsonb' || type.endsWith('[]');

const isArrayType = (type: string) => type.endsWith('[]');

/**
 * The editor's first text: JSON indented, an array as PostgreSQL writes it (`{a,"b c",NULL}`). A
 * json value is its JSON text (as the API gives it): indented without being parsed, so every
 * number keeps its digits.
 */
export function longEditorText(column: Column, value: unknown): string {
  if (value === null || value === undefined) return '';
  if (!isArrayType(column.type))
    return typeof value === 'string' ? indentJson(value) : JSON.stringify(value, null, 2);
  // An array of a type the API does not parse arrives as PostgreSQL's text already.
  return Array.isArray(value) ? writeArrayLiteral(value) : cellText(value);
}

/**
 * What the editor holds, as the value to save. Empty is NULL for a nullable column. An array
 * column takes a PostgreSQL array literal or a JSON array. Throws, naming the column and the line
 * and column of the text where it stops being valid.
 */
export function readLongValue(column: Column, text: string): unknown {
  if (text.trim() === '' && column.nullable) return null;
  if (!isArrayType(column.type)) {
    // Checked, then sent as the text itself, which the API takes as the JSON: parsed here, a
    // number past 2^53 would be rounded.
    readJson(column.name, text);
    return text;
  }
  if (text.trim().startsWith('[')) {
    const value = readJson(column.name, text);
    if (!Array.isArray(value)) throw new Error(`${column.name}: expected an array`);
    return value;
  }
  try {
    return readArrayLiteral(text);
  } catch (error) {
    if (!(error instanceof TextProblem)) throw error;
    throw new Error(`${column.name}: not an array ${where(text, error.position)}: ${error.message}`);
  }
}

/** Where in `text` a 0-based position is, in the words of PostgreSQL's own errors. */
function where(text: string, position: number): string {
  const { line, column } = lineAndColumn(text, position + 1);
  return `at line ${line}, column ${column}`;
}

/** Where a text stops being what it should be (0-based), and why. */
export class TextProblem extends Error {
  constructor(
    readonly position: number,
    reason: string,
  ) {
    super(reason);
  }
}

function readJson(name: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    const problem = jsonProblem(text);
    throw new Error(`${name}: not valid JSON ${where(text, problem.position)}: ${problem.message}`);
  }
}

/**
 * JSON text indented two spaces a level, each token as it is written (a number's digits, a
 * string's escapes): only the space between tokens changes. Text that is not JSON is left as it is.
 */
export function indentJson(text: string): string {
  if (!isJson(text)) return text;
  const tokens = text.match(JSON_TOKENS) ?? [];
  let depth = 0;
  const line = () => `\n${'  '.repeat(depth)}`;
  return tokens
    .map((token, i) => {
      const closing = CLOSING[token];
      if (closing) {
        // An empty object or array stays `{}` / `[]`.
        if (tokens[i + 1] === closing) return token;
        depth++;
        return token + line();
      }
      if (token === '}' || token === ']') {
        if (CLOSING[tokens[i - 1] ?? ''] === token) return token;
        depth--;
        return line() + token;
      }
      return SEPARATOR[token]?.(line()) ?? token;
    })
    .join('');
}

const CLOSING: Record<string, string | undefined> = { '{': '}', '[': ']' };
/** A comma ends its line; a colon takes a space after it. */
const SEPARATOR: Record<string, ((line: string) => string) | undefined> = {
  ',': (line) => `,${line}`,
  ':': () => ': ',
};

/** JSON's tokens: strings with their escapes, punctuation, and numbers and literals. */
const JSON_TOKENS = /"(?:[^"\\]|\\.)*"|[{}[\],:]|[^\s{}[\],:"]+/g;

const isJson = (text: string) => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};

/** A reader of text, one character at a time, that fails with where it stopped. */
class TextReader {
  position = 0;
  constructor(readonly text: string) {}
  get next(): string | undefined {
    return this.text[this.position];
  }
  get done() {
    return this.position >= this.text.length;
  }
  fail(reason: string): never {
    throw new TextProblem(this.position, reason);
  }
  space() {
    while (!this.done && /\s/.test(this.next as string)) this.position++;
  }
  /** `close` ends the list (after `open`, consumed by the caller); `entry` reads each item. */
  list(close: string, entry: () => void) {
    this.space();
    if (this.next === close) {
      this.position++;
      return;
    }
    for (;;) {
      entry();
      this.space();
      if (this.next === ',') this.position++;
      else if (this.next === close) {
        this.position++;
        return;
      } else this.fail(this.done ? `the text ends where , or ${close} should be` : `expected , or ${close}`);
    }
  }
  expect(char: string) {
    if (this.next !== char) this.fail(`expected ${char}`);
    this.position++;
  }
  /** The text end: anything left after the value is an error. */
  end(what: string) {
    this.space();
    if (!this.done) this.fail(`text after the ${what}`);
  }
}

class JsonReader extends TextReader {
  value(): void {
    this.space();
    const char = this.next;
    if (char === '{' || char === '[') {
      this.position++;
      this.list(char === '{' ? '}' : ']', char === '{' ? () => this.member() : () => this.value());
    } else if (char === '"') this.string();
    else this.literal();
  }

  private member() {
    this.space();
    if (this.next !== '"') this.fail('expected a "quoted" key');
    this.string();
    this.space();
    this.expect(':');
    this.value();
  }

  private literal() {
    const found = /^(true|false|null|-?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?)(?![\w.])/.exec(
      this.text.slice(this.position),
    );
    if (found) this.position += found[0].length;
    else if (this.done) this.fail('the text ends where a value should be');
    else if (/[-\d]/.test(this.next as string)) this.fail('not a number as JSON writes it');
    else this.fail(/[\w']/.test(this.next as string) ? 'a string needs "double quotes"' : 'expected a value');
  }

  private string() {
    this.position++; // the opening quote
    for (;;) {
      const char = this.next;
      if (char === undefined) this.fail('a string does not end (a " is missing)');
      if (char === '"') {
        this.position++;
        return;
      }
      if (char < ' ') this.fail('a line break or tab inside a string is written \\n or \\t');
      if (char === '\\') this.escaped();
      else this.position++;
    }
  }

  private escaped() {
    const after = this.text.slice(this.position + 1, this.position + 6);
    if (!/^(["\\/bfnrt]|u[0-9a-fA-F]{4})/.test(after)) this.fail('an unknown escape after \\');
    this.position += after.startsWith('u') ? 6 : 2;
  }
}

/**
 * Where JSON text stops being JSON, and why. JSON.parse says whether; its messages differ between
 * engines and some quote the whole text, so this small reader finds the place itself.
 */
export function jsonProblem(text: string): TextProblem {
  const reader = new JsonReader(text);
  try {
    reader.value();
    reader.end('value');
  } catch (problem) {
    if (problem instanceof TextProblem) return problem;
    // Nested deeper than this reader's stack: JSON.parse already said it is not JSON.
  }
  return new TextProblem(0, 'not valid JSON');
}

/** A PostgreSQL array's elements: text (PostgreSQL reads each as the element type), NULL, or sub-arrays. */
export type ArrayElement = string | null | ArrayElement[];

class ArrayReader extends TextReader {
  array(): ArrayElement[] {
    if (this.next !== '{') this.fail('an array starts with {');
    this.position++;
    const items: ArrayElement[] = [];
    this.list('}', () => {
      this.space();
      items.push(this.next === '{' ? this.array() : this.next === '"' ? this.quoted() : this.unquoted());
    });
    return items;
  }

  private quoted(): string {
    let out = '';
    this.position++;
    for (;;) {
      if (this.done) this.fail('a quoted element does not end (a " is missing)');
      const char = this.text[this.position++] as string;
      if (char === '"') return out;
      if (char === '\\' && !this.done) out += this.text[this.position++];
      else out += char;
    }
  }

  private unquoted(): string | null {
    let out = '';
    while (!this.done && !',}'.includes(this.next as string)) {
      const char = this.next as string;
      if (char === '{' || char === '"')
        this.fail(`${char} inside an element: put the element in "double quotes"`);
      if (char === '\\') this.position++;
      out += this.text[this.position++] ?? '';
    }
    const trimmed = out.trim();
    if (trimmed === '') this.fail('an empty element is written ""');
    return /^null$/i.test(trimmed) ? null : trimmed;
  }
}

/**
 * A PostgreSQL array literal (`{a,"b,c",NULL,{1,2}}`) as nested arrays: a quoted element keeps its
 * text (`\` escapes), an unquoted one is trimmed and `NULL` in any case is null. Throws a
 * TextProblem (a position and a reason) where it is not one.
 */
export function readArrayLiteral(text: string): ArrayElement[] {
  const reader = new ArrayReader(text);
  reader.space();
  const items = reader.array();
  reader.end('array');
  return items;
}

/** An element as the literal writes it: quoted when PostgreSQL would not read it back as it is. */
function arrayElement(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) return writeArrayLiteral(value);
  const text = typeof value === 'object' ? JSON.stringify(value) : String(value);
  return text === '' || /[{}",\\\s]/.test(text) || /^null$/i.test(text)
    ? `"${text.replace(/[\\"]/g, '\\$&')}"`
    : text;
}

/** An array as a PostgreSQL array literal: `["a", "b c", null]` is `{a,"b c",NULL}`. */
export function writeArrayLiteral(values: unknown[]): string {
  return `{${values.map(arrayElement).join(',')}}`;
}
