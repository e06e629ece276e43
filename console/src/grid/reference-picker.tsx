import { useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog, ErrorText, useAction, useLoad } from '../ui';
import { cellText } from '../values';
import { SearchBox } from './filter-bar';
import { columnRef } from './filters';
import { pickerColumns, type Reference } from './references';

/** The most rows the picker lists: a search narrows them. */
const PICKER_ROWS = 20;

/**
 * Picks a row of the table a foreign key references: its first rows, or those whose text columns
 * hold what is searched (`q=`), each shown by the referenced column and a few text columns. A
 * pick hands over the referenced column's value; "Type a value" leaves for the plain editor.
 */
export function ReferencePicker({
  schema,
  reference,
  current,
  nullable,
  onPick,
  onType,
  onClose,
}: {
  schema: string;
  reference: Reference;
  /** The value the cell holds now, marked in the list. */
  current: unknown;
  nullable: boolean;
  onPick: (value: unknown) => Promise<void>;
  onType?: () => void;
  onClose: () => void;
}) {
  const { foreignKey, table } = reference;
  const shown = pickerColumns(reference);
  const [q, setQ] = useState('');
  const rows = useLoad(
    () =>
      api<{ data: Record<string, unknown>[] }>('GET', `table/${encodeURIComponent(table.table)}`, {
        query: {
          schema,
          q: q || undefined,
          limit: PICKER_ROWS,
          select: shown.map(columnRef).join(','),
          count: false,
        },
      }),
    [schema, table.table, q],
  );
  const pick = useAction(async (value: unknown) => {
    await onPick(value);
    onClose();
  });
  const key = foreignKey.referencedColumn;
  const currentText = current === null || current === undefined ? undefined : cellText(current);
  const found = rows.data?.data ?? [];
  return (
    <Dialog title={`Pick a row of ${table.table}`} onClose={onClose}>
      <p class="muted">
        {foreignKey.column} references {table.table}.{key}. Search its text columns, then pick a row.
      </p>
      <SearchBox
        q={q}
        onSearch={setQ}
        label={`Search ${table.table}`}
        placeholder={shown.length > 1 ? `Search ${shown.slice(1).join(', ')}…` : 'Search…'}
        autoFocus
      />
      <ErrorText error={rows.error ?? pick.error} />
      <ul class="picker" aria-label={`Rows of ${table.table}`} aria-busy={rows.loading}>
        {found.map((row) => {
          const value = row[key];
          const text = cellText(value);
          return (
            <li key={text}>
              <button
                type="button"
                class={text === currentText ? 'pick current' : 'pick'}
                aria-current={text === currentText ? 'true' : undefined}
                disabled={pick.busy}
                onClick={() => pick.run(value)}
              >
                <span class="mono">{text}</span>
                {shown.slice(1).map((name) => (
                  <span key={name} class={row[name] === null ? 'muted' : undefined}>
                    {row[name] === null ? 'NULL' : cellText(row[name])}
                  </span>
                ))}
              </button>
            </li>
          );
        })}
      </ul>
      {rows.data && found.length === 0 && <p class="muted">No rows{q ? ` hold “${q}”` : ''}.</p>}
      {found.length === PICKER_ROWS && (
        <p class="muted">The first {PICKER_ROWS} rows: search to find others.</p>
      )}
      <div class="actions">
        {onType && (
          <button type="button" class="link" onClick={onType}>
            Type a value
          </button>
        )}
        {nullable && (
          <button type="button" disabled={pick.busy} onClick={() => pick.run(null)}>
            Set NULL
          </button>
        )}
        <span class="spacer" />
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </Dialog>
  );
}
