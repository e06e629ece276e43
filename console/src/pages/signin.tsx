import { useState } from 'preact/hooks';
import { signIn } from '../api';
import { ErrorText, useAction } from '../ui';

/**
 * A person's login and password (or AUTH_USER / AUTH_PASS): the server answers a session cookie,
 * and the browser keeps nothing else.
 */
export function SignIn() {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction(() => signIn(user, password));
  return (
    <main class="signin">
      <form
        class="card"
        onSubmit={(event) => {
          event.preventDefault();
          action.run();
        }}
      >
        <h1>dbadmin</h1>
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
        <button type="submit" class="primary" disabled={action.busy}>
          Sign in
        </button>
      </form>
    </main>
  );
}
