import { type Column, cellText, type TableStructure } from '../values';
import { Cell } from './cell';
import { HeaderRow } from './headers';
import { referenceOf } from './references';
import type { SortKey } from './view';

/**
 * The grid's table of rows: headers, selectable rows and cells that edit in place.
 */

type Row = Record<string, unknown>;

/** The page's rows under their headers; a row is selectable and its cells editable unless read-only. */
export function RowsTable({
  schema,
  table,
  structure,
  tables,
  rows,
  names,
  columns,
  sort,
  keyColumn,
  readOnly,
  selected,
  onSort,
  onToggle,
  onSelectPage,
  onSave,
}: {
  schema: string;
  table: string;
  structure: TableStructure | undefined;
  /** The schema's tables: a foreign key's cell picks a row of the one it references. */
  tables: TableStructure[];
  rows: Row[];
  /** The columns shown, in the answer's order. */
  names: string[];
  columns: Column[];
  sort: SortKey[];
  keyColumn: string | undefined;
  readOnly: boolean;
  selected: Set<string>;
  onSort: (column: string, adding: boolean) => void;
  onToggle: (id: string) => void;
  /** Selects every row of the page (their ids), or none. */
  onSelectPage: (ids: string[]) => void;
  onSave: (id: string, column: string, value: unknown) => Promise<void>;
}) {
  const references = new Map(names.map((name) => [name, referenceOf(structure, tables, name, schema)]));
  const ids = keyColumn ? rows.map((row) => cellText(row[keyColumn])) : [];
  const pageSelected = ids.length > 0 && ids.every((id) => selected.has(id));
  return (
    <div class="grid-wrap">
      <table class="grid" aria-label={`Rows of ${table}`}>
        <thead>
          <HeaderRow
            names={names}
            columns={columns}
            sort={sort}
            selectable={!readOnly}
            pageSelected={pageSelected}
            onSelectPage={(on) => onSelectPage(on ? ids : [])}
            onSort={onSort}
          />
        </thead>
        <tbody>
          {rows.map((row, index) => {
            const id = keyColumn ? cellText(row[keyColumn]) : '';
            return (
              <tr key={readOnly ? index : id}>
                {!readOnly && (
                  <td class="select">
                    <input
                      type="checkbox"
                      aria-label={`Select row ${id}`}
                      checked={selected.has(id)}
                      onChange={() => onToggle(id)}
                    />
                  </td>
                )}
                {names.map((name) => {
                  const column = columns.find((c) => c.name === name);
                  return (
                    <Cell
                      key={name}
                      value={row[name]}
                      column={column}
                      editable={!readOnly && !!column}
                      row={id}
                      schema={schema}
                      reference={references.get(name)}
                      save={(value) => onSave(id, name, value)}
                    />
                  );
                })}
              </tr>
            );
          })}
        </tbody>
      </table>
      {rows.length === 0 && <p class="muted">No rows.</p>}
    </div>
  );
}
