import { useState } from 'preact/hooks';
import { api } from '../api';
import { Dialog, ErrorText, Form, useAction } from '../ui';
import { type Column, filledByPostgres, inputKind, parseInput, type TableStructure } from '../values';

/**
 * The insert form: an input per column that takes a value (identity ALWAYS and generated columns
 * are PostgreSQL's to fill), empty for the column's default.
 */

type Row = Record<string, unknown>;

/** An input that fits the column's type, named `column (type)` unless told otherwise. */
export function ValueInput({
  column,
  value,
  onInput,
  label = `${column.name} (${column.type})`,
}: {
  column: Column;
  value: string;
  onInput: (text: string) => void;
  label?: string;
}) {
  const kind = inputKind(column.type);
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

export function InsertRow({
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
  const asked = structure.columns.filter((column) => !filledByPostgres(column));
  const filled = structure.columns.filter(filledByPostgres);
  const insert = useAction(async () => {
    const data: Row = {};
    for (const column of asked) {
      const text = values[column.name];
      // Left empty: the column's default (or NULL) applies.
      const hasDefault = column.defaultValue !== null || column.identity || column.nullable;
      if (text === undefined || (text === '' && hasDefault)) continue;
      data[column.name] = parseInput(column, text);
    }
    await api('POST', `table/${encodeURIComponent(table)}/row`, { body: { data, schema } });
    await onInserted();
    onClose();
  });
  return (
    <Dialog title={`Insert a row into ${table}`} onClose={onClose}>
      <Form class="insert-form" onSubmit={() => insert.run()}>
        {asked.map((column) => (
          <div class="field" key={column.name}>
            <span>
              {column.name}{' '}
              <span class="muted">
                {column.type}
                {column.defaultValue ? ` = ${column.defaultValue}` : ''}
                {column.identity ? ', identity' : ''}
                {column.nullable || column.identity ? '' : ', required'}
              </span>
            </span>
            <ValueInput
              column={column}
              value={values[column.name] ?? ''}
              onInput={(text) => setValues({ ...values, [column.name]: text })}
            />
          </div>
        ))}
        {filled.length > 0 && (
          <p class="muted" data-testid="filled-by-postgres">
            Filled in by PostgreSQL:{' '}
            {filled
              .map((column) => `${column.name} (${column.generated ? 'generated' : 'identity'})`)
              .join(', ')}
          </p>
        )}
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
      </Form>
    </Dialog>
  );
}
