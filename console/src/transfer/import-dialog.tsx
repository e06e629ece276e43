import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog, ErrorText, Form, useAction } from '../ui';
import type { TableStructure } from '../values';
import { CONTENT_TYPES, type FileFormat, formatOf, type ImportOutcome, importFile } from './transfer';

/**
 * A file into a table: its first rows as the API parses them, which column each of the file's
 * goes to (changeable for CSV), the mode, then the import in parts with a progress bar. A failure
 * shows the API's message, which names the line and column; nothing was written.
 */

/** The start of a file is enough to see its columns and first rows. */
const SAMPLE_BYTES = 256 * 1024;

export interface Suggested {
  columns: { source: string; name: string; type: string; nullable: boolean; primaryKey: boolean }[];
  rows: unknown[][];
  sampled: number;
}

/** The columns and first rows the start of the file suggests (POST /api/import/columns). */
export function suggest(file: File, format: FileFormat, header: boolean, delimiter: string) {
  return api<Suggested>('POST', 'import/columns', {
    query: format === 'csv' ? { header, delimiter } : {},
    body: { blob: file.slice(0, SAMPLE_BYTES), contentType: CONTENT_TYPES[format] },
  });
}

/** The table's column a file's column goes to, as the import matches it: exactly, any case, named. */
function matching(structure: TableStructure, column: Suggested['columns'][number]): string {
  const names = structure.columns.map((c) => c.name);
  return (
    names.find((n) => n === column.source) ??
    names.find((n) => n.toLowerCase() === column.source.trim().toLowerCase()) ??
    names.find((n) => n === column.name) ??
    ''
  );
}

const cell = (value: unknown) =>
  value === null || value === undefined
    ? 'NULL'
    : typeof value === 'object'
      ? JSON.stringify(value)
      : String(value);

export function Progress({ done, total, what }: { done: number; total: number; what: string }) {
  return (
    <div role="status" aria-label={`${what} progress`}>
      <progress max={total || 1} value={done} />
      <span class="muted">
        {' '}
        {what}: {Math.round((100 * done) / (total || 1))}%
      </span>
    </div>
  );
}

export function ImportDialog({
  schema,
  structure,
  file,
  onClose,
  onImported,
}: {
  schema: string;
  structure: TableStructure;
  file: File;
  onClose: () => void;
  onImported: (outcome: ImportOutcome) => void | Promise<void>;
}) {
  const format = formatOf(file);
  const [header, setHeader] = useState(true);
  const [delimiter, setDelimiter] = useState(file.name.toLowerCase().endsWith('.tsv') ? '\t' : ',');
  const [mode, setMode] = useState<'insert' | 'upsert' | 'replace'>('insert');
  const [targets, setTargets] = useState<string[]>([]);
  const [sent, setSent] = useState(0);
  const [outcome, setOutcome] = useState<ImportOutcome | undefined>(undefined);
  const [preview, setPreview] = useState<Suggested | undefined>(undefined);
  const stop = useRef<AbortController | undefined>(undefined);
  const look = useAction(async () => {
    const found = await suggest(file, format, header, delimiter);
    setPreview(found);
    setTargets(found.columns.map((c) => matching(structure, c)));
  });
  useEffect(() => {
    look.run();
  }, [header, delimiter]);
  useEffect(() => () => stop.current?.abort(), []);
  const missing = preview?.columns.filter((_, i) => !targets[i]) ?? [];
  const run = useAction(async () => {
    stop.current = new AbortController();
    setSent(0);
    const done = await importFile(
      file,
      { schema, table: structure.table },
      { format, mode, header, delimiter, ...(format === 'csv' ? { columns: targets } : {}) },
      setSent,
      stop.current.signal,
    );
    setOutcome(done);
    await onImported(done);
  });
  return (
    <Dialog title={`Import ${file.name} into ${structure.table}`} onClose={onClose}>
      <Form class="change" onSubmit={() => run.run()}>
        <p class="muted">
          {format.toUpperCase()}, {(file.size / 1024 / 1024).toFixed(1)} MB
        </p>
        {format === 'csv' && (
          <fieldset class="plain inline-fields" disabled={run.busy}>
            <label class="inline">
              <input type="checkbox" checked={header} onChange={(e) => setHeader(e.currentTarget.checked)} />
              First line names the columns
            </label>
            <label class="inline">
              Delimiter
              <select value={delimiter} onChange={(e) => setDelimiter(e.currentTarget.value)}>
                <option value=",">comma</option>
                <option value=";">semicolon</option>
                <option value={'\t'}>tab</option>
                <option value="|">bar</option>
              </select>
            </label>
          </fieldset>
        )}
        <ErrorText error={look.error} />
        {preview && (
          <div class="grid-wrap">
            <table class="grid" aria-label="The file’s first rows">
              <thead>
                <tr>
                  {preview.columns.map((c, i) => (
                    <th key={c.source}>
                      <span class="mono">{c.source}</span>
                      <select
                        aria-label={`Column for ${c.source}`}
                        value={targets[i]}
                        disabled={format !== 'csv' || run.busy}
                        onChange={(e) =>
                          setTargets(targets.map((t, j) => (j === i ? e.currentTarget.value : t)))
                        }
                      >
                        <option value="">(no such column)</option>
                        {structure.columns.map((column) => (
                          <option key={column.name}>{column.name}</option>
                        ))}
                      </select>
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {preview.rows.slice(0, 5).map((row, r) => (
                  <tr key={String(r)}>
                    {row.map((value, c) => (
                      <td key={String(c)}>{cell(value)}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {missing.length > 0 && (
          <p class="warning">
            {missing.map((c) => c.source).join(', ')}: no column of {structure.table} takes{' '}
            {missing.length === 1 ? 'it' : 'them'}; choose one
            {format === 'csv' ? '' : ', or rename the key in the file'}.
          </p>
        )}
        <label>
          Mode
          <select
            value={mode}
            disabled={run.busy}
            onChange={(e) => setMode(e.currentTarget.value as typeof mode)}
          >
            <option value="insert">insert: add the rows</option>
            <option value="upsert">upsert: update rows with the same primary key, add the others</option>
            <option value="replace">replace: delete every row of the table first</option>
          </select>
        </label>
        {run.busy && <Progress done={sent} total={file.size} what="Import" />}
        <ErrorText error={run.error} />
        {outcome && (
          <p class="success" role="status">
            {outcome.message}.
          </p>
        )}
        <div class="actions">
          <button type="button" onClick={() => (run.busy ? stop.current?.abort() : onClose())}>
            {run.busy ? 'Stop' : outcome ? 'Close' : 'Cancel'}
          </button>
          {!outcome && (
            <button type="submit" class="primary" disabled={run.busy || !preview || missing.length > 0}>
              Import
            </button>
          )}
        </div>
      </Form>
    </Dialog>
  );
}
