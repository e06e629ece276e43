/**
 * CodeMirror 6 with PostgreSQL highlighting and completion of the schema's tables and columns.
 * Loaded on demand (a chunk of its own), so the first load of the console stays small.
 */
import {
  autocompletion,
  closeBrackets,
  closeBracketsKeymap,
  closeCompletion,
  completionKeymap,
} from '@codemirror/autocomplete';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { PostgreSQL, sql } from '@codemirror/lang-sql';
import { bracketMatching, HighlightStyle, syntaxHighlighting } from '@codemirror/language';
import { Compartment, EditorState } from '@codemirror/state';
import {
  drawSelection,
  EditorView,
  highlightActiveLine,
  keymap,
  lineNumbers,
  placeholder,
} from '@codemirror/view';
import { tags } from '@lezer/highlight';

const highlight = HighlightStyle.define([
  { tag: tags.keyword, color: 'var(--sql-keyword)', fontWeight: '600' },
  { tag: [tags.string, tags.special(tags.string)], color: 'var(--sql-string)' },
  { tag: [tags.number, tags.bool, tags.null], color: 'var(--sql-number)' },
  { tag: tags.comment, color: 'var(--muted)', fontStyle: 'italic' },
  { tag: [tags.typeName, tags.standard(tags.name)], color: 'var(--sql-type)' },
]);

export interface SqlEditor {
  view: EditorView;
  setTables(tables: Record<string, string[]>): void;
  setPosition(position: number): void;
  destroy(): void;
}

export function createSqlEditor(options: {
  parent: HTMLElement;
  doc: string;
  nonce: string | undefined;
  onChange: (text: string) => void;
  onRun: () => void;
}): SqlEditor {
  const language = new Compartment();
  const sqlFor = (tables: Record<string, string[]>) =>
    sql({ dialect: PostgreSQL, schema: tables, upperCaseKeywords: true });
  const run = (target: EditorView) => {
    closeCompletion(target);
    options.onRun();
    return true;
  };
  const view = new EditorView({
    parent: options.parent,
    state: EditorState.create({
      doc: options.doc,
      extensions: [
        ...(options.nonce ? [EditorView.cspNonce.of(options.nonce)] : []),
        lineNumbers(),
        history(),
        drawSelection(),
        highlightActiveLine(),
        bracketMatching(),
        closeBrackets(),
        autocompletion({ activateOnTyping: true, icons: false }),
        syntaxHighlighting(highlight),
        placeholder('SELECT * FROM …   (Ctrl/Cmd+Enter runs)'),
        keymap.of([
          { key: 'Mod-Enter', run, preventDefault: true },
          ...closeBracketsKeymap,
          ...completionKeymap,
          ...historyKeymap,
          ...defaultKeymap,
          indentWithTab,
        ]),
        language.of(sqlFor({})),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) options.onChange(update.state.doc.toString());
        }),
        EditorView.contentAttributes.of({ 'aria-label': 'SQL' }),
      ],
    }),
  });
  return {
    view,
    setTables: (tables) => view.dispatch({ effects: language.reconfigure(sqlFor(tables)) }),
    setPosition: (position) => {
      const at = Math.min(Math.max(0, position - 1), view.state.doc.length);
      view.dispatch({ selection: { anchor: at }, scrollIntoView: true });
      view.focus();
    },
    destroy: () => view.destroy(),
  };
}
