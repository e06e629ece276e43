import { useState } from 'preact/hooks';
import { Dialog, ErrorText, useAction } from '../ui';
import type { Column } from '../values';
import { longEditorText, readLongValue } from './json-and-arrays';

/** What the multi-line editor accepts, under its text. */
export const longValueHint = (type: string) =>
  type.endsWith('[]')
    ? 'A PostgreSQL array literal, {a,"b c",NULL}, or a JSON array.'
    : 'JSON: a string needs "double quotes".';

/**
 * A json, jsonb or array cell's editor: the value over several lines, checked before anything is
 * sent. A text that is not valid shows where, inline, and sends nothing; Ctrl/Cmd+Enter saves,
 * Esc leaves. A failed save keeps the editor open with what was typed.
 */
export function LongValueEditor({
  column,
  value,
  row,
  save,
  onClose,
}: {
  column: Column;
  value: unknown;
  /** The row's key, for the title. */
  row: string;
  save: (value: unknown) => Promise<void>;
  onClose: () => void;
}) {
  const original = longEditorText(column, value);
  const [text, setText] = useState(original);
  const saving = useAction(async (explicit?: null) => {
    if (explicit === undefined && text === original) return onClose();
    // Checked here: a value that does not read sends nothing.
    await save(explicit === null ? null : readLongValue(column, text));
    onClose();
  });
  const format = () => {
    try {
      setText(longEditorText(column, readLongValue(column, text)));
    } catch (error) {
      saving.setError(error);
    }
  };
  return (
    <Dialog title={`${column.name} of row ${row}`} onClose={onClose}>
      <p class="muted">
        {column.type} · {longValueHint(column.type)} Ctrl/Cmd+Enter saves, Esc leaves without saving.
      </p>
      <textarea
        class="long-value"
        aria-label="Cell value"
        value={text}
        spellcheck={false}
        autoFocus
        disabled={saving.busy}
        onInput={(event) => {
          setText(event.currentTarget.value);
          saving.setError(undefined);
        }}
        onKeyDown={(event) => {
          if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) {
            event.preventDefault();
            saving.run();
          }
        }}
      />
      <ErrorText error={saving.error} />
      <div class="actions">
        <button type="button" onClick={format} disabled={saving.busy}>
          Format
        </button>
        {column.nullable && (
          <button type="button" onClick={() => saving.run(null)} disabled={saving.busy}>
            Save NULL
          </button>
        )}
        <span class="spacer" />
        <button type="button" onClick={onClose}>
          Cancel
        </button>
        <button type="button" class="primary" onClick={() => saving.run()} disabled={saving.busy}>
          Save
        </button>
      </div>
    </Dialog>
  );
}
