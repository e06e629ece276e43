import { useState } from 'preact/hooks';
import { api } from '../api';
import { badgeText, license, loadLicense, refreshLicense } from '../license';
import { ErrorText, Form, formatDate, useAction } from '../ui';

/** Start a trial, activate, refresh: always reachable, whatever the license says. */
export function LicensePage() {
  const status = license.value;
  const [email, setEmail] = useState('');
  const [key, setKey] = useState('');
  const [note, setNote] = useState<string | undefined>(undefined);
  const refresh = useAction(async () => {
    await refreshLicense();
    setNote(undefined);
  });
  const trial = useAction(async () => {
    const answer = await api<{ message: string }>('POST', 'trial/start', { body: { email } });
    setNote(answer.message);
    await loadLicense();
  });
  const activate = useAction(async () => {
    const answer = await api<{ success: boolean; message: string; notice?: string }>(
      'POST',
      'license/activate',
      {
        body: { licenseKey: key, email },
      },
    );
    if (!answer.success) throw new Error(answer.message);
    setNote([answer.message, answer.notice].filter(Boolean).join('. '));
    setKey('');
    await loadLicense();
  });
  return (
    <section class="page">
      <h1>License</h1>
      <div class="card">
        <p class={`badge big ${status?.status ?? ''}`}>{badgeText(status)}</p>
        {status?.warning && <p class="warning">{status.warning}</p>}
        <dl class="facts">
          <dt>Status</dt>
          <dd data-testid="license-status">{status?.status ?? '—'}</dd>
          <dt>Type</dt>
          <dd>{status?.type ?? '—'}</dd>
          <dt>Expires</dt>
          <dd>
            {status?.expiresAt
              ? formatDate(status.expiresAt)
              : status?.type === 'paid'
                ? 'never (lifetime)'
                : '—'}
          </dd>
          <dt>Last validated</dt>
          <dd data-testid="last-validated">{formatDate(status?.lastValidatedAt)}</dd>
          <dt>Offline grace ends</dt>
          <dd>{formatDate(status?.gracePeriodEndsAt)}</dd>
          <dt>Signed by the license server</dt>
          <dd>
            {status?.verified === null || status?.verified === undefined
              ? '—'
              : status.verified
                ? 'yes'
                : 'no'}
          </dd>
        </dl>
        <button type="button" onClick={() => refresh.run()} disabled={refresh.busy}>
          Refresh now
        </button>
        <ErrorText error={refresh.error} />
        {note && (
          <p class="success" role="status">
            {note}
          </p>
        )}
      </div>
      <div class="columns">
        <Form class="card" aria-label="Activate a license" onSubmit={() => activate.run()}>
          <h2>Activate a license</h2>
          <label>
            Email
            <input
              type="email"
              name="email"
              value={email}
              onInput={(e) => setEmail(e.currentTarget.value)}
              required
            />
          </label>
          <label>
            License key
            <input
              name="licenseKey"
              value={key}
              onInput={(e) => setKey(e.currentTarget.value)}
              placeholder="DBA-XXXXX-…"
              required
            />
          </label>
          <ErrorText error={activate.error} />
          <button type="submit" class="primary" disabled={activate.busy}>
            Activate
          </button>
        </Form>
        {(status?.status === 'none' || !status) && (
          <Form class="card" aria-label="Start a trial" onSubmit={() => trial.run()}>
            <h2>Start the 14-day trial</h2>
            <label>
              Email
              <input
                type="email"
                name="trialEmail"
                value={email}
                onInput={(e) => setEmail(e.currentTarget.value)}
                required
              />
            </label>
            <ErrorText error={trial.error} />
            <button type="submit" disabled={trial.busy}>
              Start trial
            </button>
          </Form>
        )}
      </div>
    </section>
  );
}
