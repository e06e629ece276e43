import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { go } from '../router';
import { ErrorText, useAction, useLoad } from '../ui';
import { type PlannedStatement, StatementList } from './migrations';

/**
 * Drift from templates (GET /api/drift): for the tenants list, each schema's template and whether
 * it still matches it, read once when the list opens (every schema's structure, one catalog
 * query, not every few seconds); for one tenant, what differs, object by object, on request, and
 * the SQL that brings it back in line (GET /api/drift/SCHEMA/fix), made a migration over that
 * schema alone, which runs from the migration's page.
 */

interface Print {
  schema: string;
  template: string | null;
  drifted: boolean | null;
}

interface Definition {
  kind: string;
  name: string;
  definition: string;
}

interface Drift {
  against: string;
  same: boolean;
  missing: Definition[];
  extra: Definition[];
  different: { kind: string; name: string; expected: string; actual: string }[];
}

interface Fix {
  against: string;
  /** Empty when there is nothing the service writes. */
  sql: string;
  statements: PlannedStatement[];
  destructive: boolean;
  notWritten: { kind: string; name: string; why: string }[];
}

/** Each schema's template and drift, by schema: loaded once. */
export function useDrift() {
  const loaded = useLoad(() => api<{ schemas: Print[] }>('GET', 'drift'), []);
  const bySchema = new Map((loaded.data?.schemas ?? []).map((print) => [print.schema, print]));
  return { error: loaded.error, of: (schema: string) => bySchema.get(schema) };
}

/** The tenants list's cell: the template, and whether the schema still matches it. */
export function DriftCell({ print }: { print: Print | undefined }) {
  if (!print?.template) return <td class="muted">—</td>;
  return (
    <td class={print.drifted ? 'warning' : undefined}>
      {print.template}: {print.drifted ? 'drifted' : 'matches'}
    </td>
  );
}

const definitionList = (title: string, items: Definition[]) =>
  items.length > 0 && (
    <>
      <h3>{title}</h3>
      <ul class="list">
        {items.map((d) => (
          <li key={`${d.kind} ${d.name}`}>
            {d.kind} <span class="mono">{d.name}</span>: <span class="mono">{d.definition}</span>
          </li>
        ))}
      </ul>
    </>
  );

/** `fix-SCHEMA-20261128T145500`: when it was made (UTC, to the second), so each fix is named anew. */
const fixName = (schema: string) =>
  `fix-${schema}-${new Date().toISOString().replace(/[-:]/g, '').slice(0, 15)}`;

function FixText({ fix }: { fix: Fix }) {
  return (
    <>
      {fix.sql === '' && <p role="status">No SQL to write against {fix.against}.</p>}
      <StatementList statements={fix.statements} />
      {fix.destructive && (
        <p class="warning">
          <strong>Destructive:</strong> it drops tables, columns, functions, types or sequences: their rows
          are gone.
        </p>
      )}
      {fix.notWritten.length > 0 && (
        <>
          <h3>Not written, do by hand</h3>
          <ul class="list">
            {fix.notWritten.map((n) => (
              <li key={`${n.kind} ${n.name}`}>
                {n.kind} <span class="mono">{n.name}</span> — {n.why}
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  );
}

/**
 * The SQL that brings `schema` back in line with `against` (its template when empty), on request;
 * with the migrations permission, Create migration records it over this schema alone and opens it.
 */
function BringBackInLine({ schema, against }: { schema: string; against: string }) {
  const [fix, setFix] = useState<Fix | undefined>(undefined);
  const load = useAction(async () => {
    setFix(
      await api<Fix>('GET', `drift/${encodeURIComponent(schema)}/fix`, {
        query: against ? { against } : {},
      }),
    );
  });
  const create = useAction(async (sql: string) => {
    const made = await api<{ id: string }>('POST', 'migrations', {
      body: { name: fixName(schema), sql, target: { schemas: [schema] } },
    });
    go({ page: 'migrations', id: made.id });
  });
  return (
    <section class="preview" aria-label="Bring back in line">
      {!fix && (
        <button type="button" onClick={() => load.run()} disabled={load.busy}>
          Bring back in line
        </button>
      )}
      <ErrorText error={load.error} />
      {fix && <FixText fix={fix} />}
      {fix && fix.sql !== '' && may('migrations') && (
        <div class="actions">
          <button type="button" class="primary" onClick={() => create.run(fix.sql)} disabled={create.busy}>
            Create migration
          </button>
          <span class="muted"> A migration over {schema} alone, run from its page.</span>
        </div>
      )}
      <ErrorText error={create.error} />
    </section>
  );
}

/** One tenant's differences from its template (or another schema, named). */
export function DriftSection({ schema }: { schema: string }) {
  const [against, setAgainst] = useState('');
  // The answer, with what was asked (the fix is asked the same) and which Compare it came from.
  const [compared, setCompared] = useState<{ drift: Drift; against: string; round: number } | undefined>(
    undefined,
  );
  const compare = useAction(async () => {
    const answer = await api<Drift>('GET', `drift/${encodeURIComponent(schema)}`, {
      query: against ? { against } : {},
    });
    setCompared((last) => ({ drift: answer, against, round: (last?.round ?? 0) + 1 }));
  });
  const drift = compared?.drift;
  return (
    <section aria-label="Drift">
      <h2>Drift</h2>
      <div class="toolbar">
        <label class="inline">
          Compare with{' '}
          <input
            placeholder="its template"
            value={against}
            onInput={(e) => setAgainst(e.currentTarget.value)}
            aria-label="Schema to compare with"
          />
        </label>
        <button type="button" onClick={() => compare.run()} disabled={compare.busy}>
          Compare
        </button>
      </div>
      <ErrorText error={compare.error} />
      {drift?.same && <p role="status">Same structure as {drift.against}.</p>}
      {drift && !drift.same && (
        <>
          <p role="status" class="warning">
            Differs from {drift.against}: {drift.missing.length} missing, {drift.extra.length} extra,{' '}
            {drift.different.length} different.
          </p>
          {definitionList(`Missing (in ${drift.against})`, drift.missing)}
          {definitionList('Extra (here only)', drift.extra)}
          {drift.different.length > 0 && (
            <>
              <h3>Different</h3>
              <ul class="list">
                {drift.different.map((d) => (
                  <li key={`${d.kind} ${d.name}`}>
                    {d.kind} <span class="mono">{d.name}</span>: <span class="mono">{d.actual}</span> here,{' '}
                    <span class="mono">{d.expected}</span> in {drift.against}
                  </li>
                ))}
              </ul>
            </>
          )}
          {compared && <BringBackInLine key={compared.round} schema={schema} against={compared.against} />}
        </>
      )}
    </section>
  );
}
