import { useState } from 'preact/hooks';
import { acceptInvitation } from '../api';
import { go } from '../router';
import { ErrorText, Form, useAction } from '../ui';

/** An invitation's link: the person sets their password (once), and is signed in. */
export function WelcomePage({ token }: { token: string }) {
  const [password, setPassword] = useState('');
  const action = useAction(async () => {
    await acceptInvitation(token, password);
    go({ page: 'schemas' }, { replace: true });
  });
  return (
    <main class="signin">
      <Form class="card" aria-label="Set your password" onSubmit={() => action.run()}>
        <h1>Welcome to dbadmin</h1>
        <p class="muted">Choose a password: 12 characters or more; a few words make a good one.</p>
        <label>
          New password
          <input
            name="password"
            type="password"
            autoComplete="new-password"
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
            required
            autoFocus
          />
        </label>
        <ErrorText error={action.error} />
        <button type="submit" class="primary" disabled={action.busy}>
          Set password and sign in
        </button>
      </Form>
    </main>
  );
}
