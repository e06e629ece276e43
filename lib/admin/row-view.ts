import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Bind } from '#lib/admin/row-filter';
import { type ColumnInfo, columnOf, rowOrder, type TableInfo } from '#lib/db/catalog';
import { quoteCatalogName } from '#lib/db/identifiers';
import { BadRequest } from '#lib/errors';

/**
 * How a page read shows a table beyond its filters: which columns (`select`), in which order
 * (`order`, the primary key appended so the order is total), what the quick search matches (`q`),
 * and the cursor that continues such a page (`after`): the last row's sort values and key, signed,
 * so a cursor that was altered, or that belongs to another order, is refused.
 */

/** An order names at most this many columns (the key's are added to them). */
export const MAX_ORDER_KEYS = 32;

/** A cursor longer than this is not given: a sort value that long ends paging by cursor. */
export const MAX_CURSOR_LENGTH = 8000;

export interface SortKey {
  column: ColumnInfo;
  descending: boolean;
  nullsFirst: boolean;
}

/** Names separated by commas, each plain or double-quoted (`"a,b"`), with a suffix after a dot. */
function splitList(text: string, what: string): string[] {
  const items: string[] = [];
  let current = '';
  let quoted = false;
  for (const char of text) {
    if (char === '"') quoted = !quoted;
    if (char === ',' && !quoted) {
      items.push(current);
      current = '';
    } else current += char;
  }
  if (quoted) throw new BadRequest(`Invalid ${what}`, `${what}: a quoted name does not end`);
  items.push(current);
  return items;
}

/** `"my.col"` or `col`, and what follows it after dots. */
function nameAndSuffixes(item: string, what: string): { name: string; suffixes: string[] } {
  if (item.startsWith('"')) {
    const end = item.indexOf('"', 1);
    const rest = item.slice(end + 1);
    if (rest !== '' && !rest.startsWith('.')) throw new BadRequest(`Invalid ${what}`, `${what}: "${item}"`);
    return { name: item.slice(1, end), suffixes: rest ? rest.slice(1).split('.') : [] };
  }
  const [name = '', ...suffixes] = item.split('.');
  return { name, suffixes };
}

/** `select=a,b`: the columns to answer, in that order; undefined (or `*`) is every column. */
export function parseSelect(text: string | undefined, info: TableInfo): ColumnInfo[] | undefined {
  if (text === undefined || text.trim() === '*') return undefined;
  const seen = new Set<string>();
  return splitList(text, 'select').map((item) => {
    const { name, suffixes } = nameAndSuffixes(item.trim(), 'select');
    if (suffixes.length > 0 || !name)
      throw new BadRequest('Invalid select', `select: "${item}" is not a column name`);
    if (seen.has(name)) throw new BadRequest('Invalid select', `select names "${name}" twice`);
    seen.add(name);
    return columnOf(info, name);
  });
}

/**
 * `order=a.desc.nullslast,b`: the sort, then the primary key's columns not in it, ascending, so no
 * two rows tie. PostgreSQL's defaults: NULLS LAST ascending, NULLS FIRST descending.
 */
export function parseOrder(text: string | undefined, info: TableInfo): SortKey[] {
  const keys: SortKey[] = [];
  const items = text === undefined ? [] : splitList(text, 'order');
  if (items.length > MAX_ORDER_KEYS) {
    throw new BadRequest('Invalid order', `order names ${items.length} columns; at most ${MAX_ORDER_KEYS}`);
  }
  for (const item of items) {
    const key = sortKey(item.trim(), info);
    if (keys.some((k) => k.column.name === key.column.name)) {
      throw new BadRequest('Invalid order', `order names "${key.column.name}" twice`);
    }
    keys.push(key);
  }
  for (const key of info.primaryKey) {
    if (keys.some((k) => k.column.name === key)) continue;
    keys.push({ column: columnOf(info, key), descending: false, nullsFirst: false });
  }
  return keys;
}

/** `col[.asc|.desc][.nullsfirst|.nullslast]`. */
function sortKey(item: string, info: TableInfo): SortKey {
  const { name, suffixes } = nameAndSuffixes(item, 'order');
  const column = columnOf(info, name);
  let descending = false;
  let nulls: boolean | undefined;
  for (const suffix of suffixes) {
    if (suffix === 'asc' || suffix === 'desc') descending = suffix === 'desc';
    else if (suffix === 'nullsfirst' || suffix === 'nullslast') nulls = suffix === 'nullsfirst';
    else
      throw new BadRequest(
        'Invalid order',
        `order: "${suffix}" after "${name}" is none of asc, desc, nullsfirst, nullslast`,
      );
  }
  return { column, descending, nullsFirst: nulls ?? descending };
}

/** Does the order end on the primary key, so that a cursor names exactly one row? */
export const totalOrder = (keys: SortKey[], info: TableInfo) =>
  info.primaryKey.length > 0 && info.primaryKey.every((key) => keys.some((k) => k.column.name === key));

export const orderSql = (keys: SortKey[], alias: string) =>
  keys
    .map(
      ({ column, descending, nullsFirst }) =>
        `${alias}.${quoteCatalogName(column.name)} ${descending ? 'DESC' : 'ASC'} NULLS ${nullsFirst ? 'FIRST' : 'LAST'}`,
    )
    .join(', ');

/**
 * A page's ORDER BY: the keys asked for (which end on the primary key, when there is one), and,
 * without a key to end ties, the row's own place (rowOrder), so that a row is never on two pages
 * or on none.
 */
export function pageOrderSql(keys: SortKey[], info: TableInfo, alias: string): string {
  const ends = info.primaryKey.length > 0 ? [] : rowOrder(info, alias);
  return [...(keys.length > 0 ? [orderSql(keys, alias)] : []), ...ends].join(', ');
}

/** Types the quick search reads as text; a table with none of them is searched in every column. */
const TEXT_LIKE = /^(text|character varying|character|citext|name)(\(\d+\))?$/;

/** `q=text`: rows where a text-like column holds it, case-insensitively (LIKE's wildcards escaped). */
export function searchSql(q: string, info: TableInfo, alias: string, bind: Bind): string {
  const textual = info.columns.filter((c) => TEXT_LIKE.test(c.type));
  const searched = textual.length > 0 ? textual : info.columns;
  if (searched.length === 0) return 'false';
  const pattern = `${bind(`%${q.replace(/[\\%_]/g, '\\$&')}%`)}::pg_catalog.text`;
  return `(${searched
    .map((c) => `${alias}.${quoteCatalogName(c.name)}::pg_catalog.text ILIKE ${pattern}`)
    .join(' OR ')})`;
}

/** What the filter says of every row the page can hold (lib/admin/row-filter's filterFacts). */
export interface RowFacts {
  /** Columns fixed to one value, the value as sent, by the column's name. */
  equal: ReadonlyMap<string, string>;
  /** Columns never NULL there. */
  notNull: ReadonlySet<string>;
}

const NO_FACTS: RowFacts = { equal: new Map(), notNull: new Set() };

/** A sort key as a condition reads it: the expression standing for its column in the row. */
interface KeyTerm {
  key: SortKey;
  term: string;
}

type Typed = (key: SortKey, value: string) => string;

/**
 * Rows strictly after the cursor's row in this order: for each key, the rows equal on the keys
 * before it and after it on this one (NULLs placed as the order places them). One row comparison,
 * which an index on the leading key can seek, when every key runs the same way, the cursor holds
 * no NULL and only the first key may be NULL (then, ascending, its NULL rows come last).
 *
 * What the filter says of the rows (`facts`) narrows it so the index the plan walks can seek: a
 * column it keeps from NULL needs no `IS NULL` branch, and a key it fixes to one value (`eq`) is
 * left out, as the planner leaves it out of the order (else `(qty, id) > (7, x)` under qty = 7
 * walks the key's index from its start: issue 35). Left out only when the cursor's row holds that
 * value, which every cursor of a page under this filter does; that test is of bound values alone,
 * so PostgreSQL settles it while planning and keeps the branch that applies: for a cursor from
 * another filter, the whole comparison with the filter's value in the fixed column's place.
 */
export function afterSql(
  keys: SortKey[],
  values: Array<string | null>,
  alias: string,
  bind: Bind,
  facts: RowFacts = NO_FACTS,
): string {
  const typed: Typed = (key, value) => `${bind(value)}::${key.column.valueType}`;
  const terms = keys.map((sorted) => {
    const key = facts.notNull.has(sorted.column.name)
      ? { ...sorted, column: { ...sorted.column, notNull: true } }
      : sorted;
    const value = facts.equal.get(key.column.name);
    return {
      key,
      term: `${alias}.${quoteCatalogName(key.column.name)}`,
      fixed: value === undefined ? undefined : typed(key, value),
    };
  });
  if (terms.every((t) => t.fixed === undefined)) return afterRow(terms, values, typed);
  const cursorHolds = terms
    .flatMap(({ key, fixed }, i) => {
      if (fixed === undefined) return [];
      const value = values[i] ?? null;
      return [
        `${fixed} IS NOT DISTINCT FROM ${value === null ? `NULL::${key.column.valueType}` : typed(key, value)}`,
      ];
    })
    .join(' AND ');
  const free = terms.flatMap((t, i) => (t.fixed === undefined ? [i] : []));
  const afterFree = afterRow(
    free.map((i) => terms[i] as KeyTerm),
    free.map((i) => values[i] ?? null),
    typed,
  );
  const afterAll = afterNested(
    terms.map(({ key, term, fixed }) => ({ key, term: fixed ?? term })),
    values,
    typed,
  );
  return `(((${cursorHolds}) AND ${afterFree}) OR (NOT (${cursorHolds}) AND ${afterAll}))`;
}

/** The row comparison when comparableAsRow allows it, else the nested conditions. */
function afterRow(terms: KeyTerm[], values: Array<string | null>, typed: Typed): string {
  const [first] = terms;
  if (!first) return 'false';
  const keys = terms.map((t) => t.key);
  if (!comparableAsRow(keys, values)) return afterNested(terms, values, typed);
  const left = terms.map((t) => t.term).join(', ');
  const right = terms.map(({ key }, i) => typed(key, values[i] as string)).join(', ');
  const compared = `(${left}) ${first.key.descending ? '<' : '>'} (${right})`;
  return first.key.descending || first.key.column.notNull
    ? compared
    : `(${compared} OR ${first.term} IS NULL)`;
}

/**
 * Nested, so its size grows with the keys, not with their square:
 * k1 beyond OR (k1 = v1 AND (k2 beyond OR (k2 = v2 AND ...))).
 */
function afterNested(terms: KeyTerm[], values: Array<string | null>, typed: Typed): string {
  let condition = '';
  for (let i = terms.length - 1; i >= 0; i--) {
    const { key, term } = terms[i] as KeyTerm;
    const value = values[i] ?? null;
    const bound = value === null ? null : typed(key, value);
    const beyond = beyondOne(key, term, bound);
    const equal = bound === null ? `${term} IS NULL` : `${term} = ${bound}`;
    condition = condition ? `(${beyond} OR (${equal} AND ${condition}))` : beyond;
  }
  return condition || 'false';
}

/** Every key runs the same way with PostgreSQL's NULL placement, the cursor holds no NULL, and only the first key may be NULL. */
function comparableAsRow(keys: SortKey[], values: Array<string | null>): boolean {
  const [first, ...rest] = keys;
  return (
    first !== undefined &&
    rest.length > 0 &&
    values.every((v) => v !== null) &&
    keys.every((k) => k.descending === first.descending && k.nullsFirst === first.descending) &&
    rest.every((k) => k.column.notNull)
  );
}

/** Rows after `bound` (a placeholder, or null for NULL) on one key, NULLs placed as the key places them. */
function beyondOne(key: SortKey, column: string, bound: string | null): string {
  if (bound === null) return key.nullsFirst ? `${column} IS NOT NULL` : 'false';
  const beyond = `${column} ${key.descending ? '<' : '>'} ${bound}`;
  return key.nullsFirst || key.column.notNull ? beyond : `(${beyond} OR ${column} IS NULL)`;
}

/** What a cursor is valid for: the table and the order it was made under. */
const cursorScope = (info: TableInfo, keys: SortKey[]) =>
  JSON.stringify([info.schema, info.table, keys.map((k) => [k.column.name, k.descending, k.nullsFirst])]);

const signature = (secret: string, scope: string, payload: string) =>
  createHmac('sha256', `dbadmin row cursor\0${secret}`)
    .update(`${scope}\0${payload}`)
    .digest()
    .subarray(0, 16);

/** The last row's sort values (as text, or null) as an opaque, signed cursor. */
export function encodeCursor(
  secret: string,
  info: TableInfo,
  keys: SortKey[],
  values: Array<string | null>,
): string {
  const payload = Buffer.from(JSON.stringify(values)).toString('base64url');
  return `${payload}.${signature(secret, cursorScope(info, keys), payload).toString('base64url')}`;
}

/** A cursor's values, when it was made by us for this table and order; else 400. */
export function decodeCursor(
  secret: string,
  info: TableInfo,
  keys: SortKey[],
  cursor: string,
): Array<string | null> {
  const refused = () =>
    new BadRequest(
      'Invalid cursor',
      'after is not a nextCursor this table gave for this order; start again from the first page',
    );
  const [payload = '', mac = '', ...rest] = cursor.split('.');
  const expected = signature(secret, cursorScope(info, keys), payload);
  const given = Buffer.from(mac, 'base64url');
  if (rest.length > 0 || given.length !== expected.length || !timingSafeEqual(given, expected))
    throw refused();
  const values = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as unknown;
  if (
    !Array.isArray(values) ||
    values.length !== keys.length ||
    !values.every((v) => v === null || typeof v === 'string')
  ) {
    throw refused();
  }
  return values as Array<string | null>;
}
