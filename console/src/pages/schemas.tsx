import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { go, href } from '../router';
import { schemas } from '../schemas';
import { ConfirmByName, ErrorText, Form, NewSchemaPassword, useAction, useLoad } from '../ui';

/**
 * The schemas page: the tenant schemas, made with their password (empty, or started from another
 * schema as a template, its rows too if asked), and deleted.
 */

/** What a copy made, by kind: the plural is the API's own name, the singular beside it. */
const KINDS = {
  tables: 'table',
  views: 'view',
  sequences: 'sequence',
  functions: 'function',
  types: 'type',
  indexes: 'index',
  triggers: 'trigger',
  policies: 'policy',
} as const;

interface Created {
  username: string;
  clone?: {
    template: string;
    counts: Record<keyof typeof KINDS, number>;
    rows?: number;
    /** Grants to other roles, which a copy never carries. */
    notCopied: string[];
  };
}

const count = (n: number, one: string, many: string) => `${n.toLocaleString()} ${n === 1 ? one : many}`;

/** "a, b and c" */
const listed = (items: string[]) =>
  items.length < 2 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;

/** The status line after a create: what the copy holds, in words (kinds it holds none of left out). */
function createdText(name: string, { username, clone }: Created): string {
  const user = ` Its database user is ${username}.`;
  if (!clone) return `Schema ${name} created.${user}`;
  const made = Object.entries(KINDS)
    .filter(([kind]) => clone.counts[kind as keyof typeof KINDS] > 0)
    .map(([kind, one]) => count(clone.counts[kind as keyof typeof KINDS], one, kind));
  const rows = clone.rows === undefined ? '' : `, ${count(clone.rows, 'row', 'rows')} copied`;
  const holding = made.length > 0 ? listed(made) : 'nothing in it';
  return `Schema ${name} created from template ${clone.template} with ${holding}${rows}.${user}`;
}

export function SchemasPage() {
  const list = useLoad(() => schemas.load(), []);
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  // '' is an empty schema; else the schema it starts from, kept for the next copy of the same one.
  const [template, setTemplate] = useState('');
  const [withData, setWithData] = useState(false);
  const [created, setCreated] = useState<{ text: string; notCopied: string[] } | undefined>(undefined);
  const [deleting, setDeleting] = useState<string | undefined>(undefined);
  const create = useAction(async () => {
    setCreated(undefined);
    const answer = await api<Created>('POST', 'schema/create', {
      body: { schemaName: name, password, ...(template ? { template, withData } : {}) },
    });
    setCreated({ text: createdText(name, answer), notCopied: answer.clone?.notCopied ?? [] });
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
          <NewSchemaPassword value={password} onInput={setPassword} />
          <label>
            Start from
            <select name="template" value={template} onChange={(e) => setTemplate(e.currentTarget.value)}>
              <option value="">Empty schema</option>
              {(list.data ?? []).map((schema) => (
                <option key={schema}>{schema}</option>
              ))}
            </select>
          </label>
          {template && (
            <label class="inline">
              <input
                type="checkbox"
                name="withData"
                checked={withData}
                onChange={(e) => setWithData(e.currentTarget.checked)}
              />
              Copy its rows too
            </label>
          )}
          <ErrorText error={create.error} />
          {created && (
            <div role="status">
              <p class="success">{created.text}</p>
              {created.notCopied.length > 0 && (
                <p class="warning">
                  Not copied (a copy carries no grant to other roles): {created.notCopied.join('; ')}.
                </p>
              )}
            </div>
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
            if (template === deleting) setTemplate('');
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
