import { useState } from 'preact/hooks';
import { api } from '../api';
import { href } from '../router';
import { ErrorText, formatDate, useAction, useLoad } from '../ui';

/**
 * The audit log (GET /api/audit): every change made through the API, newest first, filtered by
 * schema, action, who and time, older pages on demand. A schema's link from its tenant page opens
 * it filtered to that schema.
 */

interface Entry {
  seq: number;
  at: string;
  requestId: string;
  actor: 'admin' | 'key' | 'public';
  keyId: number | null;
  keyName: string | null;
  keyType: string | null;
  schema: string | null;
  action: string;
  target: string | null;
  status: number;
  rows: number | null;
  sqlKind: string | null;
  sqlFingerprint: string | null;
  sqlText: string | null;
}

interface Page {
  entries: Entry[];
  nextCursor: string | null;
}

interface Filters {
  schema: string;
  action: string;
  actor: string;
  from: string;
  to: string;
}

const who = (e: Entry) =>
  e.actor === 'key' ? `key ${e.keyName ?? e.keyId} (${e.keyType})` : e.actor === 'admin' ? 'admin' : 'anyone';

/** A datetime-local input's value as the API takes it (the browser's own time zone). */
const isoOf = (local: string) => (local ? new Date(local).toISOString() : undefined);

const queryOf = (f: Filters, before?: string) => ({
  schema: f.schema || undefined,
  action: f.action || undefined,
  actor: f.actor || undefined,
  from: isoOf(f.from),
  to: isoOf(f.to),
  before,
  limit: '100',
});

function EntryRow({ entry }: { entry: Entry }) {
  const sql = entry.sqlKind
    ? `${entry.sqlKind}${entry.sqlFingerprint ? ` #${entry.sqlFingerprint}` : ''}`
    : '';
  return (
    <tr>
      <td title={entry.requestId}>{formatDate(entry.at)}</td>
      <td>{who(entry)}</td>
      <td class="mono">
        {entry.schema && <a href={href({ page: 'tenants', schema: entry.schema })}>{entry.schema}</a>}
      </td>
      <td class="mono">{entry.action}</td>
      <td class="mono">{entry.target ?? ''}</td>
      <td>{entry.status}</td>
      <td>{entry.rows ?? ''}</td>
      <td class="mono" title={entry.sqlText ?? ''}>
        {sql}
      </td>
    </tr>
  );
}

export function AuditPage({ schema }: { schema: string | undefined }) {
  const [filters, setFilters] = useState<Filters>({
    schema: schema ?? '',
    action: '',
    actor: '',
    from: '',
    to: '',
  });
  const [applied, setApplied] = useState(filters);
  const [older, setOlder] = useState<Page[]>([]);
  const first = useLoad(() => api<Page>('GET', 'audit', { query: queryOf(applied) }), [applied]);
  const pages = first.data ? [first.data, ...older] : [];
  const cursor = pages.at(-1)?.nextCursor ?? null;
  const more = useAction(async () => {
    if (!cursor) return;
    const page = await api<Page>('GET', 'audit', { query: queryOf(applied, cursor) });
    setOlder((list) => [...list, page]);
  });
  const field = (name: keyof Filters) => ({
    value: filters[name],
    onInput: (e: Event) => setFilters({ ...filters, [name]: (e.currentTarget as HTMLInputElement).value }),
  });
  return (
    <section class="page">
      <h1>Audit log</h1>
      <form
        class="filters"
        onSubmit={(e) => {
          e.preventDefault();
          setOlder([]);
          setApplied(filters);
        }}
      >
        <label>
          Schema <input aria-label="Schema" {...field('schema')} placeholder="any" />
        </label>
        <label>
          Action <input aria-label="Action" {...field('action')} placeholder="row, table.create…" />
        </label>
        <label>
          Who{' '}
          <select aria-label="Who" {...field('actor')}>
            <option value="">anyone</option>
            <option value="admin">the admin</option>
            <option value="key">API keys</option>
            <option value="public">unauthenticated (license)</option>
          </select>
        </label>
        <label>
          From <input type="datetime-local" aria-label="From" {...field('from')} />
        </label>
        <label>
          Until <input type="datetime-local" aria-label="Until" {...field('to')} />
        </label>
        <button type="submit">Show</button>
      </form>
      <ErrorText error={first.error} />
      <div class="grid-wrap">
        <table class="grid" aria-label="Audit log">
          <thead>
            <tr>
              <th>When</th>
              <th>Who</th>
              <th>Schema</th>
              <th>Action</th>
              <th>Target</th>
              <th>Status</th>
              <th>Rows</th>
              <th>SQL</th>
            </tr>
          </thead>
          <tbody>
            {pages
              .flatMap((page) => page.entries)
              .map((entry) => (
                <EntryRow key={entry.seq} entry={entry} />
              ))}
          </tbody>
        </table>
      </div>
      {first.data && pages[0]?.entries.length === 0 && <p class="muted">No entries.</p>}
      <ErrorText error={more.error} />
      {cursor && (
        <button type="button" disabled={more.busy} onClick={() => more.run()}>
          Older entries
        </button>
      )}
    </section>
  );
}
