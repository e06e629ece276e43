import { useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog, ErrorText, useAction } from '../ui';
import { cellText, type TableStructure } from '../values';
import { readSheet } from './sheet';

/**
 * Pasting rows from a spreadsheet: tab-separated text previewed against the table's columns, then
 * inserted in one request.
 */

const PREVIEW_ROWS = 5;

/** Paste rows from a spreadsheet; a preview says how many rows go in, and into which columns. */
export function PasteRows({
  schema,
  structure,
  onClose,
  onInserted,
}: {
  schema: string;
  structure: TableStructure;
  onClose: () => void;
  onInserted: () => Promise<void>;
}) {
  const [text, setText] = useState('');
  const sheet = (() => {
    if (text.trim() === '') return undefined;
    try {
      return readSheet(text, structure);
    } catch (error) {
      return error as Error;
    }
  })();
  const ready = sheet && !(sheet instanceof Error) ? sheet : undefined;
  const insert = useAction(async () => {
    if (!ready) return;
    await api('POST', `table/${encodeURIComponent(structure.table)}/rows`, {
      body: { rows: ready.rows, schema },
    });
    await onInserted();
    onClose();
  });
  const count = ready?.rows.length ?? 0;
  return (
    <Dialog title={`Paste rows into ${structure.table}`} onClose={onClose}>
      <p class="muted">
        Copy cells from a spreadsheet and paste them here: tab-separated, one row a line. A first line of
        column names says which column each cell goes to; otherwise the cells follow the table's column order
        ({structure.columns.map((c) => c.name).join(', ')}). An empty cell takes the column's default (or
        NULL).
      </p>
      <textarea
        class="paste"
        aria-label="Rows to paste (tab-separated)"
        value={text}
        onInput={(event) => {
          setText(event.currentTarget.value);
          insert.setError(undefined);
        }}
        autoFocus
      />
      {sheet instanceof Error && <ErrorText error={sheet} />}
      {ready && (
        <>
          <p data-testid="paste-summary">
            {count} {count === 1 ? 'row' : 'rows'} will be inserted into {structure.table}
            {ready.header ? ' (the first line names the columns)' : ', in the table’s column order'}.
          </p>
          <div class="grid-wrap">
            <table class="grid" aria-label="Rows to insert">
              <thead>
                <tr>
                  {ready.columns.map((c) => (
                    <th key={c.name}>{c.name}</th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {ready.rows.slice(0, PREVIEW_ROWS).map((row, index) => (
                  <tr key={index}>
                    {ready.columns.map((c) => (
                      <td key={c.name} class={c.name in row ? 'cell' : 'cell null'}>
                        {c.name in row ? cellText(row[c.name]) : 'default'}
                      </td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {count > PREVIEW_ROWS && <p class="muted">and {count - PREVIEW_ROWS} more</p>}
        </>
      )}
      <ErrorText error={insert.error} />
      <div class="actions">
        <button type="button" onClick={onClose}>
          Cancel
        </button>
        <button type="button" class="primary" disabled={!ready || insert.busy} onClick={() => insert.run()}>
          {ready ? `Insert ${count} ${count === 1 ? 'row' : 'rows'}` : 'Insert'}
        </button>
      </div>
    </Dialog>
  );
}
