import { useRef } from 'preact/hooks';
import { api } from '../api';
import { useLoad } from '../ui';
import type { Column } from '../values';
import { type GridView, reversedOrder, rowsQuery } from './view';

/**
 * The grid's page of rows: read for the view in the URL (filters, order, page size, cursor), with
 * the count only when the page needs it.
 */

export type Row = Record<string, unknown>;

export interface Page {
  data: Row[];
  columns: string[];
  /** Null when asked not to count (count=false). */
  total: number | null;
  /** False when total is the planner's estimate (big tables) rather than a count. */
  totalExact: boolean;
  page: number;
  /** Null on the last page (and, without filter or order, for tables without a single-column key). */
  nextCursor: string | null;
}

/**
 * The page of rows a view shows (GET /api/table/:t with its filters, order, select, q, page and
 * cursor), with the count kept from the last time it was taken, and the cursors that reached each
 * page so far, so Previous seeks the way Next did.
 */
export function usePageRead(schema: string, table: string, view: GridView, columns: Column[]) {
  const query = rowsQuery(view, columns, { keepKey: true });
  // The rows are counted again when what matches changes, not on page turns or a new order:
  // counting a big table costs as much as reading it.
  const matching = JSON.stringify([query.filter, query.q]);
  const reading = JSON.stringify([query, view.page, view.limit, view.after, view.fromEnd]);
  // The last page from the end: the order turned, its first page read, its rows turned back.
  const keyColumns = columns.filter((c) => c.primaryKey);
  const fromEnd = view.fromEnd
    ? reversedOrder(
        view.sort,
        keyColumns.map((c) => c.name),
      )
    : undefined;
  const total = useRef<{ matching: string; rows: number; exact: boolean } | undefined>(undefined);
  const cursors = useRef<{ order: string; after: Map<number, string> }>({ order: '', after: new Map() });
  const order = JSON.stringify([query.filter, query.q, query.order, view.limit]);
  if (cursors.current.order !== order) cursors.current = { order, after: new Map() };
  if (view.after) cursors.current.after.set(view.page, view.after);

  const page = useLoad(async () => {
    const counting = total.current?.matching !== matching;
    const answer = await api<Page>('GET', `table/${encodeURIComponent(table)}`, {
      query: {
        schema,
        ...query,
        ...(fromEnd ? { order: fromEnd, page: 1 } : { page: view.page, after: view.after }),
        limit: view.limit,
        count: counting ? undefined : false,
      },
    });
    if (counting) total.current = { matching, rows: answer.total ?? 0, exact: answer.totalExact };
    const rows = fromEnd ? [...answer.data].reverse() : answer.data;
    const counted = { total: total.current?.rows ?? 0, totalExact: total.current?.exact ?? true };
    return { ...answer, data: rows, nextCursor: fromEnd ? null : answer.nextCursor, ...counted, reading };
  }, [schema, table, reading]);

  const data = page.data;
  // Until the answer of this view's read is in, the page shown is the previous view's.
  const settled = !page.loading && data?.reading === reading;
  const pages = data ? Math.max(1, Math.ceil(data.total / view.limit)) : 1;
  // Where the answer pages by cursor, a missing nextCursor is the end; else the total says.
  const searching = !!(query.filter || query.q || query.order);
  const byCursor = keyColumns.length === 1 || (keyColumns.length > 1 && searching);
  return {
    ...page,
    /** Changes with every read: what the grid selected belongs to the page before. */
    reading,
    pages,
    settled,
    last: !settled || !data || !!fromEnd || (data.nextCursor === null && (byCursor || view.page >= pages)),
    /** Read from the end, by the order turned. */
    fromEnd: !!fromEnd,
    /** Reads the page again, counting the rows again (after the grid changed them). */
    recount: () => {
      total.current = undefined;
      return page.reload();
    },
    /** The view of page `to`: by the answer's cursor to the next, by a known cursor or number to others. */
    turn: (to: number): GridView => {
      const { fromEnd: _, ...rest } = view;
      if (view.fromEnd) return { ...rest, page: to, after: cursors.current.after.get(to) };
      return {
        ...rest,
        page: to,
        after: to === view.page + 1 ? (data?.nextCursor ?? undefined) : cursors.current.after.get(to),
      };
    },
    /** The last page: from the end where the order can be turned, else by its number. */
    toLast: (): GridView => {
      const { after: _, ...rest } = view;
      const canTurn = reversedOrder(
        view.sort,
        keyColumns.map((c) => c.name),
      );
      return canTurn ? { ...rest, page: pages, fromEnd: true } : { ...rest, page: pages, fromEnd: false };
    },
  };
}
