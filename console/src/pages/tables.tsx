import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { href } from '../router';
import { NewTableFromFile } from '../transfer/new-table';
import { DropZone, FileButton } from '../transfer/transfer-buttons';
import { ConfirmByName, Dialog, ErrorText, Form, useAction, useLoad } from '../ui';
import { EnumTypes, Views } from './schema-objects';

/**
 * A schema's tables: listed, and made from a form of columns (the column types the API allows).
 */

export const COLUMN_TYPES = [
  'SERIAL',
  'BIGSERIAL',
  'INTEGER',
  'BIGINT',
  'SMALLINT',
  'NUMERIC',
  'REAL',
  'DOUBLE PRECISION',
  'BOOLEAN',
  'TEXT',
  'VARCHAR',
  'CHAR',
  'DATE',
  'TIME',
  'TIMESTAMP',
  'TIMESTAMPTZ',
  'UUID',
  'JSON',
  'JSONB',
  'BYTEA',
];
const HAS_LENGTH = new Set(['VARCHAR', 'CHAR']);

interface ColumnDraft {
  name: string;
  type: string;
  length: string;
  nullable: boolean;
  primaryKey: boolean;
  defaultValue: string;
}

export const blankColumn = (): ColumnDraft => ({
  name: '',
  type: 'TEXT',
  length: '',
  nullable: true,
  primaryKey: false,
  defaultValue: '',
});

export function columnBody(column: ColumnDraft) {
  return {
    ...(column.length && HAS_LENGTH.has(column.type) ? { length: Number(column.length) } : {}),
    nullable: column.nullable && !column.primaryKey,
    ...(column.defaultValue ? { defaultValue: column.defaultValue } : {}),
  };
}

/** One column's inputs: name, type, length, nullable, default (and primary key when creating). */
export function ColumnFields({
  column,
  index,
  onChange,
  withPrimaryKey,
  enumTypes = [],
}: {
  column: ColumnDraft;
  index: number;
  onChange: (column: ColumnDraft) => void;
  withPrimaryKey: boolean;
  /** The schema's enum types, offered after the built-in types. */
  enumTypes?: string[];
}) {
  const set = (patch: Partial<ColumnDraft>) => onChange({ ...column, ...patch });
  return (
    <fieldset class="column-fields" aria-label={`Column ${index + 1}`}>
      <input
        aria-label="Column name"
        placeholder="name"
        value={column.name}
        onInput={(e) => set({ name: e.currentTarget.value })}
        required
      />
      <select
        aria-label="Column type"
        value={column.type}
        onChange={(e) => set({ type: e.currentTarget.value })}
      >
        {COLUMN_TYPES.map((type) => (
          <option key={type}>{type}</option>
        ))}
        {enumTypes.length > 0 && (
          <optgroup label="Enum types of the schema">
            {enumTypes.map((type) => (
              <option key={`enum:${type}`} value={type}>
                {type}
              </option>
            ))}
          </optgroup>
        )}
      </select>
      <input
        aria-label="Length"
        placeholder="length"
        type="number"
        min="1"
        disabled={!HAS_LENGTH.has(column.type)}
        value={column.length}
        onInput={(e) => set({ length: e.currentTarget.value })}
      />
      <input
        aria-label="Default"
        placeholder="default"
        value={column.defaultValue}
        onInput={(e) => set({ defaultValue: e.currentTarget.value })}
      />
      <label class="inline">
        <input
          type="checkbox"
          checked={column.nullable && !column.primaryKey}
          disabled={column.primaryKey}
          onChange={(e) => set({ nullable: e.currentTarget.checked })}
        />
        nullable
      </label>
      {withPrimaryKey && (
        <label class="inline">
          <input
            type="checkbox"
            checked={column.primaryKey}
            onChange={(e) => set({ primaryKey: e.currentTarget.checked })}
          />
          primary key
        </label>
      )}
    </fieldset>
  );
}

function CreateTable({ schema, onCreated }: { schema: string; onCreated: () => Promise<void> }) {
  const [name, setName] = useState('');
  const [columns, setColumns] = useState<ColumnDraft[]>([
    { ...blankColumn(), name: 'id', type: 'SERIAL', primaryKey: true, nullable: false },
  ]);
  const create = useAction(async () => {
    await api('POST', 'table/create', {
      body: {
        tableName: name,
        schema,
        columns: columns.map((column) => ({
          name: column.name,
          type: column.type,
          primaryKey: column.primaryKey,
          ...columnBody(column),
        })),
      },
    });
    setName('');
    setColumns([{ ...blankColumn(), name: 'id', type: 'SERIAL', primaryKey: true, nullable: false }]);
    await onCreated();
  });
  return (
    <Form class="card" aria-label="Create a table" onSubmit={() => create.run()}>
      <h2>Create a table</h2>
      <label>
        Table name
        <input name="tableName" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
      </label>
      {columns.map((column, index) => (
        <div class="column-row" key={index}>
          <ColumnFields
            column={column}
            index={index}
            withPrimaryKey
            onChange={(next) => setColumns(columns.map((c, i) => (i === index ? next : c)))}
          />
          <button
            type="button"
            class="small"
            aria-label={`Remove column ${index + 1}`}
            disabled={columns.length === 1}
            onClick={() => setColumns(columns.filter((_, i) => i !== index))}
          >
            ✕
          </button>
        </div>
      ))}
      <button type="button" onClick={() => setColumns([...columns, blankColumn()])}>
        Add a column
      </button>
      <ErrorText error={create.error} />
      <button type="submit" class="primary" disabled={create.busy}>
        Create table
      </button>
    </Form>
  );
}

function CloneTable({
  schema,
  table,
  onClose,
  onCloned,
}: {
  schema: string;
  table: string;
  onClose: () => void;
  onCloned: () => Promise<void>;
}) {
  const [name, setName] = useState(`${table}_copy`);
  const [copyData, setCopyData] = useState(true);
  const clone = useAction(async () => {
    await api('POST', `table/${encodeURIComponent(table)}/clone`, {
      body: { newTableName: name, copyData, schema },
    });
    await onCloned();
    onClose();
  });
  return (
    <Dialog title={`Clone ${table}`} onClose={onClose}>
      <Form onSubmit={() => clone.run()}>
        <label>
          New table name
          <input value={name} onInput={(e) => setName(e.currentTarget.value)} required autoFocus />
        </label>
        <label class="inline">
          <input type="checkbox" checked={copyData} onChange={(e) => setCopyData(e.currentTarget.checked)} />
          copy the rows too
        </label>
        <ErrorText error={clone.error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={clone.busy}>
            Clone
          </button>
        </div>
      </Form>
    </Dialog>
  );
}

export function TablesPage({ schema }: { schema: string }) {
  const tables = useLoad(() => api<string[]>('GET', 'tables', { query: { schema } }), [schema]);
  const [cloning, setCloning] = useState<string | undefined>(undefined);
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const [cascade, setCascade] = useState(false);
  const [fromFile, setFromFile] = useState<File | undefined>(undefined);
  const alters = may('alter');
  // A new table from a file is made, then filled with the file's rows.
  const imports = alters && may('write');
  return (
    <section class="page">
      <h1>
        Tables of <span class="mono">{schema}</span>
      </h1>
      <ErrorText error={tables.error} />
      <ul class="list">
        {(tables.data ?? []).map((table) => (
          <li key={table}>
            <a href={href({ page: 'table', schema, table, tab: 'data' })}>{table}</a>
            <span class="row-actions">
              <a href={href({ page: 'table', schema, table, tab: 'structure' })}>Structure</a>
              {alters && (
                <>
                  <button type="button" class="small" onClick={() => setCloning(table)}>
                    Clone
                  </button>
                  <button type="button" class="danger small" onClick={() => setDeleting(table)}>
                    Delete
                  </button>
                </>
              )}
            </span>
          </li>
        ))}
        {tables.data?.length === 0 && <li class="muted">No tables yet.</li>}
      </ul>
      {imports && (
        <DropZone label="Drop a file to make a new table of it" onFile={setFromFile}>
          <p class="muted drop-hint">
            New table from a file: drop a CSV, JSON or NDJSON file here, or{' '}
            <FileButton label="New table from a file" onFile={setFromFile} />
          </p>
        </DropZone>
      )}
      {fromFile && (
        <NewTableFromFile
          schema={schema}
          file={fromFile}
          onClose={() => {
            setFromFile(undefined);
            tables.reload();
          }}
        />
      )}
      {alters && <CreateTable schema={schema} onCreated={tables.reload} />}
      <EnumTypes schema={schema} />
      <Views key={tables.data?.join('\u0000')} schema={schema} />
      {cloning && (
        <CloneTable
          schema={schema}
          table={cloning}
          onClose={() => setCloning(undefined)}
          onCloned={tables.reload}
        />
      )}
      {deleting && (
        <ConfirmByName
          what="table"
          name={deleting}
          onClose={() => {
            setDeleting(undefined);
            setCascade(false);
          }}
          onConfirm={async () => {
            // Without cascade the API refuses a table others depend on, and names them.
            await api('DELETE', `table/${encodeURIComponent(deleting)}`, {
              query: { schema, cascade: cascade || undefined },
            });
            await tables.reload();
          }}
        >
          <label class="inline">
            <input type="checkbox" checked={cascade} onChange={(e) => setCascade(e.currentTarget.checked)} />
            also drop the views and foreign keys that depend on it (cascade)
          </label>
        </ConfirmByName>
      )}
    </section>
  );
}
