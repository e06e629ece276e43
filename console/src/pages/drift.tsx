import { useState } from 'preact/hooks';
import { api } from '../api';
import { ErrorText, useAction, useLoad } from '../ui';

/**
 * Drift from templates (GET /api/drift): for the tenants list, each schema's template and whether
 * it still matches it, read once when the list opens (every schema's structure, one catalog
 * query, not every few seconds); for one tenant, what differs, object by object, on request.
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

/** One tenant's differences from its template (or another schema, named). */
export function DriftSection({ schema }: { schema: string }) {
  const [against, setAgainst] = useState('');
  const [drift, setDrift] = useState<Drift | undefined>(undefined);
  const compare = useAction(async () => {
    setDrift(
      await api<Drift>('GET', `drift/${encodeURIComponent(schema)}`, {
        query: against ? { against } : {},
      }),
    );
  });
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
        </>
      )}
    </section>
  );
}
