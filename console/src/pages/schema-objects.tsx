import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { ChangeDialog } from '../changes/preview';
import { href } from '../router';
import { ErrorText, useLoad } from '../ui';

/**
 * A schema's objects beside its tables: its enum types (created, and given values, through the
 * change preview) and its views with their definitions.
 */

interface EnumType {
  name: string;
  values: string[];
  comment: string | null;
}

export interface View {
  name: string;
  materialized: boolean;
  populated: boolean;
  columns: { name: string; type: string }[];
  definition: string | null;
}

const e = encodeURIComponent;

/** Values one a line: a label may hold commas and spaces, never a line break. */
const lines = (text: string) => text.split('\n').filter((line) => line !== '');

function CreateType({
  schema,
  onClose,
  onDone,
}: {
  schema: string;
  onClose: () => void;
  onDone: () => void;
}) {
  const [name, setName] = useState('');
  const [values, setValues] = useState('');
  return (
    <ChangeDialog
      title="Create an enum type"
      request={() => {
        if (!name.trim()) throw new Error('Name the type first');
        if (lines(values).length === 0) throw new Error('List its values first, one a line');
        return { method: 'POST', path: 'types', body: { schema, name: name.trim(), values: lines(values) } };
      }}
      onClose={onClose}
      onDone={onDone}
    >
      <label>
        Name
        <input value={name} onInput={(event) => setName(event.currentTarget.value)} autoFocus />
      </label>
      <label>
        Values, one a line, in their order
        <textarea rows={5} value={values} onInput={(event) => setValues(event.currentTarget.value)} />
      </label>
    </ChangeDialog>
  );
}

function AddValue({
  schema,
  type,
  onClose,
  onDone,
}: {
  schema: string;
  type: EnumType;
  onClose: () => void;
  onDone: () => void;
}) {
  const [value, setValue] = useState('');
  const [after, setAfter] = useState(type.values.at(-1) ?? '');
  return (
    <ChangeDialog
      title={`Add a value to ${type.name}`}
      request={() => {
        if (value === '') throw new Error('Type the new value first');
        return {
          method: 'POST',
          path: `types/${e(type.name)}/values`,
          body: { schema, value, ...(after ? { after } : { before: type.values[0] }) },
        };
      }}
      onClose={onClose}
      onDone={onDone}
    >
      <label>
        Value
        <input value={value} onInput={(event) => setValue(event.currentTarget.value)} autoFocus />
      </label>
      <label>
        Sorts after
        <select value={after} onChange={(event) => setAfter(event.currentTarget.value)}>
          <option value="">(first)</option>
          {type.values.map((v) => (
            <option key={v} value={v}>
              {v}
            </option>
          ))}
        </select>
      </label>
    </ChangeDialog>
  );
}

export function EnumTypes({ schema }: { schema: string }) {
  const list = useLoad(() => api<{ types: EnumType[] }>('GET', 'types', { query: { schema } }), [schema]);
  const [dialog, setDialog] = useState<EnumType | 'create' | undefined>(undefined);
  const close = () => setDialog(undefined);
  const alters = may('alter');
  return (
    <section aria-label="Enum types">
      <h2>Enum types</h2>
      <ErrorText error={list.error} />
      <ul class="list">
        {(list.data?.types ?? []).map((type) => (
          <li key={type.name}>
            <span>
              <strong class="mono">{type.name}</strong>{' '}
              <span class="muted">{type.values.map((v) => JSON.stringify(v)).join(', ')}</span>
            </span>
            {alters && (
              <span class="row-actions">
                <button
                  type="button"
                  aria-label={`Add a value to ${type.name}`}
                  onClick={() => setDialog(type)}
                >
                  Add a value
                </button>
              </span>
            )}
          </li>
        ))}
        {list.data?.types.length === 0 && <li class="muted">No enum types.</li>}
      </ul>
      {alters && (
        <button type="button" onClick={() => setDialog('create')}>
          Create an enum type
        </button>
      )}
      {dialog === 'create' && <CreateType schema={schema} onClose={close} onDone={list.reload} />}
      {dialog && dialog !== 'create' && (
        <AddValue schema={schema} type={dialog} onClose={close} onDone={list.reload} />
      )}
    </section>
  );
}

export const loadViews = (schema: string) =>
  api<{ definitionsRead: boolean; views: View[] }>('GET', 'views', { query: { schema } });

export function Views({ schema }: { schema: string }) {
  const list = useLoad(() => loadViews(schema), [schema]);
  if (list.data?.views.length === 0) return null;
  return (
    <section aria-label="Views">
      <h2>Views</h2>
      <ErrorText error={list.error} />
      {list.data && !list.data.definitionsRead && (
        <p class="muted">
          A table a view reads is locked by another session: some definitions are not shown.
        </p>
      )}
      {(list.data?.views ?? []).map((view) => (
        <details key={view.name} class="card">
          <summary>
            <strong class="mono">{view.name}</strong>{' '}
            <span class="muted">
              {view.materialized ? `materialized${view.populated ? '' : ', not yet refreshed'}` : 'view'}:{' '}
              {view.columns.map((c) => c.name).join(', ')}
            </span>{' '}
            <a
              href={href({ page: 'table', schema, table: view.name, tab: 'data' })}
              aria-label={`Open ${view.name}`}
            >
              open its rows
            </a>
          </summary>
          <pre class="sql">{view.definition ?? '(definition not read: a table it reads is locked)'}</pre>
        </details>
      ))}
    </section>
  );
}
