import { useState } from 'preact/hooks';
import { api } from '../api';
import { schemas } from '../schemas';
import { ErrorText, Form, formatDate, ShownOnce, useAction, useLoad } from '../ui';

/**
 * The people who may sign in (owners only): added with a role and a scope, and an invitation link
 * to hand over; their role and scope changed, their password reset, their sessions ended, removed.
 * Every change counts on their next request.
 */

export const ROLES = ['owner', 'admin', 'developer', 'analyst'] as const;

export const ROLE_HINTS: Record<(typeof ROLES)[number], string> = {
  owner: 'everything, people and the license too',
  admin: 'everything but people and the license',
  developer: 'data and structure; keys read-only',
  analyst: 'read-only',
};

interface PersonRow {
  id: number;
  login: string;
  name: string;
  role: (typeof ROLES)[number];
  schemas: string[] | null;
  signsInWith: string[];
  createdAt: string;
}

/** The link an invitation opens: this console's welcome page. */
const invitationLink = (token: string) => `${location.origin}${location.pathname}#/welcome/${token}`;

/** Every schema, or those ticked. */
function ScopePicker({
  value,
  onChange,
}: {
  value: string[] | null;
  onChange: (v: string[] | null) => void;
}) {
  return (
    <fieldset>
      <legend>Scope</legend>
      <label class="inline">
        <input
          type="checkbox"
          checked={value === null}
          onChange={(e) => onChange(e.currentTarget.checked ? null : [])}
        />
        Every schema
      </label>
      {value !== null && (
        <select
          multiple
          aria-label="Schemas"
          size={Math.min(8, Math.max(3, schemas.names.value.length))}
          onChange={(e) => onChange([...e.currentTarget.selectedOptions].map((o) => o.value))}
        >
          {schemas.names.value.map((name) => (
            <option key={name} selected={value.includes(name)}>
              {name}
            </option>
          ))}
        </select>
      )}
    </fieldset>
  );
}

export function PeoplePage() {
  const people = useLoad(() => api<{ people: PersonRow[] }>('GET', 'people'), []);
  const [login, setLogin] = useState('');
  const [role, setRole] = useState<(typeof ROLES)[number]>('analyst');
  const [scope, setScope] = useState<string[] | null>(null);
  const [link, setLink] = useState<string | undefined>(undefined);
  const add = useAction(async () => {
    const made = await api<{ invitation?: { token: string } }>('POST', 'people', {
      body: { login, role, schemas: scope },
    });
    setLink(made.invitation ? invitationLink(made.invitation.token) : undefined);
    setLogin('');
    await people.reload();
  });
  const change = useAction(async (id: number, body: Record<string, unknown>) => {
    await api('PATCH', `people/${id}`, { body });
    await people.reload();
  });
  const reset = useAction(async (id: number) => {
    const invitation = await api<{ token: string }>('POST', `people/${id}/reset`, { body: {} });
    setLink(invitationLink(invitation.token));
  });
  const endSessions = useAction(async (id: number) => {
    await api('DELETE', `people/${id}/sessions`);
  });
  const remove = useAction(async (id: number) => {
    await api('DELETE', `people/${id}`);
    await people.reload();
  });
  return (
    <section class="page">
      <h1>People</h1>
      <p class="muted">
        Who may sign in, with what role, in which schemas. A change counts on their next request.
      </p>
      {link && (
        <ShownOnce
          text="Hand this link to them: it sets their password, once, within 7 days. It is shown only now."
          value={link}
          testId="invitation-link"
        />
      )}
      <ErrorText error={people.error ?? change.error ?? reset.error ?? endSessions.error ?? remove.error} />
      <table class="grid" aria-label="People">
        <thead>
          <tr>
            <th>Login</th>
            <th>Role</th>
            <th>Scope</th>
            <th>Signs in with</th>
            <th>Added</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {(people.data?.people ?? []).map((person) => (
            <tr key={person.id}>
              <td>{person.login}</td>
              <td>
                <select
                  aria-label={`Role of ${person.login}`}
                  value={person.role}
                  onChange={(e) => change.run(person.id, { role: e.currentTarget.value })}
                >
                  {ROLES.map((r) => (
                    <option key={r}>{r}</option>
                  ))}
                </select>
              </td>
              <td>{person.schemas ? person.schemas.join(', ') : 'every schema'}</td>
              <td>{person.signsInWith.join(', ') || 'invited'}</td>
              <td>{formatDate(person.createdAt)}</td>
              <td class="actions">
                <button type="button" class="small" onClick={() => endSessions.run(person.id)}>
                  End sessions
                </button>
                <button
                  type="button"
                  class="small"
                  onClick={() =>
                    confirm(`Reset ${person.login}'s password? They are signed out now.`) &&
                    reset.run(person.id)
                  }
                >
                  Reset password
                </button>
                <button
                  type="button"
                  class="danger small"
                  onClick={() =>
                    confirm(`Remove ${person.login}? Their sessions and tokens end now.`) &&
                    remove.run(person.id)
                  }
                >
                  Remove
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <Form class="card" aria-label="Add a person" onSubmit={() => add.run()}>
        <h2>Add a person</h2>
        <label>
          Login (an e-mail address will do)
          <input name="login" value={login} onInput={(e) => setLogin(e.currentTarget.value)} required />
        </label>
        <label>
          Role
          <select name="role" value={role} onChange={(e) => setRole(e.currentTarget.value as typeof role)}>
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}: {ROLE_HINTS[r]}
              </option>
            ))}
          </select>
        </label>
        <ScopePicker value={scope} onChange={setScope} />
        <ErrorText error={add.error} />
        <button type="submit" class="primary" disabled={add.busy}>
          Add and invite
        </button>
      </Form>
    </section>
  );
}
