import { useState } from 'preact/hooks';

/**
 * First / Previous / Next / Last, a page to jump to, and where the page is: "Page 2 of 3 · 119
 * rows", "about" when the total is an estimate, "Last page" when it was read from the end (its
 * number by the estimate is not a place to stand on).
 */
export function Pager({
  page,
  total,
  limit,
  loading,
  last,
  fromEnd,
  onTurn,
  onLast,
}: {
  page: number;
  /** Undefined until the first answer. */
  total: { rows: number; exact: boolean } | undefined;
  limit: number;
  loading: boolean;
  last: boolean;
  fromEnd: boolean;
  onTurn: (to: number) => void;
  onLast: () => void;
}) {
  const pages = Math.max(1, Math.ceil((total?.rows ?? 0) / limit));
  const rows = (n: number) => `${n.toLocaleString()} ${n === 1 ? 'row' : 'rows'}`;
  const where = !total || loading ? 'Loading…' : describe(page, pages, total, fromEnd, rows);
  const [jump, setJump] = useState('');
  const go = () => {
    const to = Number(jump);
    if (Number.isSafeInteger(to) && to >= 1) onTurn(total?.exact ? Math.min(to, pages) : to);
    setJump('');
  };
  const first = page <= 1 && !fromEnd;
  return (
    <div class="pager">
      <button type="button" aria-label="First page" disabled={first} onClick={() => onTurn(1)}>
        «
      </button>
      <button
        type="button"
        aria-label="Previous page"
        disabled={first}
        onClick={() => onTurn(fromEnd ? Math.max(1, pages - 1) : page - 1)}
      >
        ‹ Previous
      </button>
      <span
        data-testid="pager"
        title={total && !total.exact ? "the planner's estimate, not a count" : undefined}
      >
        {where}
      </span>
      <button type="button" aria-label="Next page" disabled={last} onClick={() => onTurn(page + 1)}>
        Next ›
      </button>
      <button
        type="button"
        aria-label="Last page"
        disabled={fromEnd || (last && page >= pages)}
        onClick={onLast}
      >
        »
      </button>
      <form
        class="inline"
        aria-label="Go to page"
        onSubmit={(event) => {
          event.preventDefault();
          go();
        }}
      >
        <input
          aria-label="Page number"
          inputMode="numeric"
          size={5}
          placeholder="page"
          value={jump}
          onInput={(event) => setJump(event.currentTarget.value)}
        />
        <button type="submit">Go</button>
      </form>
    </div>
  );
}

function describe(
  page: number,
  pages: number,
  total: { rows: number; exact: boolean },
  fromEnd: boolean,
  rows: (n: number) => string,
): string {
  if (fromEnd)
    return total.exact
      ? `Page ${pages} of ${pages} · ${rows(total.rows)}`
      : `Last page · about ${rows(total.rows)}`;
  if (total.exact) return `Page ${page} of ${pages} · ${total.rows} ${total.rows === 1 ? 'row' : 'rows'}`;
  return `Page ${page} of about ${pages.toLocaleString()} · about ${total.rows.toLocaleString()} rows`;
}
