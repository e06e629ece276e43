/**
 * CodeMirror 6 with PostgreSQL highlighting and completion of the schema's tables, columns and
 * functions and the other schemas' names.
 * Loaded on demand (a chunk of its own), so the first load of the console stays small.
 */
import {
  autocompletion,
  type Completion,
  closeBrackets,
  closeBracketsKeymap,
  closeCompletion,
  completeFromList,
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

/** What the editor completes besides keywords: the catalog as the page read it. */
export interface CatalogNames {
  /** The schema the page is in: its tables complete without a prefix. */
  schema: string;
  /** Its tables and their columns. */
  tables: Record<string, string[]>;
  /** The other schemas the person may reach (their names complete; `name.` lists nothing more). */
  schemas: string[];
  /** Its functions, with their arguments and result shown beside the name. */
  functions: { name: string; arguments: string; result: string | null; kind: string }[];
}

/** Each function name once: an overloaded one is one completion, its forms in the detail. */
function functionCompletions(routines: CatalogNames['functions']): Completion[] {
  const byName = new Map<string, Completion>();
  for (const f of routines) {
    const form = `(${f.arguments})${f.result ? ` → ${f.result}` : ''}`;
    const procedure = f.kind === 'procedure';
    const seen = byName.get(f.name);
    // A name PostgreSQL would fold or misread is written quoted, as it must be called.
    const called = /^[a-z_][a-z0-9_$]*$/.test(f.name) ? f.name : `"${f.name.replace(/"/g, '""')}"`;
    byName.set(f.name, {
      label: f.name,
      type: procedure ? 'method' : 'function',
      detail: seen ? `${seen.detail}; ${form}` : form,
      apply: procedure ? called : `${called}(`,
      boost: -1,
    });
  }
  return [...byName.values()];
}

export interface SqlEditor {
  view: EditorView;
  setNames(names: CatalogNames): void;
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
  const sqlFor = (names: CatalogNames | undefined) => {
    if (!names) return sql({ dialect: PostgreSQL, upperCaseKeywords: true });
    const namespace = Object.fromEntries([
      ...names.schemas.filter((other) => other !== names.schema).map((other) => [other, {}]),
      [names.schema, names.tables],
    ]);
    const support = sql({
      dialect: PostgreSQL,
      schema: namespace,
      defaultSchema: names.schema,
      upperCaseKeywords: true,
    });
    return [
      support,
      support.language.data.of({ autocomplete: completeFromList(functionCompletions(names.functions)) }),
    ];
  };
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
        language.of(sqlFor(undefined)),
        EditorView.updateListener.of((update) => {
          if (update.docChanged) options.onChange(update.state.doc.toString());
        }),
        EditorView.contentAttributes.of({ 'aria-label': 'SQL' }),
      ],
    }),
  });
  return {
    view,
    setNames: (names) => view.dispatch({ effects: language.reconfigure(sqlFor(names)) }),
    setPosition: (position) => {
      const at = Math.min(Math.max(0, position - 1), view.state.doc.length);
      view.dispatch({ selection: { anchor: at }, scrollIntoView: true });
      view.focus();
    },
    destroy: () => view.destroy(),
  };
}
