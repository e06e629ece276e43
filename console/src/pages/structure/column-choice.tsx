/** Checkboxes for a set of columns: in the table's order, or in the order ticked. */
export function ColumnChoice({
  label,
  columns,
  chosen,
  onChange,
  ordered = false,
}: {
  label: string;
  columns: string[];
  chosen: string[];
  onChange: (chosen: string[]) => void;
  /** The order they are ticked in counts (an index's key): it is shown, and kept. */
  ordered?: boolean;
}) {
  const add = (name: string) =>
    ordered ? [...chosen, name] : columns.filter((c) => c === name || chosen.includes(c));
  return (
    <fieldset class="choices" aria-label={label}>
      <legend>{label}</legend>
      {columns.map((name) => (
        <label class="inline" key={name}>
          <input
            type="checkbox"
            checked={chosen.includes(name)}
            onChange={(event) =>
              onChange(event.currentTarget.checked ? add(name) : chosen.filter((c) => c !== name))
            }
          />
          {name}
        </label>
      ))}
      {ordered && chosen.length > 1 && <p class="muted">In this order: {chosen.join(', ')}</p>}
    </fieldset>
  );
}
