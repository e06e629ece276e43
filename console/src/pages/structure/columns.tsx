import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { may } from '../../api';
import { ChangeDialog, type ChangeRequest } from '../../changes/preview';
import { href } from '../../router';
import type { Column, TableStructure } from '../../values';
import { COLUMN_TYPES } from '../tables';

/**
 * The structure tab's columns: one row each, with a menu of the changes a column takes (rename,
 * type, default, nullability, unique, check, comment, drop). Each opens the change's dialog:
 * its inputs, then the dry run's preview, then Run.
 */

type ColumnChangeKind = 'rename' | 'type' | 'default' | 'nullable' | 'unique' | 'check' | 'comment' | 'drop';

/** The column's menu; `offered` leaves out what the column cannot take. */
const MENU: {
  kind: ColumnChangeKind;
  label: (c: Column) => string;
  offered?: (c: Column, unique: boolean) => boolean;
}[] = [
  { kind: 'rename', label: () => 'Rename…' },
  { kind: 'type', label: () => 'Change type…' },
  { kind: 'default', label: () => 'Default…' },
  {
    kind: 'nullable',
    label: (c) => (c.nullable ? 'Make required (NOT NULL)' : 'Allow NULL'),
    // A primary key's columns are NOT NULL for as long as it stands.
    offered: (c) => !c.primaryKey,
  },
  { kind: 'unique', label: () => 'Make unique', offered: (c, unique) => !c.primaryKey && !unique },
  { kind: 'check', label: () => 'Add a check…' },
  { kind: 'comment', label: () => 'Comment…' },
  { kind: 'drop', label: () => 'Drop…' },
];

const e = encodeURIComponent;

/** Closes the menu on a click elsewhere or Escape, as a menu does. */
function useClosing(ref: { current: HTMLDetailsElement | null }) {
  useEffect(() => {
    const close = (event: Event) => {
      const menu = ref.current;
      if (!menu?.open) return;
      if (event instanceof KeyboardEvent ? event.key === 'Escape' : !menu.contains(event.target as Node))
        menu.open = false;
    };
    document.addEventListener('click', close);
    document.addEventListener('keydown', close);
    return () => {
      document.removeEventListener('click', close);
      document.removeEventListener('keydown', close);
    };
  }, []);
}

function ColumnMenu({
  column,
  unique,
  onPick,
}: {
  column: Column;
  unique: boolean;
  onPick: (kind: ColumnChangeKind) => void;
}) {
  const ref = useRef<HTMLDetailsElement>(null);
  useClosing(ref);
  return (
    <details class="menu" ref={ref}>
      <summary aria-label={`Change column ${column.name}`}>Change ▾</summary>
      <div class="menu-items">
        {MENU.filter((item) => item.offered?.(column, unique) ?? true).map(({ kind, label }) => (
          <button
            key={kind}
            type="button"
            class="menu-item"
            onClick={() => {
              if (ref.current) ref.current.open = false;
              onPick(kind);
            }}
          >
            {label(column)}
          </button>
        ))}
      </div>
    </details>
  );
}

const required = (value: string, what: string) => {
  if (!value.trim()) throw new Error(`${what} first`);
  return value.trim();
};

/** A default as typed: surrounding spaces are part of a literal, so only emptiness is refused. */
const defaultValue = (value: string) => {
  if (value === '') throw new Error('Type the default, or choose no default');
  return value;
};

/** The dialog of one column change: its inputs (if it has any) and the request they make. */
function ColumnChange({
  schema,
  table,
  column,
  kind,
  onClose,
  onChanged,
}: {
  schema: string;
  table: string;
  column: Column;
  kind: ColumnChangeKind;
  onClose: () => void;
  onChanged: () => Promise<void>;
}) {
  const [text, setText] = useState(kind === 'comment' ? (column.comment ?? '') : '');
  const [using, setUsing] = useState('');
  const [flag, setFlag] = useState(false);
  const path = `table/${e(table)}/column/${e(column.name)}`;
  const patch = (body: Record<string, unknown>): ChangeRequest => ({
    method: 'PATCH',
    path,
    body: { schema, ...body },
  });
  const constraint = (body: Record<string, unknown>): ChangeRequest => ({
    method: 'POST',
    path: `table/${e(table)}/constraints`,
    body: { schema, columns: [column.name], ...body },
  });
  const requests: Record<ColumnChangeKind, () => ChangeRequest> = {
    rename: () => patch({ rename: required(text, 'Type the new name') }),
    type: () => patch({ type: required(text, 'Type the new type'), ...(using.trim() ? { using } : {}) }),
    default: () => patch({ default: flag ? null : defaultValue(text) }),
    nullable: () => patch({ nullable: !column.nullable }),
    unique: () => constraint({ type: 'unique' }),
    check: () => constraint({ type: 'check', check: required(text, 'Type the check'), columns: undefined }),
    comment: () => patch({ comment: text.trim() ? text : null }),
    drop: () => ({ method: 'DELETE', path, query: { schema, cascade: flag } }),
  };
  const input = (label: string, placeholder = '', list?: string) => (
    <label>
      {label}
      <input
        value={text}
        placeholder={placeholder}
        list={list}
        disabled={kind === 'default' && flag}
        onInput={(event) => setText(event.currentTarget.value)}
        autoFocus
      />
    </label>
  );
  const checkbox = (label: string) => (
    <label class="inline">
      <input type="checkbox" checked={flag} onChange={(event) => setFlag(event.currentTarget.checked)} />
      {label}
    </label>
  );
  const inputs: Partial<Record<ColumnChangeKind, ComponentChildren>> = {
    rename: input('New name', column.name),
    type: (
      <>
        {input('New type', column.type, 'column-types')}
        <datalist id="column-types">
          {COLUMN_TYPES.map((type) => (
            <option key={type} value={type} />
          ))}
        </datalist>
        <label>
          Using (optional)
          <input
            value={using}
            placeholder={`${column.name}::new_type`}
            onInput={(event) => setUsing(event.currentTarget.value)}
          />
        </label>
        <p class="muted">
          An SQL expression that computes each new value from the row, run as the schema’s role.
        </p>
      </>
    ),
    default: (
      <>
        <p class="muted">
          Now: <code>{column.defaultValue ?? 'no default'}</code>. A value is taken as a literal; now(),
          CURRENT_TIMESTAMP, CURRENT_DATE, gen_random_uuid(), true and false as themselves.
        </p>
        {input('Default', 'a literal, now(), gen_random_uuid()…')}
        {checkbox('No default')}
      </>
    ),
    check: input('Check', `${column.name} > 0`),
    comment: (
      <>
        {input('Comment')}
        <p class="muted">Left empty, the comment is removed.</p>
      </>
    ),
    drop: checkbox('Also drop what depends on it (cascade)'),
  };
  const titles: Record<ColumnChangeKind, string> = {
    rename: 'Rename',
    type: 'Change the type of',
    default: 'Set the default of',
    nullable: column.nullable ? 'Make required' : 'Allow NULL in',
    unique: 'Make unique',
    check: 'Add a check on',
    comment: 'Comment on',
    drop: 'Drop',
  };
  return (
    <ChangeDialog
      title={`${titles[kind]} column ${column.name}`}
      request={requests[kind]}
      onClose={onClose}
      onDone={onChanged}
      danger={kind === 'drop'}
      onUseUsing={kind === 'type' ? setUsing : undefined}
    >
      {inputs[kind]}
    </ChangeDialog>
  );
}

export function ColumnsTable({
  schema,
  structure,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onChanged: () => Promise<void>;
}) {
  const [open, setOpen] = useState<{ column: Column; kind: ColumnChangeKind } | undefined>(undefined);
  const unique = new Set(
    (structure.constraints ?? [])
      .filter((c) => c.type === 'unique' && c.columns.length === 1)
      .map((c) => c.columns[0]),
  );
  const alters = may('alter');
  return (
    <>
      <table class="grid" aria-label={`Columns of ${structure.table}`}>
        <thead>
          <tr>
            <th>Column</th>
            <th>Type</th>
            <th>Nullable</th>
            <th>Default</th>
            <th>Key</th>
            <th>Comment</th>
            {alters && <th />}
          </tr>
        </thead>
        <tbody>
          {structure.columns.map((c) => {
            const foreign = structure.foreignKeys.find((fk) => fk.column === c.name);
            const target = foreign?.referencedSchema ?? schema;
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
                  {unique.has(c.name) ? 'unique ' : ''}
                  {foreign && (
                    <a
                      href={href({
                        page: 'table',
                        schema: target,
                        table: foreign.referencedTable,
                        tab: 'data',
                      })}
                    >
                      → {target === schema ? '' : `${target}.`}
                      {foreign.referencedTable}.{foreign.referencedColumn}
                    </a>
                  )}
                </td>
                <td class="muted">{c.comment ?? ''}</td>
                {alters && (
                  <td class="menu-cell">
                    <ColumnMenu
                      column={c}
                      unique={unique.has(c.name)}
                      onPick={(kind) => setOpen({ column: c, kind })}
                    />
                  </td>
                )}
              </tr>
            );
          })}
        </tbody>
      </table>
      {open && (
        <ColumnChange
          key={`${open.column.name}:${open.kind}`}
          schema={schema}
          table={structure.table}
          column={open.column}
          kind={open.kind}
          onClose={() => setOpen(undefined)}
          onChanged={onChanged}
        />
      )}
    </>
  );
}
