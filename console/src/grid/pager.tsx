/** Previous / Next and where the page is: "Page 2 of 3 · 119 rows", "about" when the total is an estimate. */
export function Pager({
  page,
  total,
  limit,
  loading,
  last,
  onTurn,
}: {
  page: number;
  /** Undefined until the first answer. */
  total: { rows: number; exact: boolean } | undefined;
  limit: number;
  loading: boolean;
  last: boolean;
  onTurn: (to: number) => void;
}) {
  const pages = Math.max(1, Math.ceil((total?.rows ?? 0) / limit));
  const where =
    !total || loading
      ? 'Loading…'
      : total.exact
        ? `Page ${page} of ${pages} · ${total.rows} ${total.rows === 1 ? 'row' : 'rows'}`
        : `Page ${page} of about ${pages.toLocaleString()} · about ${total.rows.toLocaleString()} rows`;
  return (
    <div class="pager">
      <button type="button" aria-label="Previous page" disabled={page <= 1} onClick={() => onTurn(page - 1)}>
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
    </div>
  );
}
