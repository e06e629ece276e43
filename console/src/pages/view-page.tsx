import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { ErrorText } from '../ui';
import type { TableStructure } from '../values';
import type { View } from './schema-objects';

/**
 * A view or materialized view opened like a table: its rows in the grid, read-only (filters,
 * order, paging and exports as a table's), its definition, and, for a materialized view, a
 * Refresh that refills it (concurrently where a unique index allows, so readers are not blocked).
 */

/** The view as the grid reads a table: its columns, none of them a key, never written. */
export const viewStructure = (view: View): TableStructure => ({
  table: view.name,
  relation: view.materialized ? 'materialized view' : 'view',
  foreignKeys: [],
  columns: view.columns.map((column) => ({
    name: column.name,
    type: column.type,
    maxLength: null,
    nullable: true,
    defaultValue: null,
    primaryKey: false,
  })),
});

function Refresh({ schema, view, onRefreshed }: { schema: string; view: View; onRefreshed: () => void }) {
  const [state, setState] = useState<{ busy?: boolean; message?: string; error?: unknown }>({});
  const refresh = async () => {
    setState({ busy: true });
    try {
      const answer = await api<{ message: string }>('POST', `view/${encodeURIComponent(view.name)}/refresh`, {
        body: { schema },
      });
      setState({ message: answer.message });
      onRefreshed();
    } catch (error) {
      setState({ error });
    }
  };
  return (
    <p class="toolbar">
      <button type="button" onClick={refresh} disabled={state.busy}>
        {state.busy ? 'Refreshing…' : 'Refresh'}
      </button>{' '}
      {state.message && (
        <span class="muted" role="status">
          {state.message}
        </span>
      )}
      <ErrorText error={state.error} />
    </p>
  );
}

/** What the page says of a view above its rows, and a materialized view's Refresh. */
export function ViewNotice({
  schema,
  view,
  onRefreshed,
}: {
  schema: string;
  view: View;
  onRefreshed: () => void;
}) {
  return (
    <>
      <p class="muted">
        A {view.materialized ? 'materialized view' : 'view'}
        {view.materialized && !view.populated ? ', never filled: refresh it to read its rows' : ''}. Its rows
        are read here; change them in the tables it reads.
      </p>
      {view.materialized && may('write') && <Refresh schema={schema} view={view} onRefreshed={onRefreshed} />}
    </>
  );
}
