import { useEffect, useRef, useState } from 'preact/hooks';
import { shownText } from '../time-zone';
import { messageOf } from '../ui';
import { type Column, editorText, parseInput } from '../values';
import { isLongType } from './json-and-arrays';
import { LongValueEditor } from './long-value-editor';
import { ReferencePicker } from './reference-picker';
import type { Reference } from './references';

/**
 * One cell: Enter or double-click edits. A foreign key's cell opens the picker of the referenced
 * table's rows, a json, jsonb or array cell the multi-line editor, any other cell an editor in place: there Enter saves that cell (nothing is sent when the text is
 * unchanged), Esc leaves without sending anything, and the NULL button saves NULL. A failed save
 * keeps the editor open with what was typed, and the message under it. While a save is sent the
 * cell shows the value it had (aria-busy): only the row the server answers replaces it.
 */
export function Cell({
  value,
  column,
  editable,
  row,
  schema,
  reference,
  save,
}: {
  value: unknown;
  column: Column | undefined;
  editable: boolean;
  /** The row's key, as the editors name the row. */
  row: string;
  schema: string;
  reference: Reference | undefined;
  save: (value: unknown) => Promise<void>;
}) {
  const [editing, setEditing] = useState(false);
  const [dialog, setDialog] = useState<'long' | 'pick' | undefined>(undefined);
  const cell = useRef<HTMLTableCellElement>(null);
  // Back to the cell, so the keyboard goes on from where the editor opened.
  const closeDialog = () => {
    setDialog(undefined);
    cell.current?.focus();
  };
  const [text, setText] = useState('');
  const [error, setError] = useState<unknown>(undefined);
  const [saving, setSaving] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const wasEditing = useRef(false);
  // The keyboard goes to the editor each time it opens or a save fails (the autofocus attribute
  // works once per page), and back to the cell when it closes: never to the page's shortcuts.
  useEffect(() => {
    if (editing && !saving) input.current?.focus();
    else if (!editing && wasEditing.current) cell.current?.focus();
    wasEditing.current = editing;
  }, [editing, saving]);
  /** A save from a dialog, shown on the cell until the server answers. */
  const saveShown = async (next: unknown) => {
    setSaving(true);
    try {
      await save(next);
    } finally {
      setSaving(false);
    }
  };
  const original = editorText(column, value);
  const openInPlace = () => {
    setDialog(undefined);
    setText(original);
    setError(undefined);
    setEditing(true);
  };
  const open = () => {
    if (!editable || !column || dialog) return;
    if (reference) setDialog('pick');
    else if (isLongType(column.type)) setDialog('long');
    else openInPlace();
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
            ref={input}
            aria-label="Cell value"
            value={text}
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
      ref={cell}
      class={`${value === null ? 'cell null' : 'cell'}${saving ? ' saving' : ''}`}
      aria-busy={saving ? 'true' : undefined}
      tabIndex={editable ? 0 : -1}
      // The editors' dialogs live in the cell: their keys and clicks are theirs, not the cell's.
      onDblClick={(event) => event.target === event.currentTarget && open()}
      onKeyDown={(event) => {
        if (event.key === 'Enter' && event.target === event.currentTarget) {
          event.preventDefault();
          open();
        }
      }}
    >
      {value === null ? 'NULL' : shownText(column?.type, value)}
      {dialog === 'long' && column && (
        <LongValueEditor column={column} value={value} row={row} save={saveShown} onClose={closeDialog} />
      )}
      {dialog === 'pick' && column && reference && (
        <ReferencePicker
          schema={schema}
          reference={reference}
          current={value}
          nullable={column.nullable}
          onPick={saveShown}
          onType={openInPlace}
          onClose={closeDialog}
        />
      )}
    </td>
  );
}
