import { useEffect, useState } from 'preact/hooks';
import { loadSso, type SsoSetting, signIn, takeSsoError } from '../api';
import { ErrorText, Form, useAction } from '../ui';

/** Why a sign-in through the provider was refused, by the code the service sends the browser back with. */
const SSO_REFUSALS: Record<string, string> = {
  refused:
    'the answer from the provider did not check out (the sign-in was started in another browser, used already, or took too long). Try again.',
  'no-role': 'you signed in at the provider, but have no role here. Ask an owner of dbadmin.',
  taken: 'your login here belongs to another person or account. Ask an owner of dbadmin.',
  'too-many': 'too many refused sign-ins from this address. Wait a minute, then try again.',
};

/** The console page a sign-in through the provider comes back to: this one. */
const returnTo = () => (/^#\/[A-Za-z0-9_\-./%]{0,200}$/.test(location.hash) ? location.hash : '#/');

/**
 * A person's login and password (or AUTH_USER / AUTH_PASS), or single sign-on when it is set up:
 * the server answers a session cookie, and the browser keeps nothing else.
 */
export function SignIn() {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [sso, setSso] = useState<SsoSetting | null>(null);
  const [ssoError] = useState(takeSsoError);
  const action = useAction(() => signIn(user, password));
  useEffect(() => {
    loadSso().then(setSso, () => setSso(null));
  }, []);
  const start = sso?.startUrl && `${sso.startUrl}?${new URLSearchParams({ returnTo: returnTo() })}`;
  return (
    <main class="signin">
      <Form class="card" onSubmit={() => action.run()}>
        <h1>dbadmin</h1>
        {ssoError && (
          <p class="error" role="alert">
            Single sign-on failed: {SSO_REFUSALS[ssoError] ?? SSO_REFUSALS.refused}
          </p>
        )}
        {start && (
          <>
            <a class="button primary" href={start}>
              Sign in with single sign-on
            </a>
            <p class="muted">
              {sso?.ssoOnly
                ? 'People sign in with single sign-on here. The administrator (AUTH_USER) may still sign in below.'
                : 'Or with a login and password:'}
            </p>
          </>
        )}
        <label>
          User name
          <input
            name="user"
            autoComplete="username"
            value={user}
            onInput={(e) => setUser(e.currentTarget.value)}
            required
            autoFocus
          />
        </label>
        <label>
          Password
          <input
            name="password"
            type="password"
            autoComplete="current-password"
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
            required
          />
        </label>
        <ErrorText error={action.error} />
        <button type="submit" class={start ? '' : 'primary'} disabled={action.busy}>
          Sign in
        </button>
      </Form>
    </main>
  );
}
