import { useEffect, useState } from 'preact/hooks';
import { api, may } from '../api';
import { formatBytes } from '../changes/preview';
import { href } from '../router';
import { Dialog, ErrorText, formatDate, useAction, useLoad } from '../ui';
import { BackupsSection } from './backups';
import { DriftCell, DriftSection, useDrift } from './drift';
import { type Quota, QuotaSection, storageText } from './quota';

/**
 * The tenants side by side (GET /api/tenants, read again every 5 s), and one tenant's sessions:
 * what each runs and for how long, what it waits for, holds and is blocked by, with Cancel (its
 * statement) and End (the tenant's own logins only) for a person with tenants.manage.
 */

const REFRESH_MS = 5000;

interface Figures {
  schema: string;
  tables: number;
  estimatedRows: number;
  sizeBytes: number;
  connections: number;
  active: number;
  activeSeconds: number;
  quota: Quota | null;
}

interface Session {
  pid: number;
  backendStart: string;
  queryStart: string | null;
  role: string;
  state: string | null;
  transactionSeconds: number | null;
  querySeconds: number | null;
  wait: string | null;
  query: string | null;
  /** The service's pooled session, idle since its reset: its last statement is ours, not shown. */
  poolReset: boolean;
  blockedBy: number[];
  locks: { mode: string; relation: string | null }[];
}

interface Tenant extends Figures {
  sessions: Session[];
  blocking: { pid: number; role: string; blockedBy: number[] }[];
  keys: { name: string; type: string; active: boolean; lastUsedAt: string | null; requests: number }[];
}

/**
 * `load`, read again a few seconds after each answer while the page is shown and its tab visible:
 * a slow database gets one read at a time, not a pile of them that each supersede the last.
 */
function useRefreshed<T>(load: () => Promise<T>, deps: unknown[]) {
  const loaded = useLoad(load, deps);
  useEffect(() => {
    if (loaded.loading) return;
    const timer = setTimeout(() => {
      if (!document.hidden) loaded.reload();
    }, REFRESH_MS);
    return () => clearTimeout(timer);
  }, [loaded.loading, loaded.reload, loaded.data, loaded.error]);
  return loaded;
}

const seconds = (s: number | null) =>
  s === null ? '' : s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;

function TenantList() {
  const [sort, setSort] = useState('size');
  const list = useRefreshed(() => api<{ tenants: Figures[] }>('GET', 'tenants', { query: { sort } }), [sort]);
  const drift = useDrift();
  return (
    <section class="page">
      <h1>Tenants</h1>
      <label class="inline">
        Sort by{' '}
        <select aria-label="Sort tenants by" value={sort} onChange={(e) => setSort(e.currentTarget.value)}>
          <option value="size">size</option>
          <option value="connections">connections</option>
          <option value="active">time in running statements</option>
          <option value="name">name</option>
        </select>
      </label>
      <ErrorText error={list.error ?? drift.error} />
      <table class="grid" aria-label="Tenants">
        <thead>
          <tr>
            <th>Schema</th>
            <th>Size</th>
            <th>Tables</th>
            <th>Rows (about)</th>
            <th>Connections</th>
            <th>Running</th>
            <th>Time running</th>
            <th>Template</th>
          </tr>
        </thead>
        <tbody>
          {(list.data?.tenants ?? []).map((t) => (
            <tr key={t.schema}>
              <td>
                <a href={href({ page: 'tenants', schema: t.schema })}>{t.schema}</a>
              </td>
              <td class={t.quota?.overStorage ? 'warning' : undefined}>
                {formatBytes(t.sizeBytes)} {storageText(t.quota)}
              </td>
              <td>{t.tables}</td>
              <td>{t.estimatedRows.toLocaleString()}</td>
              <td>{t.connections}</td>
              <td>{t.active}</td>
              <td>{seconds(t.activeSeconds)}</td>
              <DriftCell print={drift.of(t.schema)} />
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function SessionRow({ schema, session, onStop }: { schema: string; session: Session; onStop: () => void }) {
  const [ending, setEnding] = useState(false);
  // Named as shown: a session or statement that moved on since is not hit in its place (404).
  const stop = useAction(async (how: 'cancel' | 'terminate') => {
    await api('POST', `tenants/${encodeURIComponent(schema)}/sessions/${session.pid}/${how}`, {
      body: {
        backendStart: session.backendStart,
        ...(how === 'cancel' && session.queryStart ? { queryStart: session.queryStart } : {}),
      },
    });
    setEnding(false);
    onStop();
  });
  const own = session.role === `${schema}_user`;
  const manages = may('tenants.manage');
  return (
    <tr>
      <td class="mono">{session.pid}</td>
      <td class="mono">{session.role}</td>
      <td>{session.state}</td>
      <td>{seconds(session.querySeconds)}</td>
      <td>{session.wait ?? ''}</td>
      {session.poolReset ? (
        <td class="muted">in the service’s pool, reset for its next request</td>
      ) : (
        <td class="mono" title={session.query ?? ''}>
          {session.query}
        </td>
      )}
      <td>
        {session.locks.map((l) => `${l.mode} ${l.relation ?? ''}`).join(', ')}
        {session.blockedBy.length > 0 && (
          <span class="warning"> blocked by {session.blockedBy.join(', ')}</span>
        )}
      </td>
      {manages && (
        <td>
          <button
            type="button"
            disabled={session.state !== 'active' || stop.busy}
            onClick={() => stop.run('cancel')}
          >
            Cancel
          </button>
          {own && (
            <button
              type="button"
              class="danger"
              onClick={() => {
                stop.setError(undefined);
                setEnding(true);
              }}
            >
              End
            </button>
          )}
          {!ending && <ErrorText error={stop.error} />}
          {ending && (
            <Dialog title={`End session ${session.pid}`} onClose={() => setEnding(false)}>
              <p>
                End {session.role}'s session {session.pid}? Its open transaction is rolled back and its client
                is disconnected.
              </p>
              <ErrorText error={stop.error} />
              <div class="actions">
                <button type="button" onClick={() => setEnding(false)}>
                  Keep it
                </button>
                <button
                  type="button"
                  class="danger"
                  disabled={stop.busy}
                  onClick={() => stop.run('terminate')}
                >
                  End session
                </button>
              </div>
            </Dialog>
          )}
        </td>
      )}
    </tr>
  );
}

function TenantDetail({ schema }: { schema: string }) {
  const tenant = useRefreshed(() => api<Tenant>('GET', `tenants/${encodeURIComponent(schema)}`), [schema]);
  const t = tenant.data;
  const manages = may('tenants.manage');
  return (
    <section class="page">
      <h1>
        <a href={href({ page: 'tenants' })}>Tenants</a> / <span class="mono">{schema}</span>
      </h1>
      <ErrorText error={tenant.error} />
      {t && (
        <p class="muted">
          {formatBytes(t.sizeBytes)}, {t.tables} tables, about {t.estimatedRows.toLocaleString()} rows;{' '}
          {t.connections} {t.connections === 1 ? 'connection' : 'connections'}, {t.active} running.{' '}
          <a href={href({ page: 'tables', schema })}>Its tables</a>
          {may('audit.read') && (
            <>
              {' '}
              · <a href={href({ page: 'audit', schema })}>Its audit log</a>
            </>
          )}
        </p>
      )}
      {t && (
        <QuotaSection key={JSON.stringify(t.quota)} schema={schema} quota={t.quota} onSaved={tenant.reload} />
      )}
      <h2>Sessions</h2>
      <div class="grid-wrap">
        <table class="grid" aria-label={`Sessions of ${schema}`}>
          <thead>
            <tr>
              <th>pid</th>
              <th>Role</th>
              <th>State</th>
              <th>Running for</th>
              <th>Waiting for</th>
              <th>Statement</th>
              <th>Locks</th>
              {manages && <th />}
            </tr>
          </thead>
          <tbody>
            {(t?.sessions ?? []).map((s) => (
              <SessionRow key={s.pid} schema={schema} session={s} onStop={tenant.reload} />
            ))}
          </tbody>
        </table>
      </div>
      {t && t.sessions.length === 0 && <p class="muted">No sessions.</p>}
      {t && t.blocking.length > 0 && (
        <p class="warning">
          It blocks{' '}
          {t.blocking
            .map((b) => `session ${b.pid} (${b.role}, waiting for ${b.blockedBy.join(', ')})`)
            .join('; ')}
          .
        </p>
      )}
      <DriftSection schema={schema} />
      {may('backups') && <BackupsSection schema={schema} />}
      <h2>API keys</h2>
      <ul class="list">
        {(t?.keys ?? []).map((k) => (
          <li key={k.name}>
            <span class="mono">{k.name}</span>&nbsp;<span class="muted">{k.type}</span>
            <span class="row-actions muted">
              {k.requests.toLocaleString()} requests, last used {formatDate(k.lastUsedAt)}
            </span>
          </li>
        ))}
        {t && t.keys.length === 0 && <li class="muted">No keys.</li>}
      </ul>
    </section>
  );
}

export function TenantsPage({ schema }: { schema: string | undefined }) {
  return schema ? <TenantDetail schema={schema} /> : <TenantList />;
}
