import { useEffect, useRef, useState } from 'preact/hooks';
import { api, may, saveFile } from '../api';
import {
  type BackupSummary,
  BUNDLE_EXTENSION,
  type BundleFile,
  downloadBackup,
  type RestoreOutcome,
  readBundle,
  restoreBundle,
} from '../bundles';
import { formatBytes } from '../changes/preview';
import { href } from '../router';
import { schemas } from '../schemas';
import {
  ConfirmByName,
  Dialog,
  ErrorText,
  Form,
  formatDate,
  NewSchemaPassword,
  useAction,
  useLoad,
} from '../ui';

/**
 * A tenant's backups on its page (the backups permission): the schema's bundles kept, Back up now,
 * each one downloaded as one file or deleted; and Restore…, a file of them put back over this
 * schema's rows (after its name is typed) or into a new schema.
 */

/** Parts done of all of them, while a download or a restore runs. */
interface Parts {
  done: number;
  total: number;
}

const rowsText = (rows: number | undefined) => (rows === undefined ? '—' : rows.toLocaleString());

function BackupRow({
  backup,
  busy,
  onDownload,
  onDelete,
}: {
  backup: BackupSummary;
  busy: boolean;
  onDownload: () => void;
  onDelete: () => void;
}) {
  const ready = backup.state === 'ready';
  return (
    <tr>
      <td>{formatDate(backup.createdAt)}</td>
      <td>{ready ? rowsText(backup.rows) : <span class="muted">being made</span>}</td>
      <td>{backup.bytes === undefined ? '—' : formatBytes(backup.bytes)}</td>
      <td>{formatDate(backup.expiresAt)}</td>
      <td class="actions">
        {ready && (
          <button type="button" class="small" disabled={busy} onClick={onDownload}>
            Download
          </button>
        )}
        <button type="button" class="danger small" disabled={busy} onClick={onDelete}>
          Delete
        </button>
      </td>
    </tr>
  );
}

export function BackupsSection({ schema }: { schema: string }) {
  const list = useLoad(() => api<BackupSummary[]>('GET', 'backups', { query: { schema } }), [schema]);
  const [downloading, setDownloading] = useState<Parts | undefined>(undefined);
  const [restoring, setRestoring] = useState(false);
  const stop = useRef(new AbortController());
  useEffect(() => () => stop.current.abort(), []);
  const backUp = useAction(async () => {
    await api('POST', 'backups', { query: { schema } });
    await list.reload();
  });
  const download = useAction(async (backup: BackupSummary) => {
    setDownloading({ done: 0, total: backup.parts ?? 0 });
    try {
      const saved = await downloadBackup(
        backup,
        (done, total) => setDownloading({ done, total }),
        stop.current.signal,
      );
      saveFile(saved.file, saved.name);
    } finally {
      setDownloading(undefined);
    }
  });
  const remove = useAction(async (backup: BackupSummary) => {
    await api('DELETE', `backups/${encodeURIComponent(backup.id)}`, { query: { schema } });
    await list.reload();
  });
  const busy = backUp.busy || download.busy || remove.busy;
  return (
    <section aria-label="Backups">
      <h2>Backups</h2>
      <div class="toolbar">
        <button type="button" onClick={() => backUp.run()} disabled={busy}>
          {backUp.busy ? 'Backing up…' : 'Back up now'}
        </button>
        <button type="button" onClick={() => setRestoring(true)}>
          Restore…
        </button>
      </div>
      <ErrorText error={list.error ?? backUp.error ?? download.error ?? remove.error} />
      {downloading && (
        <p role="status" aria-label="Download progress">
          Downloading part {Math.min(downloading.done + 1, downloading.total)} of {downloading.total}
        </p>
      )}
      {list.data && list.data.length > 0 && (
        <table class="grid" aria-label={`Backups of ${schema}`}>
          <thead>
            <tr>
              <th>Created</th>
              <th>Rows</th>
              <th>Size</th>
              <th>Expires</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {list.data.map((backup) => (
              <BackupRow
                key={backup.id}
                backup={backup}
                busy={busy}
                onDownload={() => download.run(backup)}
                onDelete={() =>
                  confirm(
                    `Delete the backup of ${formatDate(backup.createdAt)}? Its file cannot be downloaded again.`,
                  ) && remove.run(backup)
                }
              />
            ))}
          </tbody>
        </table>
      )}
      {list.data?.length === 0 && <p class="muted">No backups kept.</p>}
      {restoring && <RestoreDialog schema={schema} onClose={() => setRestoring(false)} />}
    </section>
  );
}

/** What the chosen file holds, from its manifest. */
function BundleFacts({ bundle }: { bundle: BundleFile }) {
  const { manifest } = bundle;
  return (
    <p class="muted" data-testid="bundle-facts">
      Schema {manifest.schema}, backed up {formatDate(manifest.createdAt)}: {manifest.tables.length}{' '}
      {manifest.tables.length === 1 ? 'table' : 'tables'}, {rowsText(manifest.rows)} rows, in{' '}
      {manifest.parts.length} {manifest.parts.length === 1 ? 'part' : 'parts'}.
    </p>
  );
}

function RestoreProgress({ parts }: { parts: Parts }) {
  const committing = parts.done === parts.total;
  return (
    <div role="status" aria-label="Restore progress">
      <progress max={parts.total || 1} value={parts.done} />
      <span class="muted">
        {committing ? 'Committing…' : `Sending part ${parts.done + 1} of ${parts.total}`}
      </span>
    </div>
  );
}

function Restored({ outcome }: { outcome: RestoreOutcome }) {
  return (
    <p class="success" role="status">
      Restored {outcome.rows.toLocaleString()} {outcome.rows === 1 ? 'row' : 'rows'} in {outcome.tables}{' '}
      {outcome.tables === 1 ? 'table' : 'tables'} into{' '}
      {outcome.mode === 'new' ? (
        <a href={href({ page: 'tenants', schema: outcome.schema })}>{outcome.schema}</a>
      ) : (
        outcome.schema
      )}{' '}
      (backed up from {outcome.from}).
    </p>
  );
}

/** A bundle file back: over this schema's rows, or into a new schema (for who may create schemas). */
function RestoreDialog({ schema, onClose }: { schema: string; onClose: () => void }) {
  const [bundle, setBundle] = useState<BundleFile | undefined>(undefined);
  const [mode, setMode] = useState<'replace' | 'new'>('replace');
  const [name, setName] = useState('');
  const [password, setPassword] = useState('');
  const [confirming, setConfirming] = useState(false);
  const [parts, setParts] = useState<Parts | undefined>(undefined);
  const [outcome, setOutcome] = useState<RestoreOutcome | undefined>(undefined);
  const stop = useRef(new AbortController());
  useEffect(() => () => stop.current.abort(), []);
  const read = useAction(async (file: File) => {
    setBundle(undefined);
    setOutcome(undefined);
    setBundle(await readBundle(file));
  });
  const run = useAction(async () => {
    if (!bundle) return;
    stop.current = new AbortController();
    setOutcome(undefined);
    const target = mode === 'new' ? { mode, schema: name, password } : { mode, schema };
    try {
      const done = await restoreBundle(
        bundle,
        target,
        (done, total) => setParts({ done, total }),
        stop.current.signal,
      );
      setOutcome(done);
      if (done.mode === 'new') await schemas.load().catch(() => undefined);
    } finally {
      setParts(undefined);
    }
  });
  const creates = may('schemas.create');
  return (
    <>
      <Dialog title={`Restore a backup (${schema})`} onClose={onClose}>
        <Form class="change" onSubmit={() => (mode === 'replace' ? setConfirming(true) : run.run())}>
          <fieldset class="plain" disabled={run.busy}>
            <label>
              Bundle file
              <input
                type="file"
                accept={BUNDLE_EXTENSION}
                onChange={(event) => {
                  const file = event.currentTarget.files?.[0];
                  if (file) read.run(file);
                }}
              />
            </label>
            {bundle && <BundleFacts bundle={bundle} />}
            <ErrorText error={read.error} />
            <fieldset class="choices">
              <legend>Restore</legend>
              <label class="inline">
                <input
                  type="radio"
                  name="mode"
                  checked={mode === 'replace'}
                  onChange={() => setMode('replace')}
                />
                Replace this schema's rows
              </label>
              {creates && (
                <label class="inline">
                  <input type="radio" name="mode" checked={mode === 'new'} onChange={() => setMode('new')} />
                  Into a new schema
                </label>
              )}
            </fieldset>
            {mode === 'new' && (
              <>
                <label>
                  New schema name
                  <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
                </label>
                <NewSchemaPassword value={password} onInput={setPassword} />
              </>
            )}
          </fieldset>
          {parts && <RestoreProgress parts={parts} />}
          {!stop.current.signal.aborted && <ErrorText error={run.error} />}
          {outcome && <Restored outcome={outcome} />}
          <div class="actions">
            <button type="button" onClick={() => (run.busy ? stop.current.abort() : onClose())}>
              {run.busy ? 'Stop' : outcome ? 'Close' : 'Cancel'}
            </button>
            <button type="submit" class="primary" disabled={!bundle || run.busy}>
              Restore
            </button>
          </div>
        </Form>
      </Dialog>
      {confirming && (
        <ConfirmByName
          what="schema"
          name={schema}
          verb="Replace the rows of"
          onClose={() => setConfirming(false)}
          onConfirm={async () => {
            run.run();
          }}
        >
          <p>Every table's rows are replaced by the backup's; the rows it holds now are gone.</p>
        </ConfirmByName>
      )}
    </>
  );
}
