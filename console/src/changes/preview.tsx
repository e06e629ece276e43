import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type Query } from '../api';
import { Dialog, ErrorText, Form, useAction } from '../ui';

/**
 * Every schema change the console makes goes through here: the API's dryRun first (the SQL, the
 * locks in plain words, whether the table is rewritten or scanned, the sessions it would wait
 * for), then the change itself only after the admin confirms it.
 */

/** A schema-change route of the API, as the console calls it. */
export interface ChangeRequest {
  method: 'POST' | 'PATCH' | 'DELETE';
  path: string;
  /** DELETE routes take their options in the query, the others in the body. */
  query?: Query;
  body?: Record<string, unknown>;
}

export interface Blocker {
  pid: number;
  role: string;
  state: string | null;
  transactionSeconds: number | null;
  lock: string;
  query?: string;
}

export interface Preview {
  summary: string;
  sql: string[];
  locks: { table: string; level: string; blocks: string }[];
  rewrites: boolean;
  scans: boolean;
  /** For a drop: what goes with it; `cascade`, only with cascade (else the drop fails). */
  drops?: { what: string; cascade: boolean }[];
  /** A type change PostgreSQL does not make by itself, previewed without USING: it would fail. */
  needsUsing?: { message: string; using: string };
  tables: { table: string; sizeBytes: number; estimatedRows: number }[];
  blockers: Blocker[];
}

const withDryRun = (request: ChangeRequest, dryRun: boolean): ChangeRequest =>
  request.method === 'DELETE'
    ? { ...request, query: { ...request.query, dryRun } }
    : { ...request, body: { ...request.body, dryRun } };

const send = <T,>(request: ChangeRequest) =>
  api<T>(request.method, request.path, { query: request.query, body: request.body });

export const previewChange = (request: ChangeRequest) => send<Preview>(withDryRun(request, true));

export const formatBytes = (bytes: number): string => {
  if (bytes < 1024) return `${bytes} bytes`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
};

/** The catalog's figures, as of the table's last VACUUM or ANALYZE (none yet: both 0). */
const sizeText = (t: Preview['tables'][number]) =>
  t.sizeBytes === 0 && t.estimatedRows === 0
    ? `${t.table}: not yet measured`
    : `${t.table}: ${formatBytes(t.sizeBytes)}, about ${t.estimatedRows.toLocaleString()} rows`;

/** What the change costs while it runs, in a sentence. */
function costInWords(preview: Preview): string {
  const size = preview.tables.map(sizeText).join('; ');
  const where = size ? ` (${size})` : '';
  if (preview.rewrites)
    return `Rewrites the table: every row is copied while the lock is held${where}. On a large table this takes a while.`;
  if (preview.scans) return `Reads every row while the lock is held${where}, to check or to index them.`;
  return 'Changes only the catalog: once it has its lock it is done at once.';
}

export function Blockers({ blockers, waiting }: { blockers: Blocker[]; waiting: boolean }) {
  if (blockers.length === 0) return null;
  return (
    <section class="blockers" aria-label="Blocking sessions">
      <p class="warning">
        {waiting
          ? `${blockers.length === 1 ? 'A session holds' : `${blockers.length} sessions hold`} a lock this change needs. It would wait for them only up to the lock timeout, then fail without changing anything:`
          : 'These sessions held the lock it needed:'}
      </p>
      <ul>
        {blockers.map((b) => (
          <li key={b.pid}>
            session {b.pid} of <span class="mono">{b.role}</span>, {b.state ?? 'state unknown'}
            {b.transactionSeconds !== null
              ? `, its transaction open ${Math.round(b.transactionSeconds)} s`
              : ''}
            , holds {b.lock}
            {b.query ? (
              <>
                : <code>{b.query}</code>
              </>
            ) : null}
          </li>
        ))}
      </ul>
    </section>
  );
}

/** What a drop takes with it; what only cascade drops is a warning, or a refusal to come without it. */
function Drops({ drops, cascade }: { drops: { what: string; cascade: boolean }[]; cascade: boolean }) {
  const auto = drops.filter((d) => !d.cascade);
  const more = drops.filter((d) => d.cascade);
  return (
    <>
      {auto.length > 0 && <p data-testid="change-drops">Also drops {auto.map((d) => d.what).join(', ')}.</p>}
      {more.length > 0 && (
        <p class="warning" data-testid="change-cascade">
          {cascade
            ? `Cascade also drops ${more.map((d) => d.what).join(', ')}, and what depends on them.`
            : `${more.map((d) => d.what).join(', ')} depend${more.length === 1 ? 's' : ''} on it: without cascade the change fails.`}
        </p>
      )}
    </>
  );
}

/** A type change that needs USING: why, and the expression offered, which `onUse` takes. */
function NeedsUsing({
  needs,
  onUse,
}: {
  needs: NonNullable<Preview['needsUsing']>;
  onUse: ((using: string) => void) | undefined;
}) {
  return (
    <div class="warning" data-testid="change-needs-using">
      <p>{needs.message}. Run would fail as it is.</p>
      {onUse && (
        <button type="button" onClick={() => onUse(needs.using)}>
          Use {needs.using}
        </button>
      )}
    </div>
  );
}

/** The dry run's answer, in plain words; `onUseUsing` takes the USING expression it offers. */
export function PreviewText({
  preview,
  onUseUsing,
}: {
  preview: Preview;
  onUseUsing?: ((using: string) => void) | undefined;
}) {
  return (
    <div class="preview" data-testid="change-preview">
      <p>{preview.summary}.</p>
      <pre class="sql" data-testid="change-sql">
        {preview.sql.map((statement) => `${statement};`).join('\n')}
      </pre>
      {preview.locks.length === 0 ? (
        <p>Takes no lock on a table.</p>
      ) : (
        <ul class="locks">
          {preview.locks.map((lock) => (
            <li key={`${lock.table}:${lock.level}`}>
              Locks <span class="mono">{lock.table}</span> in <strong>{lock.level}</strong> mode: while it
              runs, it blocks {lock.blocks}.
            </li>
          ))}
        </ul>
      )}
      <p class={preview.rewrites || preview.scans ? 'warning' : ''}>{costInWords(preview)}</p>
      {preview.needsUsing && <NeedsUsing needs={preview.needsUsing} onUse={onUseUsing} />}
      <Drops
        drops={preview.drops ?? []}
        cascade={preview.sql.some((statement) => / CASCADE$/.test(statement))}
      />
      <Blockers blockers={preview.blockers} waiting />
    </div>
  );
}

/** Cancel (Close while it runs), Back, Check again, and Review or Run. */
function ChangeActions(props: {
  reviewed: boolean;
  canGoBack: boolean;
  running: boolean;
  reviewing: boolean;
  /** The preview says the change would fail as it is: Run is not offered. */
  wouldFail: boolean;
  danger: boolean;
  onClose: () => void;
  onBack: () => void;
  onCheckAgain: () => void;
}) {
  const { reviewed, running, reviewing } = props;
  return (
    <div class="actions">
      <button type="button" onClick={props.onClose}>
        {running ? 'Close' : 'Cancel'}
      </button>
      {reviewed && props.canGoBack && (
        <button type="button" onClick={props.onBack} disabled={running}>
          Back
        </button>
      )}
      {reviewed && (
        <button type="button" onClick={props.onCheckAgain} disabled={running || reviewing}>
          Check again
        </button>
      )}
      <button
        type="submit"
        class={props.danger && reviewed ? 'danger' : 'primary'}
        disabled={running || reviewing || (reviewed && props.wouldFail)}
      >
        {reviewed ? 'Run change' : 'Review change'}
      </button>
    </div>
  );
}

/** A preview and the very request it previewed: Run sends that one, whatever the inputs say since. */
interface Reviewed {
  request: ChangeRequest;
  preview: Preview;
}

/**
 * A change in two steps: its inputs (children; none opens straight on the preview), then the
 * dry run's preview with Run, which sends exactly the request previewed. `request` builds the
 * change from the inputs, throwing a message while they are incomplete. `running` is shown while
 * the change runs (an index build's progress). Closed while it runs, the change goes on on the
 * server: `onDone` still hears of it, told the dialog is gone. A preview that says a type change
 * needs USING offers its expression: `onUseUsing` hears of it (to show it in the inputs), and the
 * change is previewed again with it.
 */
export function ChangeDialog<T = unknown>({
  title,
  request,
  children,
  onDone,
  onClose,
  running,
  danger = false,
  onUseUsing,
}: {
  title: string;
  request: () => ChangeRequest;
  children?: ComponentChildren;
  onDone: (answer: T, request: ChangeRequest, stillOpen: boolean) => void | Promise<void>;
  onClose: () => void;
  running?: ComponentChildren;
  danger?: boolean;
  onUseUsing?: (using: string) => void;
}) {
  const [reviewed, setReviewed] = useState<Reviewed | undefined>(undefined);
  const open = useRef(true);
  const shown = useRef<HTMLDivElement>(null);
  // Bumped by Back: a dry run answering after it is not shown over the inputs.
  const generation = useRef(0);
  useEffect(
    () => () => {
      open.current = false;
    },
    [],
  );
  const review = useAction(async (given?: ChangeRequest) => {
    const mine = ++generation.current;
    run.setError(undefined);
    const asked = given ?? request();
    try {
      const preview = await previewChange(asked);
      if (mine === generation.current) setReviewed({ request: asked, preview });
    } catch (error) {
      // A failed Check again leaves nothing to run: Review again once the cause is gone.
      if (mine === generation.current) setReviewed(undefined);
      throw error;
    }
  });
  const run = useAction(async () => {
    if (!reviewed) return;
    const answer = await send<T>(withDryRun(reviewed.request, false));
    await onDone(answer, reviewed.request, open.current);
    if (open.current) onClose();
  });
  const back = () => {
    generation.current++;
    run.setError(undefined);
    review.setError(undefined);
    setReviewed(undefined);
  };
  const hasInputs = children !== undefined && children !== null && children !== false;
  useEffect(() => {
    if (!hasInputs) review.run();
  }, []);
  useEffect(() => {
    if (reviewed) shown.current?.focus();
  }, [reviewed]);
  const refused = run.error instanceof ApiError ? run.error : undefined;
  const held = (refused?.details.blockers as Blocker[] | undefined) ?? [];
  const preview = reviewed?.preview;
  const useUsing =
    onUseUsing && reviewed
      ? (using: string) => {
          onUseUsing(using);
          review.run({ ...reviewed.request, body: { ...reviewed.request.body, using } });
        }
      : undefined;
  return (
    <Dialog title={title} onClose={onClose}>
      <Form class="change" onSubmit={() => (reviewed ? run.run() : review.run())}>
        {!preview && (
          <fieldset class="plain" disabled={review.busy}>
            {children}
          </fieldset>
        )}
        {preview && (
          <div ref={shown} tabIndex={-1} aria-live="polite" class="preview-box">
            <PreviewText preview={preview} onUseUsing={useUsing} />
          </div>
        )}
        {review.busy && <p class="muted">Checking what it would do…</p>}
        <ErrorText error={review.error} />
        <ErrorText error={run.error} />
        <Blockers blockers={held} waiting={false} />
        {run.busy && (
          <p class="muted" role="status">
            Running… Closing this dialog leaves the change running on the server.
          </p>
        )}
        {run.busy && running}
        <ChangeActions
          reviewed={!!preview}
          canGoBack={hasInputs}
          running={run.busy}
          reviewing={review.busy}
          wouldFail={!!preview?.needsUsing}
          danger={danger}
          onClose={onClose}
          onBack={back}
          onCheckAgain={() => review.run()}
        />
      </Form>
    </Dialog>
  );
}

/**
 * Dropping one thing of a table (an index, a constraint), previewed like every change, with the
 * one option such a drop takes (`concurrently`, `cascade`) as a checkbox.
 */
export function DropDialog({
  what,
  name,
  path,
  schema,
  option,
  onClose,
  onDone,
}: {
  what: string;
  name: string;
  /** The DELETE route, below the API's root. */
  path: string;
  schema: string;
  option: { name: string; label: string; checked: boolean };
  onClose: () => void;
  onDone: () => void | Promise<void>;
}) {
  const [checked, setChecked] = useState(option.checked);
  return (
    <ChangeDialog
      title={`Drop ${what} ${name}`}
      danger
      request={() => ({ method: 'DELETE', path, query: { schema, [option.name]: checked } })}
      onClose={onClose}
      onDone={onDone}
    >
      <label class="inline">
        <input
          type="checkbox"
          checked={checked}
          onChange={(event) => setChecked(event.currentTarget.checked)}
        />
        {option.label}
      </label>
    </ChangeDialog>
  );
}
