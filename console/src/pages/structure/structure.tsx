import { useState } from 'preact/hooks';
import { api, may } from '../../api';
import { ChangeDialog, formatBytes } from '../../changes/preview';
import { go } from '../../router';
import { ErrorText, Form, useAction, useLoad } from '../../ui';
import type { TableStructure } from '../../values';
import { blankColumn, ColumnFields, columnBody } from '../tables';
import { ColumnChoice } from './column-choice';
import { ColumnsTable } from './columns';
import { ConstraintsList, keyOf } from './constraints';

/**
 * The structure tab: the table's size and comment with its own changes (rename, comment, primary
 * key), its columns with theirs, a form that adds a column, and its constraints.
 */

type TableChangeKind = 'rename' | 'comment' | 'primaryKey';

const e = encodeURIComponent;

function TableChange({
  schema,
  structure,
  kind,
  onClose,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  kind: TableChangeKind;
  onClose: () => void;
  onChanged: () => Promise<void>;
}) {
  const [text, setText] = useState(kind === 'comment' ? (structure.comment ?? '') : '');
  const current = keyOf(structure);
  const [key, setKey] = useState(current);
  const body = (): Record<string, unknown> => {
    if (kind === 'rename') {
      if (!text.trim()) throw new Error('Type the new name first');
      return { rename: text.trim() };
    }
    if (kind === 'comment') return { comment: text.trim() ? text : null };
    if (key.length === 0) throw new Error('Choose the key’s columns first');
    // The same key again would drop and rebuild it, scanning the table under ACCESS EXCLUSIVE.
    if (key.join('\u0000') === current.join('\u0000')) throw new Error('That is the primary key already');
    return { primaryKey: key };
  };
  const titles: Record<TableChangeKind, string> = {
    rename: `Rename table ${structure.table}`,
    comment: `Comment on table ${structure.table}`,
    primaryKey: `Change the primary key of ${structure.table}`,
  };
  return (
    <ChangeDialog
      title={titles[kind]}
      request={() => ({ method: 'PATCH', path: `table/${e(structure.table)}`, body: { schema, ...body() } })}
      onClose={onClose}
      onDone={async (_answer, sent, stillOpen) => {
        const renamed = sent.body?.rename;
        // Closed while it ran, the admin has moved on: the page is not taken away from them.
        if (typeof renamed === 'string' && stillOpen)
          go({ page: 'table', schema, table: renamed, tab: 'structure' });
        await onChanged();
      }}
    >
      {kind === 'primaryKey' ? (
        <ColumnChoice
          label="Key columns, in order"
          columns={structure.columns.map((c) => c.name)}
          chosen={key}
          onChange={setKey}
          ordered
        />
      ) : (
        <label>
          {kind === 'rename' ? 'New name' : 'Comment'}
          <input value={text} onInput={(event) => setText(event.currentTarget.value)} autoFocus />
        </label>
      )}
    </ChangeDialog>
  );
}

function AddColumn({
  schema,
  structure,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onChanged: () => Promise<void>;
}) {
  const [column, setColumn] = useState(blankColumn);
  const enums = useLoad(
    () => api<{ types: { name: string }[] }>('GET', 'types', { query: { schema } }),
    [schema],
  );
  const add = useAction(async () => {
    await api('POST', `table/${e(structure.table)}/column`, {
      body: { columnName: column.name, dataType: column.type, schema, ...columnBody(column) },
    });
    setColumn({ ...column, name: '', defaultValue: '' });
    await onChanged();
  });
  return (
    <Form class="card" aria-label="Add a column" onSubmit={() => add.run()}>
      <h2>Add a column</h2>
      <ColumnFields
        column={column}
        index={0}
        withPrimaryKey={false}
        onChange={setColumn}
        enumTypes={enums.data?.types.map((t) => t.name)}
      />
      <ErrorText error={add.error} />
      <button type="submit" class="primary" disabled={add.busy}>
        Add column
      </button>
    </Form>
  );
}

export function Structure({
  schema,
  structure,
  onChanged,
}: {
  schema: string;
  structure: TableStructure;
  onChanged: () => Promise<void>;
}) {
  const [open, setOpen] = useState<TableChangeKind | undefined>(undefined);
  const rows = structure.estimatedRows;
  const alters = may('alter');
  return (
    <div>
      <div class="table-facts">
        <p class="muted">
          {rows === null || rows === undefined
            ? 'Size not yet measured (no VACUUM or ANALYZE yet)'
            : `${formatBytes(structure.sizeBytes ?? 0)}, about ${rows.toLocaleString()} rows`}
          {structure.comment ? ` · ${structure.comment}` : ''}
        </p>
        {alters && (
          <span class="row-actions">
            <button type="button" onClick={() => setOpen('rename')}>
              Rename table…
            </button>
            <button type="button" onClick={() => setOpen('comment')}>
              Comment…
            </button>
            <button type="button" onClick={() => setOpen('primaryKey')}>
              Primary key…
            </button>
          </span>
        )}
      </div>
      <ColumnsTable schema={schema} structure={structure} onChanged={onChanged} />
      {alters && <AddColumn schema={schema} structure={structure} onChanged={onChanged} />}
      <ConstraintsList schema={schema} structure={structure} onChanged={onChanged} />
      {open && (
        <TableChange
          schema={schema}
          structure={structure}
          kind={open}
          onClose={() => setOpen(undefined)}
          onChanged={onChanged}
        />
      )}
    </div>
  );
}
