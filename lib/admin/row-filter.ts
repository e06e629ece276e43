import { type ColumnInfo, columnOf } from '#lib/db/catalog';
import { quoteCatalogName } from '#lib/db/identifiers';
import { BadRequest } from '#lib/errors';

/**
 * Row filters in PostgREST's vocabulary, read into a tree and written as a WHERE clause over the
 * table's own columns: every column is checked against the catalog, every value is a bound
 * parameter, and the tree is bounded (MAX_CONDITIONS, MAX_DEPTH), so a hostile caller can neither
 * reach past the table nor make the statement as large as it likes.
 *
 *   filter=column.operator.value         repeatable, ANDed; `not.` before the operator negates
 *   or=(cond,cond,and(cond,cond),...)    and=(...) likewise; groups nest, `not.or(...)` negates
 *
 * Operators: eq neq gt gte lt lte like ilike (`*` is the wildcard) in.(a,b,"c,d")
 * is.null|true|false|unknown cs cd fts plfts phfts wfts (optionally `fts(english)`). A column whose
 * name holds `.`, `,` or parentheses is double-quoted (`"my.col".eq.5`); inside or/and a value
 * holding `,` or `)` is too (`name.eq."Smith, J"`), with `\"` and `\\` as escapes.
 */

/** At most this many conditions in one request (filter, or, and together). */
export const MAX_CONDITIONS = 100;
/** Groups nest at most this deep (`or=(and(or(...)))` is 3). */
export const MAX_DEPTH = 4;

const COMPARISONS = { eq: '=', neq: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;
const TEXT_SEARCH = {
  fts: 'to_tsquery',
  plfts: 'plainto_tsquery',
  phfts: 'phraseto_tsquery',
  wfts: 'websearch_to_tsquery',
} as const;
const OPERATORS = [
  ...Object.keys(COMPARISONS),
  'like',
  'ilike',
  'in',
  'is',
  'cs',
  'cd',
  ...Object.keys(TEXT_SEARCH),
];
const IS_VALUES = { null: 'NULL', true: 'TRUE', false: 'FALSE', unknown: 'UNKNOWN' } as const;

export interface Condition {
  kind: 'condition';
  column: string;
  operator: string;
  negated: boolean;
  /** The value as sent (the list for `in`). */
  value: string | string[];
  /** Text search configuration: `fts(english)`. */
  config?: string;
}

export interface Group {
  kind: 'and' | 'or';
  negated: boolean;
  items: FilterNode[];
}

export type FilterNode = Condition | Group;

const invalid = (what: string, message: string) => new BadRequest('Invalid filter', `${what}: ${message}`);

/** A cursor over one filter expression. */
class Reader {
  position = 0;
  constructor(
    readonly text: string,
    readonly what: string,
  ) {}

  get done() {
    return this.position >= this.text.length;
  }

  peek(length = 1) {
    return this.text.slice(this.position, this.position + length);
  }

  fail(message: string): never {
    throw invalid(this.what, `${message} at character ${this.position + 1}`);
  }

  expect(token: string) {
    if (this.peek(token.length) !== token) this.fail(`expected "${token}"`);
    this.position += token.length;
  }

  accept(token: string) {
    if (this.peek(token.length) !== token) return false;
    this.position += token.length;
    return true;
  }

  /** A double-quoted string, `\"` and `\\` escaped. */
  quoted(): string {
    this.expect('"');
    let out = '';
    for (;;) {
      if (this.done) this.fail('a quoted name or value does not end');
      const char = this.text[this.position++] as string;
      if (char === '"') return out;
      if (char === '\\' && !this.done) out += this.text[this.position++];
      else out += char;
    }
  }

  /** Characters up to (not including) the first of `stops`, or the end. */
  until(stops: string): string {
    const start = this.position;
    while (!this.done && !stops.includes(this.text[this.position] as string)) this.position++;
    return this.text.slice(start, this.position);
  }
}

/** Counts conditions and depth across one request's expressions. */
class Budget {
  conditions = 0;
  count(reader: Reader) {
    if (++this.conditions > MAX_CONDITIONS) {
      throw invalid(reader.what, `more than ${MAX_CONDITIONS} conditions in one request`);
    }
  }
}

function readColumn(reader: Reader): string {
  const name = reader.peek() === '"' ? reader.quoted() : reader.until('.,()');
  if (!name) reader.fail('expected a column name');
  return name;
}

/** `column.[not.]operator.value`; inside a group the value ends at `,` or `)` unless quoted. */
function readCondition(reader: Reader, budget: Budget, inGroup: boolean): Condition {
  budget.count(reader);
  const column = readColumn(reader);
  reader.expect('.');
  const negated = reader.accept('not.');
  const operator = reader.until('.(,)');
  if (!OPERATORS.includes(operator)) {
    reader.fail(`unknown operator "${operator}" (one of ${OPERATORS.join(', ')})`);
  }
  let config: string | undefined;
  if (operator in TEXT_SEARCH && reader.accept('(')) {
    config = reader.until(')');
    reader.expect(')');
  }
  reader.expect('.');
  if (operator === 'in') return { kind: 'condition', column, operator, negated, value: readList(reader) };
  let value: string;
  if (reader.peek() === '"' && inGroup) value = reader.quoted();
  else value = inGroup ? reader.until(',)') : reader.text.slice(reader.position);
  if (!inGroup) reader.position = reader.text.length;
  return { kind: 'condition', column, operator, negated, value, ...(config !== undefined ? { config } : {}) };
}

/** `(a,b,"c,d")`: the values of `in`. */
function readList(reader: Reader): string[] {
  reader.expect('(');
  const values: string[] = [];
  if (reader.accept(')')) return values;
  do {
    values.push(reader.peek() === '"' ? reader.quoted() : reader.until(',)'));
  } while (reader.accept(','));
  reader.expect(')');
  return values;
}

/** `(item,item,...)`, each a condition or a `[not.]and(...)` / `[not.]or(...)` group. */
function readItems(reader: Reader, budget: Budget, depth: number): FilterNode[] {
  if (depth > MAX_DEPTH) reader.fail(`groups nest deeper than ${MAX_DEPTH}`);
  reader.expect('(');
  const items: FilterNode[] = [];
  do {
    const start = reader.position;
    const negated = reader.accept('not.');
    const kind = reader.accept('and(') ? 'and' : reader.accept('or(') ? 'or' : undefined;
    if (kind) {
      reader.position -= 1; // back to its `(`
      items.push({ kind, negated, items: readItems(reader, budget, depth + 1) });
    } else {
      reader.position = start;
      items.push(readCondition(reader, budget, true));
    }
  } while (reader.accept(','));
  reader.expect(')');
  return items;
}

export interface FilterInput {
  filter?: string[] | undefined;
  or?: string | undefined;
  and?: string | undefined;
}

/** The request's filters as one AND group, or undefined when it has none. 400 when malformed. */
export function parseFilters({ filter = [], or, and }: FilterInput): Group | undefined {
  const budget = new Budget();
  const items: FilterNode[] = filter.map((text, i) => {
    const reader = new Reader(text, `filter ${i + 1} (${JSON.stringify(truncated(text))})`);
    const condition = readCondition(reader, budget, false);
    if (!reader.done) reader.fail('unexpected text after the closing parenthesis');
    return condition;
  });
  for (const [kind, text] of [
    ['or', or],
    ['and', and],
  ] as const) {
    if (text === undefined) continue;
    const reader = new Reader(text, kind);
    items.push({ kind, negated: false, items: readItems(reader, budget, 1) });
    if (!reader.done) reader.fail('unexpected text after the closing parenthesis');
  }
  return items.length > 0 ? { kind: 'and', negated: false, items } : undefined;
}

const truncated = (text: string) => (text.length > 60 ? `${text.slice(0, 57)}...` : text);

/** Adds a bound parameter and answers its placeholder. */
export type Bind = (value: unknown) => string;

/**
 * The tree as SQL over `alias`'s columns: names quoted from the catalog, values bound (PostgreSQL
 * reads each as the type its column asks, so a value of the wrong type is its 400, naming both).
 */
export function filterSql(
  node: FilterNode,
  columns: readonly ColumnInfo[],
  table: string,
  alias: string,
  bind: Bind,
): string {
  if (node.kind !== 'condition') {
    const joined = node.items.map((item) => filterSql(item, columns, table, alias, bind));
    const sql = `(${joined.join(node.kind === 'and' ? ' AND ' : ' OR ')})`;
    return node.negated ? `NOT ${sql}` : sql;
  }
  const column = columnOf({ table, columns }, node.column);
  const sql = conditionSql(node, column, `${alias}.${quoteCatalogName(column.name)}`, bind);
  return node.negated ? `NOT (${sql})` : sql;
}

/** What a filter says of every row it lets through, for the cursor after one (lib/admin/row-view's afterSql). */
export interface FilterFacts {
  /** Columns an `eq` fixes to one value (the value as sent), by the column's name. */
  equal: Map<string, string>;
  /** Columns that are never NULL in such a row. */
  notNull: Set<string>;
}

/**
 * The facts the tree's top-level conditions (those every row must meet: the request's `filter`s
 * and the items of un-negated `and` groups) establish. PostgreSQL's comparisons are strict, so a
 * column compared in any way but `is` (negated or not) is not NULL in a row that passed; `is.true`,
 * `is.false`, `not.is.null` and `not.is.unknown` say so too.
 */
export function filterFacts(
  tree: FilterNode | undefined,
  columns: readonly ColumnInfo[],
  table: string,
): FilterFacts {
  const facts: FilterFacts = { equal: new Map(), notNull: new Set() };
  const visit = (node: FilterNode) => {
    if (node.kind === 'and' && !node.negated) node.items.forEach(visit);
    if (node.kind !== 'condition') return;
    const { name, deterministic } = columnOf({ table, columns }, node.column);
    // Under a nondeterministic collation `eq` lets through values that differ ('a', 'A'), which
    // the cursor must still tell apart: only an exact equality fixes the column.
    if (node.operator === 'eq' && !node.negated && deterministic === true && !facts.equal.has(name))
      facts.equal.set(name, node.value as string);
    // `in.()` is the constant false, which a negation turns into true for NULLs too.
    if (node.operator === 'in' && (node.value as string[]).length === 0) return;
    // `is.null` and `is.unknown` let NULL through, `not.is.true` and `not.is.false` too.
    const letsNullThrough = node.value === 'null' || node.value === 'unknown';
    if (node.operator !== 'is' || letsNullThrough === node.negated) facts.notNull.add(name);
  };
  if (tree) visit(tree);
  return facts;
}

/** `is`'s keyword for the value, by own keys only: `is.constructor` must not find Object.prototype's. */
const isKeyword = (value: string | string[]) =>
  typeof value === 'string' && Object.hasOwn(IS_VALUES, value)
    ? IS_VALUES[value as keyof typeof IS_VALUES]
    : undefined;

function conditionSql(node: Condition, column: ColumnInfo, name: string, bind: Bind): string {
  const { operator, value } = node;
  const typed = (v: unknown, suffix = '') => `${bind(v)}::${column.valueType}${suffix}`;
  if (operator in COMPARISONS) {
    return `${name} ${COMPARISONS[operator as keyof typeof COMPARISONS]} ${typed(value)}`;
  }
  if (operator === 'like' || operator === 'ilike') {
    const pattern = bind(String(value).replaceAll('*', '%'));
    return `${name}::pg_catalog.text ${operator === 'like' ? 'LIKE' : 'ILIKE'} ${pattern}::pg_catalog.text`;
  }
  if (operator === 'in') {
    const list = value as string[];
    return list.length === 0 ? 'false' : `${name} = ANY(${typed(list, '[]')})`;
  }
  if (operator === 'is') {
    const keyword = isKeyword(value);
    if (!keyword) throw invalid(`filter on "${column.name}"`, 'is takes null, true, false or unknown');
    return `${name} IS ${keyword}`;
  }
  if (operator === 'cs') return `${name} @> ${typed(value)}`;
  if (operator === 'cd') return `${name} <@ ${typed(value)}`;
  const search = TEXT_SEARCH[operator as keyof typeof TEXT_SEARCH];
  const config = node.config !== undefined ? `${bind(node.config)}::pg_catalog.regconfig, ` : '';
  const document =
    column.type === 'tsvector' ? name : `pg_catalog.to_tsvector(${config}${name}::pg_catalog.text)`;
  return `${document} @@ pg_catalog.${search}(${config}${bind(value)}::pg_catalog.text)`;
}
