/**
 * How the grid shows a table: filters, sort, search, hidden columns, page. It lives in the hash
 * route's query (`#/s/S/t/T?filter=age.gte.18&order=name.desc&page=2&after=…`), so a view can be
 * shared and survives a reload; the grid reads it from there and writes every change back.
 * Pure functions: the URL text in, the view out, and the API's parameters of a view (no browser
 * APIs here, so the unit tests and the service's type check read it as it is).
 */
import { columnRef } from './filters';

export interface SortKey {
  column: string;
  descending: boolean;
}

export interface GridView {
  /** The API's `filter=` texts, ANDed. */
  filters: string[];
  sort: SortKey[];
  q: string;
  hidden: string[];
  page: number;
  limit: number;
  /** The cursor that reached `page` (a previous answer's nextCursor), when it was reached by Next. */
  after?: string;
  /** The last page, read from the end (the order reversed), however many rows come before it. */
  fromEnd?: boolean;
}

export const PAGE_SIZES = [25, 50, 100, 250];
const DEFAULT_LIMIT = 50;

/** Items of a comma list, a double-quoted item kept whole (`"a,b",c`). */
function splitList(text: string): string[] {
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
  items.push(current);
  return items.filter((item) => item !== '');
}

const unquote = (name: string) => (name.startsWith('"') && name.endsWith('"') ? name.slice(1, -1) : name);

function readSort(text: string | null): SortKey[] {
  return splitList(text ?? '').map((item) => {
    const quoted = item.startsWith('"') ? item.indexOf('"', 1) + 1 : 0;
    const [name = '', ...suffixes] = quoted
      ? [item.slice(0, quoted), ...item.slice(quoted + 1).split('.')]
      : item.split('.');
    return { column: unquote(name), descending: suffixes.includes('desc') };
  });
}

export function readView(query: string | undefined): GridView {
  const params = new URLSearchParams(query ?? '');
  const page = Number(params.get('page'));
  const limit = Number(params.get('limit'));
  const after = params.get('after');
  return {
    filters: params.getAll('filter').filter(Boolean),
    sort: readSort(params.get('order')),
    q: params.get('q') ?? '',
    hidden: splitList(params.get('hide') ?? '').map(unquote),
    page: Number.isSafeInteger(page) && page > 1 ? page : 1,
    limit: PAGE_SIZES.includes(limit) ? limit : DEFAULT_LIMIT,
    ...(after && page > 1 ? { after } : {}),
    ...(params.get('last') === '1' ? { fromEnd: true } : {}),
  };
}

export const orderText = (sort: SortKey[]) =>
  sort.map((key) => `${columnRef(key.column)}${key.descending ? '.desc' : ''}`).join(',');

/** The view as the hash's query; what is the default is left out, so a plain grid has none. */
export function writeView(view: GridView): string {
  const params = new URLSearchParams();
  for (const filter of view.filters) params.append('filter', filter);
  if (view.sort.length > 0) params.set('order', orderText(view.sort));
  if (view.q) params.set('q', view.q);
  if (view.hidden.length > 0) params.set('hide', view.hidden.map(columnRef).join(','));
  if (view.limit !== DEFAULT_LIMIT) params.set('limit', String(view.limit));
  if (view.page > 1) params.set('page', String(view.page));
  if (view.page > 1 && view.after) params.set('after', view.after);
  if (view.fromEnd) params.set('last', '1');
  return params.toString();
}

/** A change of what rows match (or their order): back to the first page, with no cursor. */
export const firstPage = (view: GridView, change: Partial<GridView>): GridView => {
  const { after: _, fromEnd: __, ...rest } = view;
  return { ...rest, ...change, page: 1 };
};

/**
 * The order that reads the view's rows from the end: each sort key turned (PostgreSQL's NULLS
 * order turns with it), else the primary key's descending. Undefined without either: no order to
 * turn, so the last page is read by its number.
 */
export function reversedOrder(sort: SortKey[], keyColumns: string[]): string | undefined {
  if (sort.length > 0) return orderText(sort.map((key) => ({ ...key, descending: !key.descending })));
  if (keyColumns.length === 0) return undefined;
  return orderText(keyColumns.map((column) => ({ column, descending: true })));
}

/**
 * The API's parameters for the rows a view shows, shared by the page read and the export. The
 * hidden columns are left out of `select`; `keepKey` keeps the primary key's, so a row stays
 * editable (the grid asks for them, and does not show them).
 */
export function rowsQuery(
  view: GridView,
  columns: { name: string; primaryKey: boolean }[],
  { keepKey }: { keepKey: boolean },
): { filter?: string[]; order?: string; q?: string; select?: string } {
  const hidden = new Set(view.hidden);
  const asked = columns.filter((c) => !hidden.has(c.name) || (keepKey && c.primaryKey));
  const selecting = columns.length > 0 && asked.length < columns.length;
  return {
    filter: view.filters.length > 0 ? view.filters : undefined,
    order: view.sort.length > 0 ? orderText(view.sort) : undefined,
    q: view.q || undefined,
    select: selecting ? asked.map((c) => columnRef(c.name)).join(',') : undefined,
  };
}

/**
 * A header's click: asc → desc → off. Alone it becomes the only sort; `adding` (shift) keeps the
 * others and changes this column in place, or appends it.
 */
export function nextSort(sort: SortKey[], column: string, adding: boolean): SortKey[] {
  const current = sort.find((key) => key.column === column);
  const next: SortKey | undefined = !current
    ? { column, descending: false }
    : current.descending
      ? undefined
      : { column, descending: true };
  if (!adding) return next ? [next] : [];
  if (!current) return [...sort, next as SortKey];
  return sort.flatMap((key) => (key.column !== column ? [key] : next ? [next] : []));
}
