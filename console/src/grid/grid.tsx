import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { api, may } from '../api';
import { go } from '../router';
import { TimeZoneChoice } from '../time-zone';
import { DropZone, ExportButtons, FileButton, useImport } from '../transfer/transfer-buttons';
import { ErrorText } from '../ui';
import { cellText, primaryKeyOf, readOnlyReason, type TableStructure } from '../values';
import { BulkDelete, BulkEdit } from './bulk-edit';
import { FilterBar, SearchBox } from './filter-bar';
import { ColumnsMenu } from './headers';
import { InsertRow } from './insert-row';
import { type Row, usePageRead } from './page-read';
import { Pager } from './pager';
import { PasteRows } from './paste-rows';
import { RowsTable } from './rows-table';
import { SelectAllMatching, useBulkSelection } from './select-all';
import { firstPage, type GridView, nextSort, PAGE_SIZES, readView, rowsQuery, writeView } from './view';

/** Whether the person may write, and these are a table's rows (a view's are only read). */
const mayChangeRows = (structure: TableStructure | undefined) => may('write') && !structure?.relation;

/**
 * The rows of a table as the view in the URL asks (console/src/grid/view.ts): filtered, searched,
 * sorted, some columns hidden, paged by the answer's cursor; cells edit in place (json, jsonb and
 * arrays in a multi-line editor, foreign keys by a picker), and the selected rows are edited or
 * deleted together, each after saying how many rows it touches. A person who may not write gets
 * the reading and the exports only.
 */
export function Grid({
  schema,
  table,
  structure,
  tables,
  view: viewText,
}: {
  schema: string;
  table: string;
  structure: TableStructure | undefined;
  /** The schema's tables, for the foreign keys' pickers. */
  tables: TableStructure[];
  view: string | undefined;
}) {
  const view = useMemo(() => readView(viewText), [viewText]);
  const show = useCallback(
    (next: GridView, options?: { replace?: boolean }) =>
      go({ page: 'table', schema, table, tab: 'data', view: writeView(next) }, options),
    [schema, table],
  );
  const [dialog, setDialog] = useState<'insert' | 'paste' | 'edit' | 'delete' | undefined>(undefined);
  const columns = structure?.columns ?? [];
  const page = usePageRead(schema, table, view, columns);
  const recount = page.recount;
  /** Saves one cell; the row as stored replaces its row by id in whatever page is shown now. */
  const saveCell = async (id: string, column: string, value: unknown) => {
    const answer = await api<{ row: Row }>(
      'PATCH',
      `table/${encodeURIComponent(table)}/${encodeURIComponent(id)}`,
      { body: { column, value, schema } },
    );
    page.setData(
      (shown) => shown && { ...shown, data: shown.data.map((row) => (idOf(row) === id ? answer.row : row)) },
    );
  };
  const importing = useImport(schema, structure, recount);
  const reason = readOnlyReason(structure);
  // Without write, or on a view, the grid only reads: no inserts, imports or edits, and no selection (it serves
  // only the bulk edit and delete; exports follow the view).
  const writes = mayChangeRows(structure);
  const key = primaryKeyOf(structure);
  const idOf = (row: Row) => (key ? cellText(row[key.name]) : '');
  const data = page.data;
  const pages = page.pages;
  const selection = useBulkSelection(view, key?.name, data, page.reading);
  // After rows went away, a page past the end shows the last one.
  useEffect(() => {
    if (data?.totalExact && page.settled && view.page > pages) show(page.turn(pages), { replace: true });
  }, [data, page.settled, page.turn, view, pages, show]);

  const turn = (to: number) => show(page.turn(to));
  const onSearch = useCallback((q: string) => show(firstPage(view, { q }), { replace: true }), [show, view]);
  const body = (
    <>
      <div class="toolbar">
        {writes && (
          <>
            <button type="button" class="primary" disabled={!structure} onClick={() => setDialog('insert')}>
              Insert row
            </button>
            <button type="button" disabled={!structure} onClick={() => setDialog('paste')}>
              Paste rows
            </button>
            <button type="button" disabled={!selection.target} onClick={() => setDialog('edit')}>
              Edit selected ({selection.chosen})
            </button>
            <button
              type="button"
              class="danger"
              disabled={!selection.target}
              onClick={() => setDialog('delete')}
            >
              Delete selected ({selection.chosen})
            </button>
            <FileButton label="Import a file" onFile={importing.open} />
          </>
        )}
        <ExportButtons
          schema={schema}
          table={table}
          query={rowsQuery(view, columns, { keepKey: false })}
          total={data?.total ?? 0}
          keyed={(structure?.columns ?? []).some((c) => c.primaryKey)}
        />
        <span class="spacer" />
        <SearchBox q={view.q} onSearch={onSearch} />
        <TimeZoneChoice />
        <ColumnsMenu
          columns={columns}
          hidden={view.hidden}
          onChange={(hidden) => show({ ...view, hidden })}
        />
        <span class="inline">
          <span class="muted">Rows per page</span>
          <select
            aria-label="Rows per page"
            value={String(view.limit)}
            onChange={(e) => show(firstPage(view, { limit: Number(e.currentTarget.value) }))}
          >
            {PAGE_SIZES.map((size) => (
              <option key={size}>{size}</option>
            ))}
          </select>
        </span>
      </div>
      <FilterBar
        columns={columns}
        filters={view.filters}
        onChange={(filters) => show(firstPage(view, { filters }))}
      />
      {writes && reason && <p class="warning">Read-only: {reason}.</p>}
      <SelectAllMatching
        offered={writes && key !== undefined}
        pageRows={data?.data.length}
        selected={selection.selected.size}
        matching={selection.matching}
        allMatching={selection.allMatching}
        filtered={view.filters.length > 0 || view.q !== ''}
        onAll={() => selection.setAllMatching(true)}
        onClear={selection.clearSelection}
      />
      <ErrorText error={page.error} />
      {data && (
        <RowsTable
          schema={schema}
          table={table}
          structure={structure}
          tables={tables}
          rows={data.data}
          names={data.columns.filter((name) => !view.hidden.includes(name))}
          columns={columns}
          sort={view.sort}
          keyColumn={key?.name}
          readOnly={!writes || !!reason}
          selected={selection.selected}
          onSort={(column, adding) => show(firstPage(view, { sort: nextSort(view.sort, column, adding) }))}
          onToggle={selection.toggle}
          onSelectPage={selection.selectPage}
          onSave={saveCell}
        />
      )}
      <Pager
        page={view.page}
        total={data && { rows: data.total, exact: data.totalExact }}
        limit={view.limit}
        loading={!page.settled}
        last={page.last}
        fromEnd={page.fromEnd}
        onTurn={turn}
        onLast={() => show(page.toLast())}
      />
      {dialog === 'insert' && structure && (
        <InsertRow
          schema={schema}
          table={table}
          structure={structure}
          onClose={() => setDialog(undefined)}
          onInserted={recount}
        />
      )}
      {dialog === 'paste' && structure && (
        <PasteRows
          schema={schema}
          structure={structure}
          onClose={() => setDialog(undefined)}
          onInserted={recount}
        />
      )}
      {dialog === 'edit' && structure && selection.target && (
        <BulkEdit
          schema={schema}
          structure={structure}
          tables={tables}
          target={selection.target}
          onClose={() => setDialog(undefined)}
          onChanged={async () => {
            // Edited rows may no longer match the filter: what is selected is what was shown.
            selection.clearSelection();
            await recount();
          }}
        />
      )}
      {dialog === 'delete' && selection.target && (
        <BulkDelete
          schema={schema}
          table={table}
          target={selection.target}
          onClose={() => setDialog(undefined)}
          onDeleted={async () => {
            selection.clearSelection();
            setDialog(undefined);
            await recount();
          }}
        />
      )}
      {importing.dialog}
    </>
  );
  // Dropping a file imports it: a drop zone only for someone who may write.
  return writes ? (
    <DropZone label={`Drop a file to import into ${table}`} onFile={importing.open}>
      {body}
    </DropZone>
  ) : (
    body
  );
}
