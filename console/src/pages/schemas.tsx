import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { go, href } from '../router';
import { schemas } from '../schemas';
import { ConfirmByName, ErrorText, Form, useAction, useLoad } from '../ui';

/**
 * The schemas page: the tenant schemas, made with their password, and deleted.
 */

export function SchemasPage() {
  const list = useLoad(() => schemas.load(), []);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [created, setCreated] = useState<string | undefined>(undefined);
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const create = useAction(async () => {
    const answer = await api<{ username: string }>('POST', 'schema/create', {
      body: { schemaName: name, password },
    });
    setCreated(`Schema ${name} created. Its database user is ${answer.username}.`);
    setName('');
    setPassword('');
    await list.reload();
  });
  return (
    <section class="page">
      <h1>Schemas</h1>
      <ErrorText error={list.error} />
      <ul class="list">
        {(list.data ?? []).map((schema) => (
          <li key={schema}>
            <a href={href({ page: 'tables', schema })}>{schema}</a>
            <span class="row-actions">
              <a href={href({ page: 'sql', schema })}>SQL</a>
              {may('keys.read') && <a href={href({ page: 'keys', schema })}>API keys</a>}
              {may('schemas.delete') && (
                <button type="button" class="danger small" onClick={() => setDeleting(schema)}>
                  Delete
                </button>
              )}
            </span>
          </li>
        ))}
        {list.data?.length === 0 && (
          <li class="muted">No schemas yet{may('schemas.create') ? ': create one below' : ''}.</li>
        )}
      </ul>
      {may('schemas.create') && (
        <Form class="card" aria-label="Create a schema" onSubmit={() => create.run()}>
          <h2>Create a schema</h2>
          <p class="muted">A schema gets its own database user, &lt;name&gt;_user, with this password.</p>
          <label>
            Name
            <input name="schemaName" value={name} onInput={(e) => setName(e.currentTarget.value)} required />
          </label>
          <label>
            Password for its database user
            <input
              name="password"
              type="password"
              autoComplete="new-password"
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
              required
            />
          </label>
          <ErrorText error={create.error} />
          {created && (
            <p class="success" role="status">
              {created}
            </p>
          )}
          <button type="submit" class="primary" disabled={create.busy}>
            Create schema
          </button>
        </Form>
      )}
      {deleting && (
        <ConfirmByName
          what="schema"
          name={deleting}
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await api('DELETE', `schema/${encodeURIComponent(deleting)}`, { query: { cascade: true } });
            await list.reload();
            go({ page: 'schemas' });
          }}
        >
          <p>Its tables, rows, API keys and database user go with it.</p>
        </ConfirmByName>
      )}
    </section>
  );
}
