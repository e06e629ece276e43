import { useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorText, formatDate, useAction, useLoad } from '../ui';

/**
 * A schema's API keys: listed, made (the key shown once) and deleted.
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

/** The clipboard API needs a secure origin (https or localhost); plain http gets the old way. */
async function copy(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the old way
  }
  const area = Object.assign(document.createElement('textarea'), { value: text });
  document.body.append(area);
  area.select();
  const done = document.execCommand('copy');
  area.remove();
  return done;
}

export function KeysPage({ schema }: { schema: string }) {
  const keys = useLoad(() => api<KeyRow[]>('GET', `project/${encodeURIComponent(schema)}/keys`), [schema]);
  const [name, setName] = useState('');
  const [type, setType] = useState<'anon' | 'service_role'>('anon');
  const [shown, setShown] = useState<string | undefined>(undefined);
  const [copied, setCopied] = useState<boolean | undefined>(undefined);
  const create = useAction(async () => {
    const answer = await api<{ key: string }>('POST', `project/${encodeURIComponent(schema)}/keys`, {
      body: { keyName: name, keyType: type },
    });
    setShown(answer.key);
    setCopied(undefined);
    setName('');
    await keys.reload();
  });
  const remove = useAction(async (id: number) => {
    await api('DELETE', `project/${encodeURIComponent(schema)}/keys/${id}`);
    await keys.reload();
  });
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
        <div class="card key-shown" role="status">
          <p>Copy the key now: it is shown only once.</p>
          <code data-testid="new-key">{shown}</code>
          <button type="button" onClick={() => copy(shown).then(setCopied)}>
            {copied ? 'Copied' : 'Copy'}
          </button>
          {copied === false && <span class="muted"> Select the key and copy it by hand.</span>}
        </div>
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
            <th />
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
            </tr>
          ))}
        </tbody>
      </table>
      <form
        class="card"
        aria-label="Create an API key"
        onSubmit={(event) => {
          event.preventDefault();
          create.run();
        }}
      >
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
      </form>
    </section>
  );
}
