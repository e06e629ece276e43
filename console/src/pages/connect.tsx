import { useRef, useState } from 'preact/hooks';
import { api } from '../api';
import { copy, ErrorText, useLoad } from '../ui';

/**
 * How to connect to a schema as its own login (GET /api/schema/{schemaName}/connection): psql's
 * command and an application's URL, each with a Copy button. The password is never shown: dbadmin
 * does not keep it.
 */

interface Connection {
  host: string;
  port: number;
  database: string;
  user: string;
  sslmode?: string;
  psql: string;
  url: string;
}

/** Selects the element's text, for a copy by hand where the browser allows no other. */
function selectText(element: HTMLElement | null): void {
  if (!element) return;
  const range = document.createRange();
  range.selectNodeContents(element);
  const selection = getSelection();
  selection?.removeAllRanges();
  selection?.addRange(range);
}

function CopyLine({ label, value, testId }: { label: string; value: string; testId: string }) {
  const shown = useRef<HTMLElement>(null);
  const [copied, setCopied] = useState<boolean | undefined>(undefined);
  const copyIt = async () => {
    const done = await copy(value);
    if (!done) selectText(shown.current);
    setCopied(done);
  };
  return (
    <div class="connection-line">
      <span class="muted">{label}</span>
      <code ref={shown} data-testid={testId}>
        {value}
      </code>
      <button type="button" class="small" aria-label={`Copy ${label}`} onClick={copyIt}>
        {copied ? 'Copied' : 'Copy'}
      </button>
      {copied === false && <span class="muted"> Selected: press Ctrl+C (⌘C) to copy it.</span>}
    </div>
  );
}

export function ConnectSection({ schema }: { schema: string }) {
  const connection = useLoad(
    () => api<Connection>('GET', `schema/${encodeURIComponent(schema)}/connection`),
    [schema],
  );
  const c = connection.data;
  return (
    <section class="card connection" aria-label="Connect">
      <h2>Connect</h2>
      <p class="muted">
        As the schema’s own database login
        {c && (
          <>
            {' '}
            <code>{c.user}</code> to <code>{c.database}</code> on{' '}
            <code>
              {c.host}:{c.port}
            </code>
          </>
        )}
        , with the password set when the schema was created (or since changed by an admin). dbadmin does not
        keep it, so it is not shown: psql asks for it, and in the URL it goes in place of{' '}
        <code>&lt;password&gt;</code>, percent-encoded if it holds characters such as <code>@ : / ? # %</code>
        .
      </p>
      <ErrorText error={connection.error} />
      {c && (
        <>
          <CopyLine label="psql" value={c.psql} testId="connection-psql" />
          <CopyLine label="Application URL" value={c.url} testId="connection-url" />
          {c.sslmode && (
            <p class="muted">
              <code>sslmode={c.sslmode}</code>: the server’s certificate is checked. Give psql its CA with{' '}
              <code>PGSSLROOTCERT</code> or <code>~/.postgresql/root.crt</code>.
            </p>
          )}
        </>
      )}
    </section>
  );
}
