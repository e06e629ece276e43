import type { ComponentChildren, FormHTMLAttributes } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

/** The message of any failure, as the API words it. */
export const messageOf = (error: unknown): string =>
  error instanceof ApiError
    ? `${error.title}: ${error.message}`
    : ((error as Error)?.message ?? String(error));

export function ErrorText({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {messageOf(error)}
    </p>
  );
}

/** Data loaded from the API, with its failure and a way to load it again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  // The caller names what the load depends on (`deps`).
  const reload = useCallback(async () => {
    const mine = ++generation.current;
    setLoading(true);
    try {
      const value = await load();
      if (mine === generation.current) {
        setData(value);
        setError(undefined);
      }
    } catch (failure) {
      if (mine === generation.current) setError(failure);
    } finally {
      if (mine === generation.current) setLoading(false);
    }
  }, deps);
  useEffect(() => {
    reload();
  }, [reload]);
  return { data, setData, error, loading, reload };
}

/** A form whose submit runs `onSubmit` in the page, in place of the browser's own submission. */
export function Form({
  onSubmit,
  children,
  ...attributes
}: Omit<FormHTMLAttributes<HTMLFormElement>, 'onSubmit'> & { onSubmit: () => unknown }) {
  return (
    <form
      {...attributes}
      onSubmit={(event) => {
        event.preventDefault();
        onSubmit();
      }}
    >
      {children}
    </form>
  );
}

/** A form's submit: runs `action`, shows its failure inline, keeps what was typed. */
export function useAction<A extends unknown[]>(action: (...args: A) => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async (...args: A) => {
    setBusy(true);
    setError(undefined);
    try {
      await action(...args);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return { run, busy, error, setError };
}

export function Dialog({
  title,
  onClose,
  children,
}: {
  title: string;
  onClose: () => void;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  return (
    <dialog ref={ref} class="dialog" aria-label={title} onClose={onClose} onCancel={onClose}>
      <h2>{title}</h2>
      {children}
    </dialog>
  );
}

/** Deleting (or overwriting, `verb`) something that holds data: the user types its name first. */
export function ConfirmByName({
  what,
  name,
  verb = 'Delete',
  onConfirm,
  onClose,
  children,
}: {
  what: string;
  name: string;
  verb?: string;
  onConfirm: () => Promise<void>;
  onClose: () => void;
  children?: ComponentChildren;
}) {
  const [typed, setTyped] = useState('');
  const action = useAction(async () => {
    await onConfirm();
    onClose();
  });
  return (
    <Dialog title={`${verb} ${what} ${name}`} onClose={onClose}>
      <Form onSubmit={() => typed === name && action.run()}>
        <p>
          This cannot be undone. Type <strong>{name}</strong> to confirm.
        </p>
        {children}
        <input
          aria-label={`Type ${name} to confirm`}
          value={typed}
          onInput={(event) => setTyped(event.currentTarget.value)}
          autoFocus
        />
        <ErrorText error={action.error} />
        <div class="actions">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class="danger" disabled={typed !== name || action.busy}>
            {verb} {what}
          </button>
        </div>
      </Form>
    </Dialog>
  );
}

export const formatDate = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');

/** The clipboard API needs a secure origin (https or localhost); plain http gets the old way. */
export async function copy(text: string): Promise<boolean> {
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

/** A secret shown once (a key, a token, an invitation link), with a Copy button. */
/** A new schema's login password, as creating a schema and restoring one into a new schema ask it. */
export function NewSchemaPassword({ value, onInput }: { value: string; onInput: (value: string) => void }) {
  return (
    <label>
      Password for its database user
      <input
        name="password"
        type="password"
        autoComplete="new-password"
        value={value}
        onInput={(e) => onInput(e.currentTarget.value)}
        required
      />
    </label>
  );
}

export function ShownOnce({ text, value, testId }: { text: string; value: string; testId: string }) {
  const [copied, setCopied] = useState<boolean | undefined>(undefined);
  return (
    <div class="card key-shown" role="status">
      <p>{text}</p>
      <code data-testid={testId}>{value}</code>
      <button type="button" onClick={() => copy(value).then(setCopied)}>
        {copied ? 'Copied' : 'Copy'}
      </button>
      {copied === false && <span class="muted"> Select it and copy it by hand.</span>}
    </div>
  );
}
