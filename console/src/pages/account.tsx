import { useState } from 'preact/hooks';
import { api, session } from '../api';
import { ErrorText, Form, formatDate, ShownOnce, useAction, useLoad } from '../ui';

/**
 * One's own account: who one is and may be, the password, the console sessions still open
 * (end any), and personal tokens for automation (made, shown once, revoked).
 */

interface SessionRow {
  id: number;
  via: string;
  createdAt: string;
  lastSeenAt: string;
  endsAt: string;
  address: string | null;
  userAgent: string | null;
  current: boolean;
}

interface TokenRow {
  id: number;
  name: string;
  prefix: string;
  role: string;
  schemas: string[] | null;
  expiresAt: string;
  lastUsedAt: string | null;
}

function Password() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [done, setDone] = useState(false);
  const change = useAction(async () => {
    await api('POST', 'me/password', { body: { currentPassword: current, newPassword: next } });
    setCurrent('');
    setNext('');
    setDone(true);
  });
  return (
    <Form class="card" aria-label="Change the password" onSubmit={() => change.run()}>
      <h2>Password</h2>
      <label>
        Current password
        <input
          type="password"
          autoComplete="current-password"
          value={current}
          onInput={(e) => setCurrent(e.currentTarget.value)}
          required
        />
      </label>
      <label>
        New password (12 characters or more)
        <input
          type="password"
          autoComplete="new-password"
          value={next}
          onInput={(e) => setNext(e.currentTarget.value)}
          required
        />
      </label>
      <ErrorText error={change.error} />
      {done && <p role="status">Changed. Your other sessions have ended.</p>}
      <button type="submit" class="primary" disabled={change.busy}>
        Change password
      </button>
    </Form>
  );
}

function Sessions() {
  const sessions = useLoad(() => api<{ sessions: SessionRow[] }>('GET', 'me/sessions'), []);
  const end = useAction(async (id: number) => {
    await api('DELETE', `me/sessions/${id}`);
    await sessions.reload();
  });
  return (
    <>
      <h2>Sessions</h2>
      <ErrorText error={sessions.error ?? end.error} />
      <table class="grid" aria-label="Sessions">
        <thead>
          <tr>
            <th>Signed in</th>
            <th>Last seen</th>
            <th>Ends</th>
            <th>From</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(sessions.data?.sessions ?? []).map((s) => (
            <tr key={s.id}>
              <td>{formatDate(s.createdAt)}</td>
              <td>{formatDate(s.lastSeenAt)}</td>
              <td>{formatDate(s.endsAt)}</td>
              <td title={s.userAgent ?? ''}>{s.address ?? '—'}</td>
              <td>
                {s.current ? (
                  <span class="muted">this one</span>
                ) : (
                  <button type="button" class="small" onClick={() => end.run(s.id)}>
                    End
                  </button>
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function Tokens() {
  const tokens = useLoad(() => api<{ tokens: TokenRow[] }>('GET', 'me/tokens'), []);
  const [name, setName] = useState('');
  const [days, setDays] = useState(90);
  const [shown, setShown] = useState<string | undefined>(undefined);
  const make = useAction(async () => {
    const made = await api<{ token: string }>('POST', 'me/tokens', { body: { name, expiresInDays: days } });
    setShown(made.token);
    setName('');
    await tokens.reload();
  });
  const revoke = useAction(async (id: number) => {
    await api('DELETE', `me/tokens/${id}`);
    await tokens.reload();
  });
  return (
    <>
      <h2>Personal tokens</h2>
      <p class="muted">
        For scripts and CI: <code>Authorization: Bearer &lt;token&gt;</code>, with your rights at most.
      </p>
      {shown && (
        <ShownOnce
          key={shown}
          text="Copy the token now: it is shown only once."
          value={shown}
          testId="new-token"
        />
      )}
      <ErrorText error={tokens.error ?? revoke.error} />
      <table class="grid" aria-label="Personal tokens">
        <thead>
          <tr>
            <th>Name</th>
            <th>Prefix</th>
            <th>Role</th>
            <th>Expires</th>
            <th>Last used</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(tokens.data?.tokens ?? []).map((t) => (
            <tr key={t.id}>
              <td>{t.name}</td>
              <td class="mono">{t.prefix}…</td>
              <td>{t.role}</td>
              <td>{formatDate(t.expiresAt)}</td>
              <td>{formatDate(t.lastUsedAt)}</td>
              <td>
                <button type="button" class="danger small" onClick={() => revoke.run(t.id)}>
                  Revoke
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Form class="card" aria-label="Make a token" onSubmit={() => make.run()}>
        <label>
          Name
          <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
        </label>
        <label>
          Expires in days
          <input
            type="number"
            min={1}
            max={366}
            value={days}
            onInput={(e) => setDays(Number(e.currentTarget.value))}
          />
        </label>
        <ErrorText error={make.error} />
        <button type="submit" class="primary" disabled={make.busy}>
          Make token
        </button>
      </Form>
    </>
  );
}

export function AccountPage() {
  const me = session.value;
  if (me?.kind !== 'person' || !me.person)
    return (
      <section class="page">
        <h1>Account</h1>
        <p>
          You signed in with <code>AUTH_USER</code>: every right, and no account of its own. Add people (and
          an owner for yourself) on the People page.
        </p>
      </section>
    );
  return (
    <section class="page">
      <h1>{me.person.login}</h1>
      <p>
        Role <strong>{me.role}</strong>
        {me.schemas ? `, in ${me.schemas.join(', ')}` : ', in every schema'}.
      </p>
      {me.via !== 'token' && <Password />}
      <Sessions />
      <Tokens />
    </section>
  );
}
