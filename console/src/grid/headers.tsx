import type { Column } from '../values';
import type { SortKey } from './view';

/**
 * The grid's header row: each column's name and type; a click sorts by it (asc → desc → off),
 * shift-click adds it to the sort. The header shows the direction, and the position when the sort
 * has more than one column.
 */
export function HeaderRow({
  names,
  columns,
  sort,
  selectable,
  pageSelected,
  onSelectPage,
  onSort,
}: {
  names: string[];
  columns: Column[];
  sort: SortKey[];
  selectable: boolean;
  /** Every row of the page is selected. */
  pageSelected: boolean;
  onSelectPage: (on: boolean) => void;
  onSort: (column: string, adding: boolean) => void;
}) {
  return (
    <tr>
      {selectable && (
        <th class="select">
          <input
            type="checkbox"
            aria-label="Select every row of this page"
            checked={pageSelected}
            onChange={(event) => onSelectPage(event.currentTarget.checked)}
          />
        </th>
      )}
      {names.map((name) => {
        const type = columns.find((c) => c.name === name)?.type;
        const position = sort.findIndex((key) => key.column === name);
        const key = sort[position];
        return (
          <th
            key={name}
            aria-sort={key ? (key.descending ? 'descending' : 'ascending') : undefined}
            title={type ? `${name} (${type})` : name}
          >
            <button
              type="button"
              class="sort"
              aria-label={`Sort by ${name}`}
              title="Sort by this column; shift-click adds it to the sort"
              onClick={(event) => onSort(name, event.shiftKey)}
            >
              {name}
              {key && (
                <span class="sorted" data-testid={`sort-${name}`}>
                  {key.descending ? ' ▼' : ' ▲'}
                  {sort.length > 1 ? position + 1 : ''}
                </span>
              )}
            </button>
            {type && <span class="column-type">{type}</span>}
          </th>
        );
      })}
    </tr>
  );
}

/** Which columns the grid shows: a menu of checkboxes (the hidden ones stay out of the page read). */
export function ColumnsMenu({
  columns,
  hidden,
  onChange,
}: {
  columns: Column[];
  hidden: string[];
  onChange: (hidden: string[]) => void;
}) {
  return (
    <details class="menu">
      <summary>Columns{hidden.length > 0 ? ` (${hidden.length} hidden)` : ''}</summary>
      <fieldset class="menu-items" aria-label="Shown columns">
        {columns.map((column) => (
          <label class="inline" key={column.name}>
            <input
              type="checkbox"
              checked={!hidden.includes(column.name)}
              // The last column shown stays: a grid of no columns shows nothing to click.
              disabled={!hidden.includes(column.name) && columns.length - hidden.length <= 1}
              onChange={(event) =>
                onChange(
                  event.currentTarget.checked
                    ? hidden.filter((name) => name !== column.name)
                    : [...hidden, column.name],
                )
              }
            />
            {column.name}
          </label>
        ))}
        {hidden.length > 0 && (
          <button type="button" class="link" onClick={() => onChange([])}>
            Show all
          </button>
        )}
      </fieldset>
    </details>
  );
}
