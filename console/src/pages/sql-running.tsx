import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorText } from '../ui';

/**
 * The SQL page's statement while it runs: its time so far, and Cancel, which sends PostgreSQL's
 * own cancel for it (POST /api/query/cancel with the id it was sent with); its answer then says
 * it was cancelled.
 */

/** An id for one run: random, and made without crypto.randomUUID (a page served over plain HTTP has none). */
export function newQueryId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export interface RunningQuery {
  queryId: string;
  /** performance.now() when it was sent. */
  since: number;
}

export function Running({ run }: { run: RunningQuery }) {
  const [now, setNow] = useState(() => performance.now());
  const [state, setState] = useState<'running' | 'cancelling' | 'ended'>('running');
  const [error, setError] = useState<unknown>(undefined);
  useEffect(() => {
    const timer = setInterval(() => setNow(performance.now()), 100);
    return () => clearInterval(timer);
  }, []);
  const cancel = async () => {
    setState('cancelling');
    try {
      const answer = await api<{ cancelled: boolean }>('POST', 'query/cancel', {
        body: { queryId: run.queryId },
      });
      if (!answer.cancelled) setState('ended');
    } catch (failure) {
      setError(failure);
      setState('running');
    }
  };
  return (
    <div class="running" role="status" aria-label="Running statement">
      <span data-testid="running-time">Running… {((now - run.since) / 1000).toFixed(1)} s</span>
      <button type="button" disabled={state !== 'running'} onClick={cancel}>
        {state === 'cancelling' ? 'Cancelling…' : 'Cancel'}
      </button>
      {state === 'ended' && <span class="muted">nothing to cancel: it had just ended</span>}
      <ErrorText error={error} />
    </div>
  );
}
