import { useState } from 'preact/hooks';
import { api } from '../api';
import { Grid } from '../grid/grid';
import { href } from '../router';
import { loadStructure } from '../structure';
import { ErrorText, useAction, useLoad } from '../ui';
import type { TableStructure } from '../values';
import { ColumnFields, columnBody } from './tables';

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
  view,
}: {
  schema: string;
  table: string;
  tab: 'data' | 'structure';
  /** The data tab's view (filters, sort, page) as the hash's query. */
  view: string | undefined;
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
          tables={structure.data ?? []}
          view={view}
        />
      ) : (
        mine && <Structure schema={schema} structure={mine} onChanged={structure.reload} />
      )}
    </section>
  );
}
