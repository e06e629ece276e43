import { useEffect, useState } from 'preact/hooks';
import { type BulkTarget, matchingRows, rowsText, selectedRows } from './selection';

/**
 * The grid's selection for bulk changes: the rows ticked on the page, or every row the view's
 * filter finds (as many as were counted exactly); cleared when another page is read, so rows of
 * another page are never changed by accident.
 */
export function useBulkSelection(
  view: { filters: string[]; q: string },
  keyColumn: string | undefined,
  data: { total: number; totalExact?: boolean } | undefined,
  reading: unknown,
) {
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [allMatching, setAllMatching] = useState(false);
  const clearSelection = () => {
    setSelected(new Set());
    setAllMatching(false);
  };
  // A new page read clears it.
  useEffect(clearSelection, [reading]);
  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
    setAllMatching(false);
  };
  const selectPage = (ids: string[]) => {
    setSelected(new Set(ids));
    setAllMatching(false);
  };
  const matching = data?.totalExact ? data.total : undefined;
  const target: BulkTarget | undefined =
    allMatching && matching !== undefined
      ? matchingRows(view, matching)
      : keyColumn && selected.size > 0
        ? selectedRows(keyColumn, [...selected])
        : undefined;
  /** How many rows a bulk change would touch. */
  const chosen = target?.count ?? 0;
  return {
    selected,
    allMatching,
    setAllMatching,
    matching,
    target,
    chosen,
    toggle,
    selectPage,
    clearSelection,
  };
}

/**
 * Past the page's own rows: once every row of the page is ticked, the offer to select every row
 * the filter finds (as many as were counted, which the change then sends as maxAffected); once
 * chosen, how many, and the way back. Offered only when the rows were counted exactly: a big
 * table's estimate is no count to hold a change to.
 */
export function SelectAllMatching({
  offered,
  pageRows,
  selected,
  matching,
  allMatching,
  filtered,
  onAll,
  onClear,
}: {
  /** Whoever may write, in a table with a key. */
  offered: boolean;
  /** The rows of the page shown; undefined while none is. */
  pageRows: number | undefined;
  selected: number;
  /** The rows the filter finds, counted; undefined when only estimated. */
  matching: number | undefined;
  allMatching: boolean;
  filtered: boolean;
  onAll: () => void;
  onClear: () => void;
}) {
  if (!offered || !pageRows) return null;
  const where = filtered ? 'matching this filter' : 'in the table';
  if (allMatching && matching !== undefined) {
    return (
      <p class="selection-note" data-testid="select-all-matching">
        All {rowsText(matching)} {where} are selected.{' '}
        <button type="button" class="link" onClick={onClear}>
          Clear the selection
        </button>
      </p>
    );
  }
  if (matching === undefined || selected < pageRows || matching <= selected) return null;
  return (
    <p class="selection-note" data-testid="select-all-matching">
      The {rowsText(selected)} on this page are selected.{' '}
      <button type="button" class="link" onClick={onAll}>
        Select all {rowsText(matching)} {where}
      </button>
    </p>
  );
}
