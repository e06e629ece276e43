import { useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorText, Form, useAction, useLoad } from '../ui';

/**
 * The SQL page's library, kept on the server for the person signed in: their history (every run
 * sent with history: true, searched, newest first) and their snippets, named SQL kept for
 * themselves or shared with the team (the people whose scope holds its schema).
 */

interface HistoryEntry {
  id: number;
  schema: string;
  sql: string;
  cut: boolean;
  ranAt: string;
  durationMs: number | null;
  ok: boolean;
  rowCount: number | null;
  error: string | null;
}

interface Snippet {
  id: number;
  name: string;
  sql: string;
  schema: string | null;
  shared: boolean;
  author: string;
  mine: boolean;
}

const PAGE = 50;
const shortened = (sql: string) => (sql.length > 120 ? `${sql.slice(0, 120)}…` : sql);

/** The person's runs: `generation` grows with each run, so the newest shows at once. */
export function HistoryPanel({ generation, onLoad }: { generation: number; onLoad: (sql: string) => void }) {
  const [q, setQ] = useState('');
  const [older, setOlder] = useState<HistoryEntry[]>([]);
  const [next, setNext] = useState<number | null>(null);
  const first = useLoad(async () => {
    setOlder([]);
    setNext(null);
    return api<{ entries: HistoryEntry[]; next: number | null }>('GET', 'sql/history', {
      query: { limit: String(PAGE), ...(q ? { q } : {}) },
    });
  }, [q, generation]);
  // Where older runs start: the last page's, once one is shown.
  const cursor = older.length > 0 ? next : (first.data?.next ?? null);
  const more = useAction(async () => {
    const before = cursor;
    if (before === null) return;
    const page = await api<{ entries: HistoryEntry[]; next: number | null }>('GET', 'sql/history', {
      query: { limit: String(PAGE), before: String(before), ...(q ? { q } : {}) },
    });
    setOlder((shown) => [...shown, ...page.entries]);
    setNext(page.next);
  });
  const clear = useAction(async () => {
    if (!window.confirm('Forget your whole SQL history?')) return;
    await api('DELETE', 'sql/history');
    first.reload();
  });
  const entries = [...(first.data?.entries ?? []), ...older];
  return (
    <details class="history">
      <summary>History</summary>
      <p class="toolbar">
        <input
          type="search"
          aria-label="Search history"
          placeholder="Search your history"
          value={q}
          title="Enter searches"
          onChange={(e) => setQ(e.currentTarget.value)}
        />{' '}
        <button type="button" onClick={() => clear.run()} disabled={entries.length === 0}>
          Clear history
        </button>
      </p>
      <ErrorText error={first.error ?? more.error ?? clear.error} />
      {first.data && entries.length === 0 && (
        <p class="muted">{q ? 'Nothing ran matches.' : 'Nothing run yet.'}</p>
      )}
      <ul aria-label="History">
        {entries.map((entry) => (
          <li key={entry.id}>
            <span class={entry.ok ? 'muted' : 'error'} title={entry.error ?? undefined}>
              {entry.ok ? '✓' : '✗'}
            </span>{' '}
            <button type="button" class="link mono" onClick={() => onLoad(entry.sql)}>
              {shortened(entry.sql)}
            </button>
            <span class="muted">
              {' '}
              {entry.schema} · {new Date(entry.ranAt).toLocaleString()}
              {entry.durationMs !== null ? ` · ${entry.durationMs} ms` : ''}
              {entry.cut ? ' · kept cut' : ''}
            </span>
          </li>
        ))}
      </ul>
      {cursor !== null && (
        <button type="button" onClick={() => more.run()} disabled={more.busy}>
          Older runs
        </button>
      )}
    </details>
  );
}

/** Saves the editor's text as a snippet: named, for oneself or shared with this schema's people. */
function SaveSnippet({ schema, text, onSaved }: { schema: string; text: () => string; onSaved: () => void }) {
  const [name, setName] = useState('');
  const [shared, setShared] = useState(false);
  const save = useAction(async () => {
    await api('POST', 'sql/snippets', { body: { name, sql: text(), schema, shared } });
    setName('');
    onSaved();
  });
  return (
    <Form onSubmit={() => save.run()} aria-label="Save as snippet">
      <input
        aria-label="Snippet name"
        placeholder="Name"
        value={name}
        required
        maxLength={200}
        onInput={(e) => setName(e.currentTarget.value)}
      />{' '}
      <label class="inline">
        <input type="checkbox" checked={shared} onChange={(e) => setShared(e.currentTarget.checked)} /> shared
        with the team
      </label>{' '}
      <button type="submit" disabled={save.busy || !name.trim()}>
        Save the editor’s SQL
      </button>
      <ErrorText error={save.error} />
    </Form>
  );
}

export function SnippetsPanel({
  schema,
  text,
  onLoad,
}: {
  schema: string;
  text: () => string;
  onLoad: (sql: string) => void;
}) {
  const list = useLoad(() => api<{ snippets: Snippet[] }>('GET', 'sql/snippets'), []);
  const change = useAction(async (snippet: Snippet, what: 'share' | 'delete') => {
    const path = `sql/snippets/${snippet.id}`;
    if (what === 'delete') {
      if (!window.confirm(`Delete the snippet “${snippet.name}”?`)) return;
      await api('DELETE', path);
    } else await api('PATCH', path, { body: { shared: !snippet.shared } });
    list.reload();
  });
  const snippets = list.data?.snippets ?? [];
  return (
    <details class="history">
      <summary>Snippets ({snippets.length})</summary>
      <SaveSnippet schema={schema} text={text} onSaved={list.reload} />
      <ErrorText error={list.error ?? change.error} />
      <ul aria-label="Snippets">
        {snippets.map((snippet) => (
          <li key={snippet.id}>
            <button type="button" class="link" onClick={() => onLoad(snippet.sql)} title={snippet.sql}>
              {snippet.name}
            </button>
            <span class="muted">
              {' '}
              {snippet.shared ? 'shared' : 'yours'}
              {snippet.schema ? ` · ${snippet.schema}` : ''}
              {snippet.mine ? '' : ` · by ${snippet.author}`}
            </span>
            {snippet.mine && (
              <>
                {' '}
                <button type="button" class="link" onClick={() => change.run(snippet, 'share')}>
                  {snippet.shared ? 'Stop sharing' : 'Share'}
                </button>{' '}
                <button type="button" class="link" onClick={() => change.run(snippet, 'delete')}>
                  Delete
                </button>
              </>
            )}
          </li>
        ))}
      </ul>
    </details>
  );
}
