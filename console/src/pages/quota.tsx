import { useState } from 'preact/hooks';
import { api, may } from '../api';
import { formatBytes } from '../changes/preview';
import { ErrorText, formatDate, useAction } from '../ui';

/**
 * A tenant's quotas on its page (PUT /api/tenants/{schema}/quota): what it uses of its storage
 * and whether it is over, and a form for the statement timeout, the login's connection limit and
 * the storage quota (tenants.manage; anyone else reads them). A field left empty is no quota.
 */

export interface Quota {
  statementTimeoutMs: number | null;
  connectionLimit: number | null;
  storageBytes: number | null;
  usedBytes: number | null;
  measuredAt: string | null;
  overStorage: boolean;
}

const MIB = 1024 * 1024;
/** A tenant login's connections without a quota (lib/db/role-names TENANT_CONNECTION_LIMIT). */
const DEFAULT_CONNECTIONS = 10;

/** `12.5 MB of 100 MB` for the tenants' list. */
export const storageText = (quota: Quota | null) =>
  quota?.storageBytes ? `of ${formatBytes(quota.storageBytes)}${quota.overStorage ? ' (over)' : ''}` : '';

const text = (value: number | null, scale = 1) => (value === null ? '' : String(value / scale));
const numberOf = (value: string, scale = 1) =>
  value.trim() === '' ? null : Math.round(Number(value) * scale);

/** One quota's number; empty is none. */
function QuotaField(props: {
  label: string;
  /** Its accessible name, when the label says less. */
  name?: string;
  placeholder: string;
  decimal?: boolean;
  value: string;
  onInput: (value: string) => void;
}) {
  return (
    <label>
      {props.label}{' '}
      <input
        aria-label={props.name ?? props.label}
        inputMode={props.decimal ? 'decimal' : 'numeric'}
        placeholder={props.placeholder}
        value={props.value}
        onInput={(e) => props.onInput(e.currentTarget.value)}
      />
    </label>
  );
}

export function QuotaSection({
  schema,
  quota,
  onSaved,
}: {
  schema: string;
  quota: Quota | null;
  onSaved: () => void;
}) {
  const [timeout, setTimeoutText] = useState(text(quota?.statementTimeoutMs ?? null));
  const [connections, setConnections] = useState(text(quota?.connectionLimit ?? null));
  const [storage, setStorage] = useState(text(quota?.storageBytes ?? null, MIB));
  const save = useAction(async () => {
    await api('PUT', `tenants/${encodeURIComponent(schema)}/quota`, {
      body: {
        statementTimeoutMs: numberOf(timeout),
        connectionLimit: numberOf(connections),
        storageBytes: numberOf(storage, MIB),
      },
    });
    onSaved();
  });
  return (
    <>
      <h2>Quotas</h2>
      {quota?.storageBytes && (
        <p class={quota.overStorage ? 'warning' : 'muted'} data-testid="storage-use">
          Uses {formatBytes(quota.usedBytes ?? 0)} of its {formatBytes(quota.storageBytes)} storage quota
          {quota.overStorage
            ? ': over it, writes that add data answer 507 (reads, deletes and drops go on)'
            : ''}
          {quota.measuredAt ? ` (measured ${formatDate(quota.measuredAt)})` : ''}.
        </p>
      )}
      {may('tenants.manage') ? (
        <form
          class="filters"
          onSubmit={(e) => {
            e.preventDefault();
            save.run();
          }}
        >
          <QuotaField
            label="Statement timeout (ms)"
            placeholder="none"
            value={timeout}
            onInput={setTimeoutText}
          />
          <QuotaField
            label="Connections of its login"
            name="Connection limit"
            placeholder={String(DEFAULT_CONNECTIONS)}
            value={connections}
            onInput={setConnections}
          />
          <QuotaField
            label="Storage (MiB)"
            name="Storage quota (MiB)"
            placeholder="none"
            decimal
            value={storage}
            onInput={setStorage}
          />
          <button type="submit" disabled={save.busy}>
            Save quotas
          </button>
        </form>
      ) : (
        <dl class="facts" aria-label="Quotas">
          <dt>Statement timeout</dt>
          <dd>{quota?.statementTimeoutMs ? `${quota.statementTimeoutMs} ms` : 'none'}</dd>
          <dt>Connections of its login</dt>
          <dd>{quota?.connectionLimit ?? DEFAULT_CONNECTIONS}</dd>
          <dt>Storage</dt>
          <dd>{quota?.storageBytes ? formatBytes(quota.storageBytes) : 'none'}</dd>
        </dl>
      )}
      <ErrorText error={save.error} />
    </>
  );
}
