import { useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog, ErrorText, Form, useAction } from '../ui';
import { type Column, cellText, parseInput, type TableStructure } from '../values';
import { ValueInput } from './insert-row';
import { isLongType, readLongValue } from './json-and-arrays';
import { longValueHint } from './long-value-editor';
import { ReferencePicker } from './reference-picker';
import { referenceOf } from './references';
import { type BulkTarget, rowsText } from './selection';

/**
 * Sets one column to one value on every selected row (or every row the filter finds): one PATCH
 * /api/table/:t/rows whose filter names them, with maxAffected their number, so the server changes
 * nothing if more rows would change. The dialog says how many rows it touches before it runs.
 */
export function BulkEdit({
  schema,
  structure,
  tables,
  target,
  onClose,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  tables: TableStructure[];
  target: BulkTarget;
  onClose: () => void;
  onChanged: () => Promise<void>;
}) {
  // The key is left out: one value for the key of several rows is a conflict, never an edit.
  const columns = structure.columns.filter((c) => !c.primaryKey);
  const [name, setName] = useState(columns[0]?.name ?? '');
  const [text, setText] = useState('');
  const [setNull, setSetNull] = useState(false);
  const [picking, setPicking] = useState(false);
  const column = columns.find((c) => c.name === name);
  const reference = referenceOf(structure, tables, name, schema);
  const count = rowsText(target.count);
  const update = useAction(async () => {
    if (!column) return;
    const value = setNull
      ? null
      : isLongType(column.type)
        ? readLongValue(column, text)
        : parseInput(column, text);
    await api('PATCH', `table/${encodeURIComponent(structure.table)}/rows`, {
      query: { ...target.query, return: 'minimal' },
      body: { set: { [column.name]: value }, schema },
    });
    await onChanged();
    onClose();
  });
  const choose = (next: string) => {
    setName(next);
    setText('');
    setSetNull(false);
    update.setError(undefined);
  };
  return (
    <Dialog title={`Edit ${count}`} onClose={onClose}>
      <Form class="bulk-edit" onSubmit={() => update.run()}>
        <label class="inline">
          Column
          <select
            aria-label="Column to set"
            value={name}
            onChange={(event) => choose(event.currentTarget.value)}
          >
            {columns.map((c) => (
              <option key={c.name} value={c.name}>
                {c.name} ({c.type})
              </option>
            ))}
          </select>
        </label>
        {column && <ValueField column={column} text={text} disabled={setNull} onInput={setText} />}
        {column?.nullable && (
          <label class="inline">
            <input
              type="checkbox"
              checked={setNull}
              onChange={(event) => setSetNull(event.currentTarget.checked)}
            />
            NULL
          </label>
        )}
        {reference && !setNull && (
          <button type="button" class="link" onClick={() => setPicking(true)}>
            Pick a row of {reference.table.table}…
          </button>
        )}
        <p data-testid="bulk-edit-summary">
          Sets <span class="mono">{name}</span> on the {count} {target.named} in {structure.table}. If more
          rows would change, nothing is changed.
        </p>
        <ErrorText error={update.error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={!column || update.busy}>
            Update {count}
          </button>
        </div>
      </Form>
      {picking && reference && column && (
        <ReferencePicker
          schema={schema}
          reference={reference}
          current={undefined}
          nullable={false}
          onPick={async (value) => setText(cellText(value))}
          onClose={() => setPicking(false)}
        />
      )}
    </Dialog>
  );
}

/** The new value: a textarea for json, jsonb and arrays, else the input that fits the type. */
function ValueField({
  column,
  text,
  disabled,
  onInput,
}: {
  column: Column;
  text: string;
  disabled: boolean;
  onInput: (text: string) => void;
}) {
  if (disabled) return <input aria-label="New value" value="NULL" disabled />;
  if (!isLongType(column.type))
    return <ValueInput key={column.name} column={column} value={text} onInput={onInput} label="New value" />;
  return (
    <>
      <textarea
        class="long-value"
        aria-label="New value"
        spellcheck={false}
        value={text}
        onInput={(event) => onInput(event.currentTarget.value)}
      />
      <span class="muted">{longValueHint(column.type)}</span>
    </>
  );
}

/**
 * Deletes the selected rows (or every row the filter finds) after saying how many: one POST
 * /api/table/:t/rows/delete naming them, maxAffected their number, so past it nothing is deleted.
 */
export function BulkDelete({
  schema,
  table,
  target,
  onClose,
  onDeleted,
}: {
  schema: string;
  table: string;
  target: BulkTarget;
  onClose: () => void;
  onDeleted: () => Promise<void>;
}) {
  const remove = useAction(async () => {
    await api('POST', `table/${encodeURIComponent(table)}/rows/delete`, {
      query: target.query,
      body: { schema },
    });
    await onDeleted();
  });
  return (
    <Dialog title={`Delete ${rowsText(target.count)}`} onClose={onClose}>
      <p data-testid="delete-summary">
        Delete the {rowsText(target.count)} {target.named} in {table}? This cannot be undone. If more rows
        would be deleted, nothing is deleted.
      </p>
      <ErrorText error={remove.error} />
      <div class="actions">
        <button type="button" onClick={onClose}>
          Cancel
        </button>
        <button type="button" class="danger" disabled={remove.busy} onClick={() => remove.run()}>
          Delete {rowsText(target.count)}
        </button>
      </div>
    </Dialog>
  );
}
