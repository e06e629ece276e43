import { useState } from 'preact/hooks';
import { messageOf } from '../ui';
import { type Column, cellText, editorText, parseInput } from '../values';

/**
 * One cell: Enter or double-click edits. In the editor Enter saves that cell (nothing is sent when
 * the text is unchanged), Esc leaves without sending anything, and the NULL button saves NULL. A
 * failed save keeps the editor open with what was typed, and the message under it.
 */
export function Cell({
  value,
  column,
  editable,
  save,
}: {
  value: unknown;
  column: Column | undefined;
  editable: boolean;
  save: (value: unknown) => Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [saving, setSaving] = useState(false);
  const original = editorText(column, value);
  const open = () => {
    if (!editable) return;
    setText(original);
    setError(undefined);
    setEditing(true);
  };
  const close = () => {
    setEditing(false);
    setError(undefined);
  };
  const commit = async (explicit?: null) => {
    if (!column) return;
    if (explicit === undefined && text === original) return close();
    setSaving(true);
    try {
      await save(explicit === null ? null : parseInput(column, text));
      close();
    } catch (failure) {
      setError(failure); // the editor stays open with what was typed
    } finally {
      setSaving(false);
    }
  };
  if (editing) {
    return (
      <td class={error ? 'cell editing failed' : 'cell editing'} title={error ? messageOf(error) : undefined}>
        <span class="cell-editor">
          <input
            aria-label="Cell value"
            value={text}
            autoFocus
            disabled={saving}
            onInput={(event) => setText(event.currentTarget.value)}
            onKeyDown={(event) => {
              if (event.isComposing) return; // Enter that ends an IME composition saves nothing
              if (event.key === 'Enter') {
                event.preventDefault();
                commit();
              } else if (event.key === 'Escape') {
                event.preventDefault();
                close();
              }
            }}
          />
          {column?.nullable && (
            <button
              type="button"
              class="small"
              title="Save NULL"
              disabled={saving}
              onClick={() => commit(null)}
            >
              NULL
            </button>
          )}
        </span>
        {error ? (
          <span class="cell-error" role="alert">
            {messageOf(error)}
          </span>
        ) : null}
      </td>
    );
  }
  return (
    <td
      class={value === null ? 'cell null' : 'cell'}
      tabIndex={editable ? 0 : -1}
      onDblClick={open}
      onKeyDown={(event) => {
        if (event.key === 'Enter') {
          event.preventDefault();
          open();
        }
      }}
    >
      {value === null ? 'NULL' : cellText(value)}
    </td>
  );
}
