import { useState } from 'preact/hooks';
import { Grid } from '../grid/grid';
import { href, type TableTab } from '../router';
import { loadStructure } from '../structure';
import { ErrorText, useLoad } from '../ui';
import { loadViews } from './schema-objects';
import { IndexesTab } from './structure/indexes';
import { Structure } from './structure/structure';
import { ViewNotice, viewStructure } from './view-page';

/**
 * A table's page: its tabs (data, structure, indexes), each in a module of its own; a view's, its
 * rows read-only and its definition (./view-page).
 */

const TABS: { tab: TableTab; label: string }[] = [
  { tab: 'data', label: 'Data' },
  { tab: 'structure', label: 'Structure' },
  { tab: 'indexes', label: 'Indexes' },
];
/** A view's: its rows, and its definition in place of a table's structure. */
const VIEW_TABS: { tab: TableTab; label: string }[] = [
  { tab: 'data', label: 'Data' },
  { tab: 'structure', label: 'Definition' },
];

/**
 * The schema's table of that name, else its view: views are looked for only once the structure
 * (tables alone) has no table so named.
 */
function useRelation(schema: string, table: string) {
  const structure = useLoad(() => loadStructure(schema), [schema]);
  const mine = structure.data?.find((entry) => entry.table === table);
  const lookForView = structure.data !== undefined && !mine;
  const views = useLoad(
    async () => (lookForView ? (await loadViews(schema)).views : []),
    [schema, lookForView],
  );
  const view = lookForView ? views.data?.find((entry) => entry.name === table) : undefined;
  const settled = !structure.loading && !(lookForView && views.loading);
  return { structure, mine, view, views, settled };
}

/** The tab beside the data: a view's definition, a table's structure or indexes. */
function OtherTab({
  schema,
  table,
  tab,
  relation: { structure, mine, view, settled },
}: {
  schema: string;
  table: string;
  tab: TableTab;
  relation: ReturnType<typeof useRelation>;
}) {
  if (view)
    return <pre class="sql">{view.definition ?? '(definition not read: a table it reads is locked)'}</pre>;
  if (!mine) {
    return settled ? (
      <p class="error" role="alert">
        Schema {schema} has no table {table} (renamed or dropped?):{' '}
        <a href={href({ page: 'tables', schema })}>its tables</a>.
      </p>
    ) : null;
  }
  return tab === 'structure' ? (
    <Structure schema={schema} structure={mine} onChanged={structure.reload} />
  ) : (
    <IndexesTab schema={schema} structure={mine} onChanged={structure.reload} />
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
  tab: TableTab;
  /** The data tab's view (filters, sort, page) as the hash's query. */
  view: string | undefined;
}) {
  const relation = useRelation(schema, table);
  const { structure, mine, view: asView, views, settled } = relation;
  // A refreshed materialized view's rows are read again.
  const [generation, setGeneration] = useState(0);
  const shown = mine ?? (asView && viewStructure(asView));
  return (
    <section class="page">
      <h1>
        <a href={href({ page: 'tables', schema })}>{schema}</a> / <span class="mono">{table}</span>
      </h1>
      <nav class="tabs">
        {(asView ? VIEW_TABS : TABS).map((t) => (
          <a
            key={t.tab}
            href={href({ page: 'table', schema, table, tab: t.tab })}
            aria-current={tab === t.tab ? 'page' : undefined}
          >
            {t.label}
          </a>
        ))}
      </nav>
      <ErrorText error={structure.error ?? views.error} />
      {asView && (
        <ViewNotice
          schema={schema}
          view={asView}
          onRefreshed={() => {
            views.reload();
            setGeneration((n) => n + 1);
          }}
        />
      )}
      {tab === 'data' ? (
        <Grid
          key={`${schema}.${table}.${generation}`}
          schema={schema}
          table={table}
          structure={settled ? shown : mine}
          tables={structure.data ?? []}
          view={view}
        />
      ) : (
        <OtherTab schema={schema} table={table} tab={tab} relation={relation} />
      )}
    </section>
  );
}
