import { useState } from 'preact/hooks';
import { basicToken, checkCredentials, signIn } from '../api';
import { ErrorText, useAction } from '../ui';

/** The admin's credentials (AUTH_USER / AUTH_PASS), checked against the API before they are kept. */
export function SignIn() {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const action = useAction(async () => {
    const token = basicToken(user, password);
    if (!(await checkCredentials(token))) throw new Error('Wrong user name or password');
    signIn(token);
  });
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
