import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { href } from '../router';
import { ErrorText, formatDate, useAction, useLoad } from '../ui';

/**
 * One migration across tenant schemas (GET /api/migrations/ID): its SQL, where it stands, and Run,
 * which calls POST .../run one slice at a time until no schema is pending, so that no request
 * outlasts the server's own time limit; Pause lets the slice in flight end and starts no other.
 * Failed schemas show PostgreSQL's own error, and go back to pending with Retry, one or all.
 */

export const STATES = ['pending', 'running', 'applied', 'failed', 'skipped'] as const;
export type State = (typeof STATES)[number];
export type Counts = Record<State, number>;

export type Target = { all: true } | { template: string } | { schemas: string[] };

interface SchemaEntry {
  schema: string;
  state: State;
  reason: string | null;
  sqlstate: string | null;
  attempts: number;
  finishedAt: string | null;
}

interface Progress {
  id: string;
  name: string;
  sql: string;
  lockTimeoutMs: number;
  concurrency: number;
  target: Target;
  createdBy: string | null;
  createdAt: string;
  counts: Counts;
  done: boolean;
  schemasPerSecond: number | null;
  schemas: SchemaEntry[];
  nextAfter: string | null;
}

/** How long each run call starts schemas for: well inside a request's limit, and Pause soon heard. */
const BUDGET_MS = 5000;
const PAGE = 100;

export const countsText = (c: Counts) => {
  const running = c.running > 0 ? `, ${c.running} running` : '';
  return `${c.applied} applied, ${c.failed} failed, ${c.skipped} skipped, ${c.pending} pending${running}`;
};

export const targetText = (t: Target) =>
  'all' in t
    ? 'every tenant schema'
    : 'template' in t
      ? `${t.template} and every schema copied from it`
      : t.schemas.join(', ');

const path = (id: string, action = '') => `migrations/${encodeURIComponent(id)}${action}`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Run: slices one after another until done, each answer shown as it comes. A pause cannot call
 * back the slice in flight (the server finishes what it started), so it stops the loop after it;
 * leaving the page pauses too.
 */
function useRunner(id: string, onProgress: (progress: Progress) => void) {
  const pauseAsked = useRef(false);
  const [pausing, setPausing] = useState(false);
  useEffect(
    () => () => {
      pauseAsked.current = true;
    },
    [],
  );
  const action = useAction(async () => {
    pauseAsked.current = false;
    setPausing(false);
    let settled = -1;
    for (;;) {
      const now = await api<Progress>('POST', path(id, '/run'), { body: { budgetMs: BUDGET_MS } });
      onProgress(now);
      if (now.done || pauseAsked.current) return;
      // Nothing settled: another run holds the schemas left (another tab). Wait, rather than ask
      // again at once.
      const next = now.counts.applied + now.counts.failed + now.counts.skipped;
      if (next === settled) await sleep(1000);
      settled = next;
    }
  });
  const pause = () => {
    pauseAsked.current = true;
    setPausing(true);
  };
  return { ...action, pause, pausing };
}

function Standing({ m }: { m: Progress }) {
  const c = m.counts;
  const total = STATES.reduce((sum, state) => sum + c[state], 0);
  const settled = c.applied + c.failed + c.skipped;
  return (
    <div class="card" role="status" aria-label="Progress">
      <progress value={settled} max={Math.max(total, 1)} />
      <p>
        {settled} of {total} schemas settled: {countsText(c)}.
        {m.schemasPerSecond !== null && ` ${m.schemasPerSecond} schemas per second.`}
      </p>
      {m.done && (
        <p class={c.failed > 0 ? 'warning' : 'success'}>
          The migration is done: {c.applied} applied, {c.failed} failed, {c.skipped} skipped.
          {c.failed > 0 && ' Each failed schema was left as it was: fix it, retry it below, and run again.'}
        </p>
      )}
    </div>
  );
}

/** A page of the migration's schemas (by name), in one state or all; Retry on the failed, if given. */
function SchemaTable(props: {
  id: string;
  state: State | undefined;
  label: string;
  /** Changes when the counts do: the page is read again. */
  version: string;
  onRetry?: (schema: string) => void;
}) {
  const { id, state, label, version, onRetry } = props;
  const [after, setAfter] = useState<string | undefined>(undefined);
  const page = useLoad(
    () => api<Progress>('GET', path(id), { query: { state, after, limit: PAGE } }),
    [id, state, after, version],
  );
  const rows = page.data?.schemas ?? [];
  const next = page.data?.nextAfter;
  return (
    <>
      <ErrorText error={page.error} />
      <div class="grid-wrap">
        <table class="grid" aria-label={label}>
          <thead>
            <tr>
              <th>Schema</th>
              <th>State</th>
              <th>Attempts</th>
              <th>Finished</th>
              <th>SQLSTATE</th>
              <th>Error (PostgreSQL's) or why</th>
              {onRetry && <th />}
            </tr>
          </thead>
          <tbody>
            {rows.map((s) => (
              <tr key={s.schema}>
                <td class="mono">
                  <a href={href({ page: 'tables', schema: s.schema })}>{s.schema}</a>
                </td>
                <td>{s.state}</td>
                <td>{s.attempts}</td>
                <td>{formatDate(s.finishedAt)}</td>
                <td class="mono">{s.sqlstate ?? ''}</td>
                <td class="reason">{s.reason ?? ''}</td>
                {onRetry && (
                  <td>
                    <button type="button" class="small" onClick={() => onRetry(s.schema)}>
                      Retry
                    </button>
                  </td>
                )}
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {page.data && rows.length === 0 && <p class="muted">None.</p>}
      <div class="pager">
        {after !== undefined && (
          <button type="button" onClick={() => setAfter(undefined)}>
            First page
          </button>
        )}
        {next && (
          <button type="button" onClick={() => setAfter(next)}>
            Next page
          </button>
        )}
      </div>
    </>
  );
}

export function MigrationDetail({ id }: { id: string }) {
  // The page's own tables read the schemas: this reads only the migration and its counts.
  const progress = useLoad(() => api<Progress>('GET', path(id), { query: { limit: 1 } }), [id]);
  const runner = useRunner(id, progress.setData);
  const retry = useAction(async (schemas?: string[]) => {
    progress.setData(await api<Progress>('POST', path(id, '/retry'), { body: schemas ? { schemas } : {} }));
  });
  const [filter, setFilter] = useState('');
  const m = progress.data;
  const version = m ? STATES.map((state) => m.counts[state]).join('.') : '';
  return (
    <section class="page">
      <h1>
        <a href={href({ page: 'migrations' })}>Migrations</a> / <span class="mono">{m?.name ?? id}</span>
      </h1>
      <ErrorText error={progress.error} />
      {m && (
        <>
          <dl class="facts">
            <dt>Target</dt>
            <dd>{targetText(m.target)}</dd>
            <dt>Runs as</dt>
            <dd>each schema’s own role</dd>
            <dt>Each schema</dt>
            <dd>
              waits {m.lockTimeoutMs} ms at most for a lock; {m.concurrency} at a time
            </dd>
            <dt>Created</dt>
            <dd>
              {formatDate(m.createdAt)}
              {m.createdBy && ` by ${m.createdBy}`}
            </dd>
          </dl>
          <pre class="sql migration-sql">{m.sql}</pre>
          <Standing m={m} />
          <div class="toolbar">
            {runner.busy && (
              <button type="button" onClick={runner.pause} disabled={runner.pausing}>
                {runner.pausing ? 'Pausing…' : 'Pause'}
              </button>
            )}
            {!runner.busy && !m.done && (
              <button type="button" class="primary" onClick={() => runner.run()}>
                Run
              </button>
            )}
          </div>
          <ErrorText error={runner.error ?? retry.error} />
          {m.counts.failed > 0 && (
            <section aria-label="Failed">
              <h2>Failed</h2>
              <div class="toolbar">
                <button type="button" disabled={retry.busy} onClick={() => retry.run()}>
                  Retry all failed
                </button>
                <span class="muted">Retry makes them pending again; Run changes them.</span>
              </div>
              <SchemaTable
                id={id}
                state="failed"
                label="Failed schemas"
                version={version}
                onRetry={(schema) => retry.run([schema])}
              />
            </section>
          )}
          <h2>Schemas</h2>
          <label class="inline">
            Show{' '}
            <select
              aria-label="Show schemas"
              value={filter}
              onChange={(e) => setFilter(e.currentTarget.value)}
            >
              <option value="">all</option>
              {STATES.map((state) => (
                <option key={state}>{state}</option>
              ))}
            </select>
          </label>
          <SchemaTable
            key={filter}
            id={id}
            state={(filter || undefined) as State | undefined}
            label="Schemas of the migration"
            version={version}
          />
        </>
      )}
    </section>
  );
}
