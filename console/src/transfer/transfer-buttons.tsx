import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { type Query, saveFile } from '../api';
import { Dialog, ErrorText, useAction } from '../ui';
import type { TableStructure } from '../values';
import { ImportDialog, Progress } from './import-dialog';
import { exportAll } from './transfer';

/**
 * The grid's file buttons: Export CSV or JSON of every row the view finds (page after page, with
 * a progress bar and Stop), Import a file (also dropped anywhere on the grid).
 */

function ExportDialog({
  schema,
  table,
  format,
  spreadsheetSafe,
  query,
  total,
  keyed,
  onClose,
}: {
  schema: string;
  table: string;
  format: 'csv' | 'json';
  /** CSV: cells a spreadsheet would run as formulas start with `'` (the API's spreadsheetSafe). */
  spreadsheetSafe: boolean;
  query: Query;
  /** The rows the view finds (maybe the planner's estimate), for the progress bar. */
  total: number;
  /** Without a primary key the export has no cursor: it stops at its first 10,000 rows. */
  keyed: boolean;
  onClose: () => void;
}) {
  const [rows, setRows] = useState(0);
  const [cut, setCut] = useState(false);
  const stop = useRef(new AbortController());
  const run = useAction(async () => {
    const asked = format === 'csv' && spreadsheetSafe ? { ...query, spreadsheetSafe: true } : query;
    const file = await exportAll({ schema, table }, format, asked, setRows, stop.current.signal);
    saveFile(file, `${table}.${format}`);
    // A table with no key and more rows than one page: the file holds the first page only; say so.
    if (!keyed && total > 10_000) setCut(true);
    else onClose();
  });
  useEffect(() => {
    run.run();
    return () => stop.current.abort();
  }, []);
  const stopped = stop.current.signal.aborted;
  return (
    <Dialog title={`Export ${table} as ${format.toUpperCase()}`} onClose={onClose}>
      <Progress done={rows} total={Math.max(total, rows)} what="Export" />
      <p class="muted" data-testid="export-rows">
        {rows.toLocaleString()} of {total > rows ? `about ${total.toLocaleString()}` : rows.toLocaleString()}{' '}
        rows
      </p>
      {!stopped && <ErrorText error={run.error} />}
      {cut && (
        <p class="warning" role="alert">
          {table} has no primary key, so no page can follow another: the file holds its first 10,000 rows
          only. Add a key (Structure, Primary key…) to export every row.
        </p>
      )}
      <div class="actions">
        <button
          type="button"
          onClick={() => {
            stop.current.abort();
            onClose();
          }}
        >
          {run.busy ? 'Stop' : 'Close'}
        </button>
      </div>
    </Dialog>
  );
}

/** The CSV choice, kept per browser: on unless the person turned it off. */
const SPREADSHEET_SAFE = 'dbadmin.export.spreadsheetSafe';
const rememberedSpreadsheetSafe = () => localStorage.getItem(SPREADSHEET_SAFE) !== 'off';

export function ExportButtons(props: {
  schema: string;
  table: string;
  query: Query;
  total: number;
  keyed: boolean;
}) {
  const [format, setFormat] = useState<'csv' | 'json' | undefined>(undefined);
  const [spreadsheetSafe, setSpreadsheetSafe] = useState(rememberedSpreadsheetSafe);
  return (
    <>
      <button type="button" onClick={() => setFormat('csv')}>
        Export CSV
      </button>
      <label
        class="inline"
        title="Cells that start with = + - @, a tab or a line break get a leading ' so a spreadsheet shows them instead of running them as formulas. Untick to keep every value exactly, for re-import."
      >
        <input
          type="checkbox"
          checked={spreadsheetSafe}
          onChange={(event) => {
            const on = event.currentTarget.checked;
            setSpreadsheetSafe(on);
            localStorage.setItem(SPREADSHEET_SAFE, on ? 'on' : 'off');
          }}
        />
        for spreadsheets
      </label>
      <button type="button" onClick={() => setFormat('json')}>
        Export JSON
      </button>
      {format && (
        <ExportDialog
          {...props}
          format={format}
          spreadsheetSafe={spreadsheetSafe}
          onClose={() => setFormat(undefined)}
        />
      )}
    </>
  );
}

/** A file input behind a button: the file chosen goes to `onFile`. */
export function FileButton({ label, onFile }: { label: string; onFile: (file: File) => void }) {
  const input = useRef<HTMLInputElement>(null);
  return (
    <>
      <button type="button" onClick={() => input.current?.click()}>
        {label}
      </button>
      <input
        ref={input}
        type="file"
        accept=".csv,.tsv,.json,.ndjson,.jsonl,text/csv,application/json"
        hidden
        aria-label={label}
        onChange={(event) => {
          const file = event.currentTarget.files?.[0];
          event.currentTarget.value = '';
          if (file) onFile(file);
        }}
      />
    </>
  );
}

/** Where a file may be dropped: `onFile` gets it; the area says so while one is dragged over it. */
export function DropZone({
  onFile,
  label,
  children,
}: {
  onFile: (file: File) => void;
  label: string;
  children: ComponentChildren;
}) {
  const [over, setOver] = useState(false);
  return (
    <section
      class={`drop-zone${over ? ' over' : ''}`}
      aria-label={label}
      onDragOver={(event) => {
        if (!event.dataTransfer?.types.includes('Files')) return;
        event.preventDefault();
        setOver(true);
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(event) => {
        const file = event.dataTransfer?.files[0];
        setOver(false);
        if (!file) return;
        event.preventDefault();
        onFile(file);
      }}
    >
      {children}
    </section>
  );
}

/** Import into the table: a file chosen or dropped opens the import dialog. */
export function useImport(
  schema: string,
  structure: TableStructure | undefined,
  onImported: () => Promise<void>,
) {
  const [file, setFile] = useState<File | undefined>(undefined);
  const dialog =
    file && structure ? (
      <ImportDialog
        schema={schema}
        structure={structure}
        file={file}
        onClose={() => setFile(undefined)}
        onImported={onImported}
      />
    ) : null;
  return { open: setFile, dialog };
}
