/**
 * The selected rows as a bulk change names them: their keys as one `in` filter, and how many, which
 * every confirmation says and every change sends as maxAffected. Pure functions.
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
