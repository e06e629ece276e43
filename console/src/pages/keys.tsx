import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { ErrorText, Form, formatDate, ShownOnce, useAction, useLoad } from '../ui';
import { ConnectSection } from './connect';

/**
 * A schema's API keys: listed (keys.read), made (the key shown once) and deleted (keys.manage);
 * and, below them, how to connect as the schema's own database login (./connect).
 */

interface KeyRow {
  id: number;
  key_name: string;
  key_type: 'anon' | 'service_role';
  key_prefix: string;
  created_at: string;
  last_used_at: string | null;
  is_active: boolean;
}

export function KeysPage({ schema }: { schema: string }) {
  const keys = useLoad(() => api<KeyRow[]>('GET', `project/${encodeURIComponent(schema)}/keys`), [schema]);
  const [name, setName] = useState('');
  const [type, setType] = useState<'anon' | 'service_role'>('anon');
  const [shown, setShown] = useState<string | undefined>(undefined);
  const create = useAction(async () => {
    const answer = await api<{ key: string }>('POST', `project/${encodeURIComponent(schema)}/keys`, {
      body: { keyName: name, keyType: type },
    });
    setShown(answer.key);
    setName('');
    await keys.reload();
  });
  const remove = useAction(async (id: number) => {
    await api('DELETE', `project/${encodeURIComponent(schema)}/keys/${id}`);
    await keys.reload();
  });
  const manages = may('keys.manage');
  return (
    <section class="page">
      <h1>
        API keys of <span class="mono">{schema}</span>
      </h1>
      <p class="muted">
        Send a key as <code>Authorization: Bearer &lt;key&gt;</code>. <code>anon</code> keys only read;{' '}
        <code>service_role</code> keys also write. Neither reaches outside this schema.
      </p>
      {shown && (
        <ShownOnce
          key={shown}
          text="Copy the key now: it is shown only once."
          value={shown}
          testId="new-key"
        />
      )}
      <ErrorText error={keys.error ?? remove.error} />
      <table class="grid" aria-label="API keys">
        <thead>
          <tr>
            <th>Name</th>
            <th>Type</th>
            <th>Prefix</th>
            <th>Created</th>
            <th>Last used</th>
            {manages && <th />}
          </tr>
        </thead>
        <tbody>
          {(keys.data ?? []).map((key) => (
            <tr key={key.id}>
              <td>{key.key_name}</td>
              <td>{key.key_type}</td>
              <td class="mono">{key.key_prefix}…</td>
              <td>{formatDate(key.created_at)}</td>
              <td>{formatDate(key.last_used_at)}</td>
              {manages && (
                <td>
                  <button
                    type="button"
                    class="danger small"
                    onClick={() =>
                      confirm(`Delete the key ${key.key_name}? Callers using it fail at once.`) &&
                      remove.run(key.id)
                    }
                  >
                    Delete
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
      {manages && (
        <Form class="card" aria-label="Create an API key" onSubmit={() => create.run()}>
          <h2>Create a key</h2>
          <label>
            Name
            <input name="keyName" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
          </label>
          <label>
            Type
            <select
              name="keyType"
              value={type}
              onChange={(e) => setType(e.currentTarget.value as 'anon' | 'service_role')}
            >
              <option value="anon">anon (read-only)</option>
              <option value="service_role">service_role (read and write)</option>
            </select>
          </label>
          <ErrorText error={create.error} />
          <button type="submit" class="primary" disabled={create.busy}>
            Create key
          </button>
        </Form>
      )}
      <ConnectSection schema={schema} />
    </section>
  );
}
