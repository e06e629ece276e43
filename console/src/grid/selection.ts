/**
 * The selected rows as a bulk change names them: their keys as one `in` filter, or every row the
 * view's filter finds; and how many, which every confirmation says and every change sends as
 * maxAffected. Pure functions.
 */
import { writeInFilter } from './filters';

/** `N row(s)`, as confirmations and their buttons say it. */
export const rowsText = (count: number) => `${count.toLocaleString('en-US')} ${count === 1 ? 'row' : 'rows'}`;

/**
 * The query of PATCH /api/table/:t/rows that changes exactly the selected rows: their keys in one
 * filter, and maxAffected, so the server refuses (409, nothing changed) if more rows would change.
 */
export function selectedRowsQuery(keyColumn: string, ids: string[]): { filter: string; maxAffected: number } {
  return { filter: writeInFilter(keyColumn, ids), maxAffected: ids.length };
}

/** What a bulk change acts on: the query naming its rows (maxAffected included), and how many. */
export interface BulkTarget {
  query: Record<string, string | string[] | number | undefined>;
  count: number;
  /** "selected", or "matching the filter": how the confirmation names them. */
  named: string;
}

export const selectedRows = (keyColumn: string, ids: string[]): BulkTarget => ({
  query: selectedRowsQuery(keyColumn, ids),
  count: ids.length,
  named: 'selected',
});

/**
 * Every row the view's filters and search find, as many as were counted: the server changes none
 * (409) if the filter finds more by then, so a row added in between is never touched unseen.
 * Without a filter or a search, every row of the table (`all`, which the API asks for).
 */
export function matchingRows(view: { filters: string[]; q: string }, count: number): BulkTarget {
  const filtered = view.filters.length > 0 || view.q !== '';
  return {
    query: {
      filter: view.filters.length > 0 ? view.filters : undefined,
      q: view.q || undefined,
      all: filtered ? undefined : 'true',
      maxAffected: count,
    },
    count,
    named: filtered ? 'matching the filter' : 'in the table',
  };
}
