import { useEffect, useRef, useState } from 'preact/hooks';
import { Form } from '../ui';
import type { Column } from '../values';
import { describeFilter, familyOf, type Operator, operatorsFor, takesValue, writeFilter } from './filters';

/**
 * The grid's filter bar: one row per condition (column, operator, value), kept in the URL's view.
 */

const PLACEHOLDERS: Record<string, string> = {
  date: '2024-01-31',
  'timestamp with time zone': '2024-01-31 12:00',
  'timestamp without time zone': '2024-01-31 12:00',
  jsonb: '{"key": 1}',
};

const placeholderOf = (type: string) =>
  PLACEHOLDERS[type] ?? (type.endsWith('[]') ? 'a,b' : familyOf(type) === 'ordered' ? '0' : 'value');

/**
 * The filters over the grid: each one a chip (removable), and a form that adds a condition as
 * column, an operator that fits the column's type, and a value when the operator takes one.
 */
export function FilterBar({
  columns,
  filters,
  onChange,
}: {
  columns: Column[];
  filters: string[];
  onChange: (filters: string[]) => void;
}) {
  const [columnName, setColumnName] = useState('');
  const [operatorId, setOperatorId] = useState('');
  const [value, setValue] = useState('');
  const column = columns.find((c) => c.name === columnName) ?? columns[0];
  const operators = column ? operatorsFor(familyOf(column.type)) : [];
  const operator: Operator | undefined = operators.find((op) => op.id === operatorId) ?? operators[0];
  const add = () => {
    if (!column || !operator) return;
    onChange([...filters, writeFilter(column.name, column.type, operator, value)]);
    setValue('');
  };
  return (
    <div class="filter-bar">
      <Form class="inline" aria-label="Add a filter" onSubmit={() => add()}>
        <select
          aria-label="Filter column"
          value={column?.name ?? ''}
          onChange={(event) => {
            setColumnName(event.currentTarget.value);
            setOperatorId('');
          }}
        >
          {columns.map((c) => (
            <option key={c.name} value={c.name}>
              {c.name}
            </option>
          ))}
        </select>
        <select
          aria-label="Filter operator"
          value={operator?.id ?? ''}
          onChange={(event) => setOperatorId(event.currentTarget.value)}
        >
          {operators.map((op) => (
            <option key={op.id} value={op.id}>
              {op.label}
            </option>
          ))}
        </select>
        {operator && takesValue(operator) && (
          <input
            aria-label="Filter value"
            placeholder={column ? placeholderOf(column.type) : ''}
            value={value}
            onInput={(event) => setValue(event.currentTarget.value)}
          />
        )}
        <button type="submit" disabled={!column}>
          Add filter
        </button>
      </Form>
      {filters.length > 0 && (
        <ul class="chips" aria-label="Filters">
          {filters.map((filter, index) => {
            const { column: name, words } = describeFilter(filter);
            return (
              // The same condition may be there twice: its place names it.
              <li key={index} class="chip" title={filter}>
                <span class="mono">{name}</span> {words}
                <button
                  type="button"
                  class="link"
                  aria-label={`Remove filter ${name} ${words}`}
                  onClick={() => onChange(filters.filter((_, i) => i !== index))}
                >
                  ×
                </button>
              </li>
            );
          })}
          {filters.length > 1 && (
            <li>
              <button type="button" class="link" onClick={() => onChange([])}>
                Clear filters
              </button>
            </li>
          )}
        </ul>
      )}
    </div>
  );
}

/** The quick search (`q=`): sent a moment after typing stops, not on every key. */
export function SearchBox({
  q,
  onSearch,
  label = 'Search rows',
  placeholder = 'Search text columns…',
  autoFocus = false,
}: {
  q: string;
  onSearch: (q: string) => void;
  label?: string;
  placeholder?: string;
  autoFocus?: boolean;
}) {
  const [text, setText] = useState(q);
  const sent = useRef(q);
  const search = useRef(onSearch);
  search.current = onSearch;
  // The view changed from elsewhere (a link, Back): show its search.
  useEffect(() => {
    if (q !== sent.current) {
      sent.current = q;
      setText(q);
    }
  }, [q]);
  useEffect(() => {
    if (text === sent.current) return;
    const timer = setTimeout(() => {
      sent.current = text;
      search.current(text);
    }, 300);
    return () => clearTimeout(timer);
  }, [text]);
  return (
    <input
      type="search"
      class="search"
      aria-label={label}
      placeholder={placeholder}
      autoFocus={autoFocus}
      value={text}
      onInput={(event) => setText(event.currentTarget.value)}
    />
  );
}
