import { useState } from 'preact/hooks';
import { api } from '../api';
import { go, href } from '../router';
import { schemas } from '../schemas';
import { ErrorText, Form, formatDate, useAction, useLoad } from '../ui';
import { type Counts, countsText, MigrationDetail, type State, type Target } from './migration';

/**
 * Migrations across tenant schemas (GET /api/migrations), newest first, and the form for a new
 * one: its SQL, the schemas it reaches, and Preview, the server's dry run (each statement's locks
 * read with PostgreSQL's parser, and how many schemas it would change), before Create records it.
 * A migration runs from its own page (./migration).
 */

interface Summary {
  id: string;
  name: string;
  createdBy: string | null;
  createdAt: string;
  counts: Counts;
}

/** A statement as the service plans it: its locks, and whether it may rewrite a table. */
export interface PlannedStatement {
  sql: string;
  kind: string;
  locks: { table: string; level: string }[];
  mayRewrite: boolean;
}

interface Preview {
  statements: PlannedStatement[];
  counts: Counts;
  schemas: { schema: string; state: State; reason?: string }[];
}

interface Draft {
  name: string;
  sql: string;
  target: 'all' | 'template' | 'schemas';
  template: string;
  schemas: string[];
  lockTimeoutMs: string;
  concurrency: string;
}

const EMPTY: Draft = {
  name: '',
  sql: '',
  target: 'template',
  template: '',
  schemas: [],
  lockTimeoutMs: '2000',
  concurrency: '4',
};

/** The select shows the first schema until one is picked: the body names the same one. */
const templateOf = (d: Draft) => d.template || (schemas.names.value[0] ?? '');

function targetOf(d: Draft): Target {
  if (d.target === 'all') return { all: true };
  if (d.target === 'template') return { template: templateOf(d) };
  return { schemas: d.schemas };
}

const bodyOf = (d: Draft) => ({
  name: d.name,
  sql: d.sql,
  target: targetOf(d),
  lockTimeoutMs: Number(d.lockTimeoutMs),
  concurrency: Number(d.concurrency),
});

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** Each table once, with the level it is locked in. */
const locksText = (locks: Preview['statements'][number]['locks']) =>
  [...new Set(locks.map((lock) => `${lock.table} in ${lock.level} mode`))].join(', ');

/** A migration's statements as its preview plans them: each with its locks, and whether it may rewrite. */
export function StatementList({ statements }: { statements: PlannedStatement[] }) {
  return (
    <ol class="locks">
      {statements.map((s) => (
        <li key={s.sql}>
          <pre class="sql">{s.sql}</pre>
          <strong>{s.kind}</strong>
          {s.locks.length === 0 ? ': takes no lock on a table' : `: locks ${locksText(s.locks)}`}
          {s.mayRewrite && <span class="warning">; may rewrite the table (every row written anew)</span>}
        </li>
      ))}
    </ol>
  );
}

function PreviewText({ preview }: { preview: Preview }) {
  const { pending, skipped } = preview.counts;
  return (
    <div class="preview" role="status" aria-label="Preview">
      <StatementList statements={preview.statements} />
      <p>
        {plural(pending, 'schema')} to change, {skipped} skipped (already applied).
      </p>
    </div>
  );
}

/** Every tenant schema; a template and its copies; or the schemas picked. */
function TargetPicker({ draft, set }: { draft: Draft; set: (change: Partial<Draft>) => void }) {
  const names = schemas.names.value;
  const choice = (value: Draft['target'], text: string) => (
    <label class="inline">
      <input
        type="radio"
        name="target"
        value={value}
        checked={draft.target === value}
        onChange={() => set({ target: value })}
      />
      {text}
    </label>
  );
  return (
    <fieldset class="choices">
      <legend>Target</legend>
      {choice('all', 'every tenant schema')}
      {choice('template', 'a template and its copies')}
      {choice('schemas', 'these schemas')}
      {draft.target === 'template' && (
        <select
          aria-label="Template"
          value={templateOf(draft)}
          onChange={(e) => set({ template: e.currentTarget.value })}
        >
          {names.map((name) => (
            <option key={name}>{name}</option>
          ))}
        </select>
      )}
      {draft.target === 'schemas' && (
        <select
          multiple
          aria-label="Schemas"
          size={Math.min(8, Math.max(3, names.length))}
          onChange={(e) => set({ schemas: [...e.currentTarget.selectedOptions].map((o) => o.value) })}
        >
          {names.map((name) => (
            <option key={name} selected={draft.schemas.includes(name)}>
              {name}
            </option>
          ))}
        </select>
      )}
    </fieldset>
  );
}

function NewMigration() {
  const [draft, setDraft] = useState(EMPTY);
  const set = (change: Partial<Draft>) => setDraft({ ...draft, ...change });
  // The preview of what the form said then: shown only while the form still says it.
  const [previewed, setPreviewed] = useState<{ body: string; answer: Preview } | undefined>(undefined);
  const body = bodyOf(draft);
  const key = JSON.stringify(body);
  const preview = useAction(async () => {
    setPreviewed({ body: key, answer: await api<Preview>('POST', 'migrations/preview', { body }) });
  });
  const create = useAction(async () => {
    const made = await api<{ id: string }>('POST', 'migrations', { body });
    go({ page: 'migrations', id: made.id });
  });
  const field = (name: 'name' | 'lockTimeoutMs' | 'concurrency') => ({
    value: draft[name],
    onInput: (e: Event) => set({ [name]: (e.currentTarget as HTMLInputElement).value }),
  });
  return (
    <Form class="card" aria-label="New migration" onSubmit={() => create.run()}>
      <h2>New migration</h2>
      <p class="muted">
        Runs in each schema in a transaction of its own, with that schema alone on the search path: name
        tables unqualified. A schema where a migration of the same name was applied is skipped.
      </p>
      <label>
        Name (letters, digits and _ . : -)
        <input {...field('name')} placeholder="2026-11-28-add-note" required />
      </label>
      <label>
        SQL
        <textarea
          class="sql-text"
          rows={8}
          value={draft.sql}
          onInput={(e) => set({ sql: e.currentTarget.value })}
          spellcheck={false}
          required
        />
      </label>
      <TargetPicker draft={draft} set={set} />
      <div class="inline-fields">
        <label>
          Lock timeout (ms)
          <input type="number" min={100} max={60000} {...field('lockTimeoutMs')} required />
        </label>
        <label>
          Concurrency (schemas at a time)
          <input type="number" min={1} max={32} {...field('concurrency')} required />
        </label>
      </div>
      {previewed?.body === key && <PreviewText preview={previewed.answer} />}
      <ErrorText error={preview.error ?? create.error} />
      <div class="actions">
        <button type="button" disabled={preview.busy} onClick={() => preview.run()}>
          Preview
        </button>
        <button type="submit" class="primary" disabled={create.busy}>
          Create
        </button>
      </div>
    </Form>
  );
}

function MigrationList() {
  const list = useLoad(() => api<Summary[]>('GET', 'migrations'), []);
  // The form's schemas as they are now, not as they were at sign-in.
  useLoad(() => schemas.load(), []);
  return (
    <section class="page">
      <h1>Migrations</h1>
      <p class="muted">One change across many tenant schemas, each changed in its own transaction.</p>
      <ErrorText error={list.error} />
      <table class="grid" aria-label="Migrations">
        <thead>
          <tr>
            <th>Name</th>
            <th>Created</th>
            <th>Schemas</th>
          </tr>
        </thead>
        <tbody>
          {(list.data ?? []).map((m) => (
            <tr key={m.id}>
              <td class="mono">
                <a href={href({ page: 'migrations', id: m.id })}>{m.name}</a>
              </td>
              <td>
                {formatDate(m.createdAt)}
                {m.createdBy && ` by ${m.createdBy}`}
              </td>
              <td>{countsText(m.counts)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.length === 0 && <p class="muted">No migrations yet.</p>}
      <NewMigration />
    </section>
  );
}

export function MigrationsPage({ id }: { id: string | undefined }) {
  return id ? <MigrationDetail id={id} /> : <MigrationList />;
}
