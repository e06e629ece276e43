import { useEffect, useRef, useState } from 'preact/hooks';
import { api, download } from '../api';
import { href } from '../router';
import { loadStructure } from '../structure';
import { Dialog, ErrorText, messageOf, useAction, useLoad } from '../ui';
import {
  type Column,
  cellText,
  editorText,
  inputKind,
  parseInput,
  primaryKeyOf,
  readOnlyReason,
  type TableStructure,
} from '../values';
import { ColumnFields, columnBody } from './tables';

type Row = Record<string, unknown>;
interface Page {
  data: Row[];
  columns: string[];
  /** Null when asked not to count (count=false). */
  total: number | null;
  /** False when total is the planner's estimate (big tables) rather than a count. */
  totalExact: boolean;
  page: number;
  /** Null on the last page (and for tables without a single-column primary key). */
  nextCursor: string | null;
}

const PAGE_SIZES = [25, 50, 100, 250];
/** The export endpoint's most rows per file. */
const EXPORT_LIMIT = 10_000;

/**
 * One cell: Enter or double-click edits. In the editor Enter saves that cell (nothing is sent when
 * the text is unchanged), Esc leaves without sending anything, and the NULL button saves NULL. A
 * failed save keeps the editor open with what was typed, and the message under it.
 */
function Cell({
  value,
  column,
  editable,
  save,
}: {
  value: unknown;
  column: Column | undefined;
  editable: boolean;
  save: (value: unknown) => Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [saving, setSaving] = useState(false);
  const original = editorText(column, value);
  const open = () => {
    if (!editable) return;
    setText(original);
    setError(undefined);
    setEditing(true);
  };
  const close = () => {
    setEditing(false);
    setError(undefined);
  };
  const commit = async (explicit?: null) => {
    if (!column) return;
    if (explicit === undefined && text === original) return close();
    setSaving(true);
    try {
      await save(explicit === null ? null : parseInput(column, text));
      close();
    } catch (failure) {
      setError(failure); // the editor stays open with what was typed
    } finally {
      setSaving(false);
    }
  };
  if (editing) {
    return (
      <td class={error ? 'cell editing failed' : 'cell editing'} title={error ? messageOf(error) : undefined}>
        <span class="cell-editor">
          <input
            aria-label="Cell value"
            value={text}
            autoFocus
            disabled={saving}
            onInput={(event) => setText(event.currentTarget.value)}
            onKeyDown={(event) => {
              if (event.isComposing) return; // Enter that ends an IME composition saves nothing
              if (event.key === 'Enter') {
                event.preventDefault();
                commit();
              } else if (event.key === 'Escape') {
                event.preventDefault();
                close();
              }
            }}
          />
          {column?.nullable && (
            <button
              type="button"
              class="small"
              title="Save NULL"
              disabled={saving}
              onClick={() => commit(null)}
            >
              NULL
            </button>
          )}
        </span>
        {error ? (
          <span class="cell-error" role="alert">
            {messageOf(error)}
          </span>
        ) : null}
      </td>
    );
  }
  return (
    <td
      class={value === null ? 'cell null' : 'cell'}
      tabIndex={editable ? 0 : -1}
      onDblClick={open}
      onKeyDown={(event) => {
        if (event.key === 'Enter') {
          event.preventDefault();
          open();
        }
      }}
    >
      {value === null ? 'NULL' : cellText(value)}
    </td>
  );
}

/** An input that fits the column's type. */
function ValueInput({
  column,
  value,
  onInput,
}: {
  column: Column;
  value: string;
  onInput: (text: string) => void;
}) {
  const kind = inputKind(column.type);
  const label = `${column.name} (${column.type})`;
  if (kind === 'boolean') {
    return (
      <select aria-label={label} value={value} onChange={(e) => onInput(e.currentTarget.value)}>
        <option value="">
          {column.defaultValue !== null ? '(default)' : column.nullable ? 'NULL' : '(choose)'}
        </option>
        <option value="true">true</option>
        <option value="false">false</option>
      </select>
    );
  }
  if (kind === 'json')
    return <textarea aria-label={label} value={value} onInput={(e) => onInput(e.currentTarget.value)} />;
  const type = (
    { number: 'number', date: 'date', datetime: 'datetime-local', time: 'time', text: 'text' } as const
  )[kind];
  // Preact's types tie `type` to the attributes each kind allows; one input serves them all here.
  return (
    <input
      aria-label={label}
      type={type as 'text'}
      step={kind === 'number' ? 'any' : undefined}
      value={value}
      onInput={(e) => onInput(e.currentTarget.value)}
    />
  );
}

function InsertRow({
  schema,
  table,
  structure,
  onClose,
  onInserted,
}: {
  schema: string;
  table: string;
  structure: TableStructure;
  onClose: () => void;
  onInserted: () => Promise<void>;
}) {
  const [values, setValues] = useState<Record<string, string>>({});
  const insert = useAction(async () => {
    const data: Row = {};
    for (const column of structure.columns) {
      const text = values[column.name];
      // Left empty: the column's default (or NULL) applies.
      if (text === undefined || (text === '' && (column.defaultValue !== null || column.nullable))) continue;
      data[column.name] = parseInput(column, text);
    }
    await api('POST', `table/${encodeURIComponent(table)}/row`, { body: { data, schema } });
    await onInserted();
    onClose();
  });
  return (
    <Dialog title={`Insert a row into ${table}`} onClose={onClose}>
      <form
        class="insert-form"
        onSubmit={(event) => {
          event.preventDefault();
          insert.run();
        }}
      >
        {structure.columns.map((column) => (
          <div class="field" key={column.name}>
            <span>
              {column.name}{' '}
              <span class="muted">
                {column.type}
                {column.defaultValue ? ` = ${column.defaultValue}` : ''}
                {column.nullable ? '' : ', required'}
              </span>
            </span>
            <ValueInput
              column={column}
              value={values[column.name] ?? ''}
              onInput={(text) => setValues({ ...values, [column.name]: text })}
            />
          </div>
        ))}
        <p class="muted">Leave a field empty for its default (or NULL).</p>
        <ErrorText error={insert.error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={insert.busy}>
            Insert
          </button>
        </div>
      </form>
    </Dialog>
  );
}

function Grid({
  schema,
  table,
  structure,
}: {
  schema: string;
  table: string;
  structure: TableStructure | undefined;
}) {
  const [pageNumber, setPageNumber] = useState(1);
  const [limit, setLimit] = useState(50);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [inserting, setInserting] = useState(false);
  const [confirming, setConfirming] = useState(false);
  // The rows are counted on the first load and after this page changes them, not on page turns:
  // counting a big table costs as much as reading it.
  const total = useRef<{ rows: number; exact: boolean } | undefined>(undefined);
  const page = useLoad(async () => {
    const counting = total.current === undefined;
    const answer = await api<Page>('GET', `table/${encodeURIComponent(table)}`, {
      query: { schema, page: pageNumber, limit, count: counting ? undefined : false },
    });
    if (counting) total.current = { rows: answer.total ?? 0, exact: answer.totalExact };
    return { ...answer, total: total.current?.rows ?? 0, totalExact: total.current?.exact ?? true };
  }, [schema, table, pageNumber, limit]);
  const recount = () => {
    total.current = undefined;
    return page.reload();
  };
  /** Saves one cell; the row as stored replaces its row by id in whatever page is shown now. */
  const saveCell = async (id: string, column: string, value: unknown) => {
    const answer = await api<{ row: Row }>(
      'PATCH',
      `table/${encodeURIComponent(table)}/${encodeURIComponent(id)}`,
      {
        body: { column, value, schema },
      },
    );
    page.setData(
      (shown) => shown && { ...shown, data: shown.data.map((row) => (idOf(row) === id ? answer.row : row)) },
    );
  };
  const exporting = useAction(async (format: 'csv' | 'json') => {
    await download(
      `table/${encodeURIComponent(table)}/export`,
      { schema, format, limit: EXPORT_LIMIT },
      `${table}.${format}`,
    );
  });
  const remove = useAction(async () => {
    await api('POST', `table/${encodeURIComponent(table)}/rows/delete`, {
      body: { rowIds: [...selected], schema },
    });
    setSelected(new Set());
    setConfirming(false);
    await recount();
  });
  const reason = readOnlyReason(structure);
  const key = primaryKeyOf(structure);
  const data = page.data;
  const pages = data ? Math.max(1, Math.ceil(data.total / limit)) : 1;
  // An estimated total may be off either way: by a single-column key, nextCursor says whether rows follow.
  const bySingleKey = structure?.columns.filter((c) => c.primaryKey).length === 1;
  const lastPage = data && !data.totalExact && bySingleKey ? data.nextCursor === null : pageNumber >= pages;
  const idOf = (row: Row) => (key ? cellText(row[key.name]) : '');
  // Rows of another page are not deletable by accident: a page turn clears the selection.
  useEffect(() => setSelected(new Set()), [pageNumber, limit]);
  // After rows went away, a page past the end shows the last one.
  useEffect(() => {
    if (data?.totalExact && !page.loading && pageNumber > pages) setPageNumber(pages);
  }, [data, page.loading, pageNumber, pages]);

  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  return (
    <div>
      <div class="toolbar">
        <button type="button" class="primary" disabled={!structure} onClick={() => setInserting(true)}>
          Insert row
        </button>
        <button
          type="button"
          class="danger"
          disabled={selected.size === 0}
          onClick={() => setConfirming(true)}
        >
          Delete selected ({selected.size})
        </button>
        <button type="button" onClick={() => exporting.run('csv')}>
          Export CSV
        </button>
        <button type="button" onClick={() => exporting.run('json')}>
          Export JSON
        </button>
        {data && data.total > EXPORT_LIMIT && (
          <span class="muted">exports hold the first {EXPORT_LIMIT.toLocaleString()} rows</span>
        )}
        <span class="spacer" />
        <span class="inline">
          <span class="muted">Rows per page</span>
          <select
            aria-label="Rows per page"
            value={String(limit)}
            onChange={(e) => {
              setLimit(Number(e.currentTarget.value));
              setPageNumber(1);
            }}
          >
            {PAGE_SIZES.map((size) => (
              <option key={size}>{size}</option>
            ))}
          </select>
        </span>
      </div>
      {reason && <p class="warning">Read-only: {reason}.</p>}
      <ErrorText error={page.error ?? exporting.error} />
      {data && (
        <div class="grid-wrap">
          <table class="grid" aria-label={`Rows of ${table}`}>
            <thead>
              <tr>
                {!reason && <th class="select" />}
                {data.columns.map((column) => (
                  <th key={column}>{column}</th>
                ))}
              </tr>
            </thead>
            <tbody>
              {data.data.map((row, index) => {
                const id = idOf(row);
                return (
                  <tr key={reason ? index : id}>
                    {!reason && (
                      <td class="select">
                        <input
                          type="checkbox"
                          aria-label={`Select row ${id}`}
                          checked={selected.has(id)}
                          onChange={() => toggle(id)}
                        />
                      </td>
                    )}
                    {data.columns.map((column) => {
                      const definition = structure?.columns.find((c) => c.name === column);
                      return (
                        <Cell
                          key={column}
                          value={row[column]}
                          column={definition}
                          editable={!reason && !!definition}
                          save={(value) => saveCell(id, column, value)}
                        />
                      );
                    })}
                  </tr>
                );
              })}
            </tbody>
          </table>
          {data.data.length === 0 && <p class="muted">No rows.</p>}
        </div>
      )}
      <div class="pager">
        <button
          type="button"
          aria-label="Previous page"
          disabled={pageNumber <= 1}
          onClick={() => setPageNumber(pageNumber - 1)}
        >
          ‹ Previous
        </button>
        <span data-testid="pager">
          {data && !page.loading
            ? data.totalExact
              ? `Page ${pageNumber} of ${pages} · ${data.total} rows`
              : `Page ${pageNumber} of about ${pages.toLocaleString()} · about ${data.total.toLocaleString()} rows`
            : 'Loading…'}
        </span>
        <button
          type="button"
          aria-label="Next page"
          disabled={lastPage}
          onClick={() => setPageNumber(pageNumber + 1)}
        >
          Next ›
        </button>
      </div>
      {inserting && structure && (
        <InsertRow
          schema={schema}
          table={table}
          structure={structure}
          onClose={() => setInserting(false)}
          onInserted={recount}
        />
      )}
      {confirming && (
        <Dialog title={`Delete ${selected.size} row(s)`} onClose={() => setConfirming(false)}>
          <p>Delete the selected rows of {table}? This cannot be undone.</p>
          <ErrorText error={remove.error} />
          <div class="actions">
            <button type="button" onClick={() => setConfirming(false)}>
              Cancel
            </button>
            <button type="button" class="danger" disabled={remove.busy} onClick={() => remove.run()}>
              Delete rows
            </button>
          </div>
        </Dialog>
      )}
    </div>
  );
}

function Structure({
  schema,
  structure,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onChanged: () => Promise<void>;
}) {
  const [column, setColumn] = useState({
    name: '',
    type: 'TEXT',
    length: '',
    nullable: true,
    primaryKey: false,
    defaultValue: '',
  });
  const add = useAction(async () => {
    await api('POST', `table/${encodeURIComponent(structure.table)}/column`, {
      body: { columnName: column.name, dataType: column.type, schema, ...columnBody(column) },
    });
    setColumn({ ...column, name: '', defaultValue: '' });
    await onChanged();
  });
  return (
    <div>
      <table class="grid" aria-label={`Columns of ${structure.table}`}>
        <thead>
          <tr>
            <th>Column</th>
            <th>Type</th>
            <th>Nullable</th>
            <th>Default</th>
            <th>Key</th>
          </tr>
        </thead>
        <tbody>
          {structure.columns.map((c) => {
            const foreign = structure.foreignKeys.find((fk) => fk.column === c.name);
            return (
              <tr key={c.name}>
                <td class="mono">{c.name}</td>
                <td>
                  {c.type}
                  {c.maxLength ? `(${c.maxLength})` : ''}
                </td>
                <td>{c.nullable ? 'yes' : 'no'}</td>
                <td class="mono">{c.defaultValue ?? ''}</td>
                <td>
                  {c.primaryKey ? 'primary key ' : ''}
                  {foreign && (
                    <a href={href({ page: 'table', schema, table: foreign.referencedTable, tab: 'data' })}>
                      → {foreign.referencedTable}.{foreign.referencedColumn}
                    </a>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      <form
        class="card"
        aria-label="Add a column"
        onSubmit={(event) => {
          event.preventDefault();
          add.run();
        }}
      >
        <h2>Add a column</h2>
        <ColumnFields column={column} index={0} withPrimaryKey={false} onChange={setColumn} />
        <ErrorText error={add.error} />
        <button type="submit" class="primary" disabled={add.busy}>
          Add column
        </button>
      </form>
    </div>
  );
}

export function TablePage({
  schema,
  table,
  tab,
}: {
  schema: string;
  table: string;
  tab: 'data' | 'structure';
}) {
  const structure = useLoad(() => loadStructure(schema), [schema]);
  const mine = structure.data?.find((entry) => entry.table === table);
  return (
    <section class="page">
      <h1>
        <a href={href({ page: 'tables', schema })}>{schema}</a> / <span class="mono">{table}</span>
      </h1>
      <nav class="tabs">
        <a
          href={href({ page: 'table', schema, table, tab: 'data' })}
          aria-current={tab === 'data' ? 'page' : undefined}
        >
          Data
        </a>
        <a
          href={href({ page: 'table', schema, table, tab: 'structure' })}
          aria-current={tab === 'structure' ? 'page' : undefined}
        >
          Structure
        </a>
      </nav>
      <ErrorText error={structure.error} />
      {tab === 'data' ? (
        <Grid
          key={`${schema}.${table}`}
          schema={schema}
          table={table}
          structure={structure.loading && !mine ? undefined : mine}
        />
      ) : (
        mine && <Structure schema={schema} structure={mine} onChanged={structure.reload} />
      )}
    </section>
  );
}
