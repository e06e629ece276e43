import { useState } from 'preact/hooks';
import { api, may } from '../../api';
import { ChangeDialog, type ChangeRequest, DropDialog } from '../../changes/preview';
import { schemas } from '../../schemas';
import { loadStructure } from '../../structure';
import { ErrorText, useLoad } from '../../ui';
import type { TableStructure } from '../../values';
import { ColumnChoice } from './column-choice';

/**
 * A table's constraints (GET /api/table/:t/constraints) with Drop on each, and a form that adds a
 * foreign key (to a table of this schema or another), a unique or a check constraint. Both go
 * through the change preview.
 */

const FK_ACTIONS = ['no action', 'restrict', 'cascade', 'set null', 'set default'];

interface Constraint {
  name: string;
  type: string;
  columns: string[];
  definition: string | null;
  validated: boolean;
  references: { schema: string; table: string; columns: string[] } | null;
}

const e = encodeURIComponent;

/** A table's primary key columns in key order (from its primary index; else the columns' order). */
export const keyOf = (table: TableStructure): string[] => {
  const primary = table.indexes?.find((index) => index.primary)?.columns;
  if (primary?.every((c): c is string => c !== null)) return primary;
  return table.columns.filter((c) => c.primaryKey).map((c) => c.name);
};

/** The referenced side of a foreign key: a schema, one of its tables, and its columns (default: its key). */
function ReferenceFields({
  schema,
  value,
  onChange,
}: {
  schema: string;
  value: { schema: string; table: string; columns: string[] };
  onChange: (value: { schema: string; table: string; columns: string[] }) => void;
}) {
  const tables = useLoad(() => loadStructure(value.schema), [value.schema]);
  const target = tables.data?.find((t) => t.table === value.table);
  const names = schemas.names.value.length > 0 ? schemas.names.value : [schema];
  return (
    <>
      <label>
        References schema
        <select
          value={value.schema}
          onChange={(event) => onChange({ schema: event.currentTarget.value, table: '', columns: [] })}
        >
          {names.map((name) => (
            <option key={name}>{name}</option>
          ))}
        </select>
      </label>
      <label>
        References table
        <select
          value={value.table}
          onChange={(event) => onChange({ ...value, table: event.currentTarget.value, columns: [] })}
        >
          <option value="">choose a table</option>
          {(tables.data ?? []).map((t) => (
            <option key={t.table}>{t.table}</option>
          ))}
        </select>
      </label>
      <ErrorText error={tables.error} />
      {target && (
        <>
          <ColumnChoice
            label="Referenced columns, paired in order with the columns above (none: its primary key)"
            columns={target.columns.map((c) => c.name)}
            chosen={value.columns}
            onChange={(columns) => onChange({ ...value, columns })}
            ordered
          />
          {value.columns.length === 0 && (
            <p class="muted">
              Its primary key, in key order: (
              {keyOf(target).join(', ') || 'none: choose the referenced columns'})
            </p>
          )}
        </>
      )}
    </>
  );
}

function checkBody(check: string, notValid: boolean) {
  if (!check.trim()) throw new Error('Type the check expression first');
  return { check, notValid };
}

function chosen(columns: string[]) {
  if (columns.length === 0) throw new Error('Choose its columns first');
  return columns;
}

/** The referenced table as the API takes it: the schema only when it is another one. */
function target(schema: string, references: { schema: string; table: string; columns: string[] }) {
  if (!references.table) throw new Error('Choose the table it references first');
  return {
    ...(references.schema === schema ? {} : { schema: references.schema }),
    table: references.table,
    ...(references.columns.length > 0 ? { columns: references.columns } : {}),
  };
}

/** ON DELETE and ON UPDATE as chosen; PostgreSQL's own default (no action) left unsaid. */
const actions = (onDelete: string, onUpdate: string) => ({
  ...(onDelete === 'no action' ? {} : { onDelete }),
  ...(onUpdate === 'no action' ? {} : { onUpdate }),
});

function AddConstraint({
  schema,
  structure,
  onClose,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onClose: () => void;
  onChanged: () => Promise<void>;
}) {
  const [type, setType] = useState<'foreign key' | 'unique' | 'check'>('foreign key');
  const [name, setName] = useState('');
  const [columns, setColumns] = useState<string[]>([]);
  const [references, setReferences] = useState({ schema, table: '', columns: [] as string[] });
  const [onDelete, setOnDelete] = useState('no action');
  const [onUpdate, setOnUpdate] = useState('no action');
  const [check, setCheck] = useState('');
  const [notValid, setNotValid] = useState(false);
  const request = (): ChangeRequest => ({
    method: 'POST',
    path: `table/${e(structure.table)}/constraints`,
    body: {
      schema,
      type,
      ...(name.trim() ? { name: name.trim() } : {}),
      ...(type === 'check' ? checkBody(check, notValid) : { columns: chosen(columns) }),
      ...(type === 'foreign key'
        ? { references: target(schema, references), ...actions(onDelete, onUpdate), notValid }
        : {}),
    },
  });
  const action = (label: string, value: string, set: (value: string) => void) => (
    <label>
      {label}
      <select value={value} onChange={(event) => set(event.currentTarget.value)}>
        {FK_ACTIONS.map((a) => (
          <option key={a}>{a}</option>
        ))}
      </select>
    </label>
  );
  return (
    <ChangeDialog
      title={`Add a constraint to ${structure.table}`}
      request={request}
      onClose={onClose}
      onDone={onChanged}
    >
      <label>
        Kind
        <select value={type} onChange={(event) => setType(event.currentTarget.value as typeof type)}>
          <option>foreign key</option>
          <option>unique</option>
          <option>check</option>
        </select>
      </label>
      <label>
        Name (optional)
        <input value={name} onInput={(event) => setName(event.currentTarget.value)} />
      </label>
      {type !== 'check' && (
        <ColumnChoice
          label="Columns"
          columns={structure.columns.map((c) => c.name)}
          chosen={columns}
          onChange={setColumns}
          ordered
        />
      )}
      {type === 'foreign key' && (
        <>
          <ReferenceFields schema={schema} value={references} onChange={setReferences} />
          {action('On delete', onDelete, setOnDelete)}
          {action('On update', onUpdate, setOnUpdate)}
        </>
      )}
      {type === 'check' && (
        <label>
          Check
          <input
            value={check}
            placeholder="price >= 0"
            onInput={(event) => setCheck(event.currentTarget.value)}
          />
        </label>
      )}
      {type !== 'unique' && (
        <label class="inline">
          <input
            type="checkbox"
            checked={notValid}
            onChange={(event) => setNotValid(event.currentTarget.checked)}
          />
          Skip checking the rows already there (NOT VALID: no scan)
        </label>
      )}
    </ChangeDialog>
  );
}

export function ConstraintsList({
  schema,
  structure,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onChanged: () => Promise<void>;
}) {
  const list = useLoad(
    () =>
      api<{ constraints: Constraint[] }>('GET', `table/${e(structure.table)}/constraints`, {
        query: { schema },
      }),
    [schema, structure],
  );
  const [dialog, setDialog] = useState<{ drop: Constraint } | 'add' | undefined>(undefined);
  const alters = may('alter');
  return (
    <section aria-label="Constraints">
      <h2>Constraints</h2>
      <ErrorText error={list.error} />
      <ul class="list">
        {(list.data?.constraints ?? []).map((c) => (
          <li key={c.name}>
            <span>
              <strong class="mono">{c.name}</strong> <span class="muted">{c.type}</span>{' '}
              <code>{c.definition ?? `(${c.columns.join(', ')})`}</code>
              {c.validated ? '' : <span class="warning"> not validated</span>}
            </span>
            {alters && (
              <span class="row-actions">
                <button
                  type="button"
                  aria-label={`Drop constraint ${c.name}`}
                  onClick={() => setDialog({ drop: c })}
                >
                  Drop
                </button>
              </span>
            )}
          </li>
        ))}
        {list.data?.constraints.length === 0 && <li class="muted">No constraints.</li>}
      </ul>
      {alters && (
        <button type="button" onClick={() => setDialog('add')}>
          Add a constraint
        </button>
      )}
      {dialog === 'add' && (
        <AddConstraint
          schema={schema}
          structure={structure}
          onClose={() => setDialog(undefined)}
          onChanged={onChanged}
        />
      )}
      {dialog && dialog !== 'add' && (
        <DropDialog
          what="constraint"
          name={dialog.drop.name}
          path={`table/${e(structure.table)}/constraints/${e(dialog.drop.name)}`}
          schema={schema}
          option={{
            name: 'cascade',
            label: 'Also drop the foreign keys that depend on it (cascade)',
            checked: false,
          }}
          onClose={() => setDialog(undefined)}
          onDone={onChanged}
        />
      )}
    </section>
  );
}
