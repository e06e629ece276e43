import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { COLUMN_TYPES } from '../pages/tables';
import { go } from '../router';
import { Dialog, ErrorText, Form, useAction } from '../ui';
import { Progress, type Suggested, suggest } from './import-dialog';
import { formatOf, importFile } from './transfer';

/**
 * New table from a file: the columns the API suggests from the file's start (names, types,
 * nullability, a key), each changeable, and the table's name; Create makes the table and imports
 * the whole file into it, then opens it.
 */

type Draft = Suggested['columns'][number];

/** A table name from a file name: `People 2024.csv` is people_2024. */
const tableNameOf = (file: File) =>
  file.name
    .replace(/\.[^.]*$/, '')
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .replace(/^(\d)/, 't_$1') || 'imported';

function ColumnRow({ column, onChange }: { column: Draft; onChange: (column: Draft) => void }) {
  const types = COLUMN_TYPES.includes(column.type) ? COLUMN_TYPES : [column.type, ...COLUMN_TYPES];
  return (
    <tr>
      <td class="mono">{column.source}</td>
      <td>
        <input
          aria-label={`Name for ${column.source}`}
          value={column.name}
          onInput={(e) => onChange({ ...column, name: e.currentTarget.value })}
        />
      </td>
      <td>
        <select
          aria-label={`Type for ${column.source}`}
          value={column.type}
          onChange={(e) => onChange({ ...column, type: e.currentTarget.value })}
        >
          {types.map((type) => (
            <option key={type}>{type}</option>
          ))}
        </select>
      </td>
      <td>
        <input
          type="checkbox"
          aria-label={`${column.source} may be empty`}
          checked={column.nullable && !column.primaryKey}
          disabled={column.primaryKey}
          onChange={(e) => onChange({ ...column, nullable: e.currentTarget.checked })}
        />
      </td>
      <td>
        <input
          type="checkbox"
          aria-label={`${column.source} is the primary key`}
          checked={column.primaryKey}
          onChange={(e) => onChange({ ...column, primaryKey: e.currentTarget.checked })}
        />
      </td>
    </tr>
  );
}

export function NewTableFromFile({
  schema,
  file,
  onClose,
}: {
  schema: string;
  file: File;
  onClose: () => void;
}) {
  const format = formatOf(file);
  const [name, setName] = useState(tableNameOf(file));
  const [columns, setColumns] = useState<Draft[]>([]);
  const [sent, setSent] = useState(0);
  const [step, setStep] = useState('');
  const stop = useRef(new AbortController());
  const look = useAction(async () => setColumns((await suggest(file, format, true, ',')).columns));
  useEffect(() => {
    look.run();
    return () => stop.current.abort();
  }, []);
  const create = useAction(async () => {
    setStep('Creating the table');
    await api('POST', 'table/create', {
      body: {
        schema,
        tableName: name,
        columns: columns.map((c) => ({
          name: c.name,
          type: c.type,
          nullable: c.nullable && !c.primaryKey,
          primaryKey: c.primaryKey,
        })),
      },
    });
    setStep('Importing the file');
    // In the file's order: the header names them as the file does.
    const options = { format, mode: 'insert' as const, header: true, delimiter: ',' };
    await importFile(
      file,
      { schema, table: name },
      format === 'csv' ? { ...options, columns: columns.map((c) => c.name) } : options,
      setSent,
      stop.current.signal,
    );
    go({ page: 'table', schema, table: name, tab: 'data' });
    onClose();
  });
  return (
    <Dialog title={`New table from ${file.name}`} onClose={onClose}>
      <Form class="change" onSubmit={() => create.run()}>
        <label>
          Table name
          <input value={name} onInput={(e) => setName(e.currentTarget.value)} disabled={create.busy} />
        </label>
        <ErrorText error={look.error} />
        {columns.length > 0 && (
          <table class="grid" aria-label="Its columns">
            <thead>
              <tr>
                <th>In the file</th>
                <th>Column</th>
                <th>Type</th>
                <th>May be empty</th>
                <th>Key</th>
              </tr>
            </thead>
            <tbody>
              {columns.map((column, i) => (
                <ColumnRow
                  key={column.source}
                  column={column}
                  onChange={(changed) => setColumns(columns.map((c, j) => (j === i ? changed : c)))}
                />
              ))}
            </tbody>
          </table>
        )}
        {create.busy && step === 'Importing the file' && (
          <Progress done={sent} total={file.size} what="Import" />
        )}
        {create.busy && <p class="muted">{step}…</p>}
        <ErrorText error={create.error} />
        {create.error && step === 'Importing the file' ? (
          <p class="warning">
            The table {name} was made; the import wrote nothing. Open it, or delete it and try again.
          </p>
        ) : null}
        <div class="actions">
          <button type="button" onClick={onClose}>
            {create.busy ? 'Stop' : 'Cancel'}
          </button>
          <button type="submit" class="primary" disabled={create.busy || columns.length === 0}>
            Create table and import
          </button>
        </div>
      </Form>
    </Dialog>
  );
}
