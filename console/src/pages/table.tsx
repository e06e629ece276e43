import { Grid } from '../grid/grid';
import { href, type TableTab } from '../router';
import { loadStructure } from '../structure';
import { ErrorText, useLoad } from '../ui';
import { IndexesTab } from './structure/indexes';
import { Structure } from './structure/structure';

/**
 * A table's page: its tabs (data, structure, indexes), each in a module of its own.
 */

const TABS: { tab: TableTab; label: string }[] = [
  { tab: 'data', label: 'Data' },
  { tab: 'structure', label: 'Structure' },
  { tab: 'indexes', label: 'Indexes' },
];

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
  const structure = useLoad(() => loadStructure(schema), [schema]);
  const mine = structure.data?.find((entry) => entry.table === table);
  return (
    <section class="page">
      <h1>
        <a href={href({ page: 'tables', schema })}>{schema}</a> / <span class="mono">{table}</span>
      </h1>
      <nav class="tabs">
        {TABS.map((t) => (
          <a
            key={t.tab}
            href={href({ page: 'table', schema, table, tab: t.tab })}
            aria-current={tab === t.tab ? 'page' : undefined}
          >
            {t.label}
          </a>
        ))}
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
      ) : !mine ? (
        structure.data && (
          <p class="error" role="alert">
            Schema {schema} has no table {table} (renamed or dropped?):{' '}
            <a href={href({ page: 'tables', schema })}>its tables</a>.
          </p>
        )
      ) : tab === 'structure' ? (
        <Structure schema={schema} structure={mine} onChanged={structure.reload} />
      ) : (
        <IndexesTab schema={schema} structure={mine} onChanged={structure.reload} />
      )}
    </section>
  );
}
