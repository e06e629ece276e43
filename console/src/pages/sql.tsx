import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, may } from '../api';
import type { CatalogNames, SqlEditor } from '../sql-editor';
import { loadStructure } from '../structure';
import { TimeZoneChoice } from '../time-zone';
import { ErrorText, useAction } from '../ui';
import { lineAndColumn } from '../values';
import { PlanTree } from './plan-tree';
import { type Answer, runEach, runWhole, type Send } from './sql-each';
import { HistoryPanel, SnippetsPanel } from './sql-library';
import { DEFAULT_ROWS_SHOWN, ResultTabs, ROWS_SHOWN } from './sql-results';
import { newQueryId, Running, type RunningQuery } from './sql-running';

/**
 * The SQL page: the editor with completion of the schema's tables, running as the schema's role or
 * the admin's, the result grid, drafts, and the person's history and snippets.
 */

/** Where the SQL runs: the open schema, or the one schema the SQL names (public if none). */
type RunIn = 'page' | 'named';

const ROWS_SHOWN_KEY = 'dbadmin.sql.rowsShown';
/** A script in one transaction (the default), or each statement in its own: kept in the browser. */
const EACH_KEY = 'dbadmin.sql.transactions';

function readRowsShown(): number {
  const stored = Number(localStorage.getItem(ROWS_SHOWN_KEY));
  return ROWS_SHOWN.includes(stored) ? stored : DEFAULT_ROWS_SHOWN;
}
const draftKey = (schema: string) => `dbadmin.sql.draft.${schema}`;
/** What the editor completes: the schema's tables and functions, and the schemas one may reach. */
async function loadNames(schema: string): Promise<CatalogNames> {
  const [tables, reachable, routines] = await Promise.all([
    loadStructure(schema),
    api<string[]>('GET', 'schemas').catch(() => [schema]),
    api<{ functions: CatalogNames['functions'] }>('GET', 'functions', { query: { schema } }).catch(() => ({
      functions: [],
    })),
  ]);
  return {
    schema,
    tables: Object.fromEntries(tables.map((t) => [t.table, t.columns.map((c) => c.name)])),
    schemas: reachable,
    functions: routines.functions,
  };
}

const nonce = () => document.querySelector<HTMLMetaElement>('meta[name="csp-nonce"]')?.content;

/**
 * The SQL editor: drafts per schema survive a reload (local storage); the history and snippets are
 * the person's, on the server (./sql-library).
 */
export function SqlPage({ schema }: { schema: string }) {
  const host = useRef<HTMLDivElement>(null);
  const editor = useRef<SqlEditor | undefined>(undefined);
  const text = useRef(localStorage.getItem(draftKey(schema)) ?? '');
  const [result, setResult] = useState<
    (Answer & { runAs: 'schema' | 'admin'; sql: string; each: boolean; serial: number }) | undefined
  >(undefined);
  // Each answer opens on its last statement's tab.
  const runs = useRef(0);
  const [rowsShown, setRowsShown] = useState(readRowsShown);
  const [running, setRunning] = useState<RunningQuery | undefined>(undefined);
  const rowsShownRef = useRef(rowsShown);
  rowsShownRef.current = rowsShown;
  // Grows with each run, so the history shows it.
  const [ran, setRan] = useState(0);
  const [runAs, setRunAs] = useState<'schema' | 'admin'>('schema');
  const runAsRef = useRef(runAs);
  runAsRef.current = runAs;
  // Only a person with sql.admin is offered the choice: anyone else's SQL runs as the schema's role.
  const choosesRunAs = may('sql.admin');
  const [runIn, setRunIn] = useState<RunIn>('page');
  const [eachOwn, setEachOwn] = useState(() => localStorage.getItem(EACH_KEY) === 'each');
  const eachRef = useRef(eachOwn);
  eachRef.current = eachOwn;
  const runInRef = useRef(runIn);
  runInRef.current = runIn;
  const [errorAt, setErrorAt] = useState<string | undefined>(undefined);
  const execute = useAction(async (explain?: 'plan' | 'analyze') => {
    // Sent as written: PostgreSQL's error position counts from the first character.
    const sqlText = text.current;
    if (!sqlText.trim()) return;
    setErrorAt(undefined);
    const runAs = runAsRef.current;
    const send: Send = (sql) => {
      const queryId = newQueryId();
      setRunning({ queryId, since: performance.now() });
      // No schema: the service runs it in the one schema the SQL names, and says which.
      const body = {
        sql,
        schema: runInRef.current === 'named' ? undefined : schema,
        runAs,
        maxRows: rowsShownRef.current,
        queryId,
        explain,
        history: true,
      };
      return api<Answer>('POST', 'query', { body }).finally(() => {
        setRunning(undefined);
        setRan((n) => n + 1);
      });
    };
    const each = eachRef.current && !explain;
    const { answer, failure } = await (each ? runEach : runWhole)(sqlText, send);
    runs.current++;
    setResult(answer && { ...answer, runAs, sql: sqlText, each, serial: runs.current });
    if (failure === undefined) return;
    const position = failure instanceof ApiError ? Number(failure.details.position) : Number.NaN;
    if (Number.isInteger(position) && position > 0) {
      const { line, column } = lineAndColumn(sqlText, position);
      setErrorAt(`at line ${line}, column ${column}`);
      editor.current?.setPosition(position);
    }
    throw failure;
  });
  const [loadError, setLoadError] = useState<unknown>(undefined);
  const runRef = useRef(execute.run);
  runRef.current = execute.run;

  useEffect(() => {
    let cancelled = false;
    text.current = localStorage.getItem(draftKey(schema)) ?? '';
    import('../sql-editor').then(
      ({ createSqlEditor }) => {
        if (cancelled || !host.current) return;
        editor.current = createSqlEditor({
          parent: host.current,
          doc: text.current,
          nonce: nonce(),
          onChange: (value) => {
            text.current = value;
            localStorage.setItem(draftKey(schema), value);
          },
          onRun: () => runRef.current(),
        });
        editor.current.view.focus();
        loadNames(schema).then(
          (names) => editor.current?.setNames(names),
          () => undefined, // completion of keywords still works
        );
      },
      (error: Error) => {
        // An old page after a release asks for a chunk that is gone.
        setLoadError(new Error(`The SQL editor could not load (${error.message}): reload the page.`));
      },
    );
    return () => {
      cancelled = true;
      editor.current?.destroy();
      editor.current = undefined;
    };
  }, [schema]);

  // The formatter is loaded when first asked for (a chunk of its own), PostgreSQL's dialect alone.
  const format = useAction(async () => {
    const { formatDialect, postgresql } = await import('sql-formatter');
    const formatted = formatDialect(text.current, { dialect: postgresql, keywordCase: 'upper', tabWidth: 2 });
    load(formatted);
  });
  const load = (sqlText: string) => {
    const view = editor.current?.view;
    if (!view) return;
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: sqlText } });
    view.focus();
  };

  return (
    <section class="page">
      <h1>
        SQL in <span class="mono">{schema}</span>
      </h1>
      <div class="editor" ref={host} />
      <div class="toolbar">
        <button type="button" class="primary" disabled={execute.busy} onClick={() => execute.run()}>
          Run <kbd>Ctrl</kbd>+<kbd>Enter</kbd>
        </button>
        <button type="button" disabled={execute.busy} onClick={() => execute.run('plan')}>
          Explain
        </button>
        <button
          type="button"
          disabled={execute.busy}
          title="Runs it, with ANALYZE, and rolls everything back"
          onClick={() => execute.run('analyze')}
        >
          Explain analyze
        </button>
        <button type="button" disabled={format.busy} onClick={() => format.run()}>
          Format
        </button>
        <label class="inline">
          Run in
          <select
            aria-label="Run in"
            value={runIn}
            onChange={(e) => setRunIn(e.currentTarget.value as RunIn)}
          >
            <option value="page">{schema}</option>
            <option value="named">the schema the SQL names (else public)</option>
          </select>
        </label>
        <label
          class="inline"
          title="Each statement commits on its own; the first that fails stops the script"
        >
          <input
            type="checkbox"
            checked={eachOwn}
            onChange={(e) => {
              const checked = e.currentTarget.checked;
              localStorage.setItem(EACH_KEY, checked ? 'each' : 'one');
              setEachOwn(checked);
            }}
          />{' '}
          One transaction per statement
        </label>
        <TimeZoneChoice />
        <label class="inline">
          Rows shown
          <select
            aria-label="Rows shown"
            value={rowsShown}
            onChange={(e) => {
              const value = Number(e.currentTarget.value);
              localStorage.setItem(ROWS_SHOWN_KEY, String(value));
              setRowsShown(value);
            }}
          >
            {ROWS_SHOWN.map((n) => (
              <option key={n} value={n}>
                {n.toLocaleString()}
              </option>
            ))}
          </select>
        </label>
        {choosesRunAs && (
          <label class="inline">
            Run as
            <select
              aria-label="Run as"
              value={runAs}
              onChange={(e) => setRunAs(e.currentTarget.value as 'schema' | 'admin')}
            >
              <option value="schema">the schema's role</option>
              <option value="admin">admin (the service's rights)</option>
            </select>
          </label>
        )}
      </div>
      {running && <Running key={running.queryId} run={running} />}
      <ErrorText error={loadError} />
      <ErrorText error={execute.error ?? format.error} />
      {execute.error && errorAt ? <p class="error">{errorAt}</p> : null}
      {result && (
        <div class="result">
          <p class="muted" data-testid="result-summary">
            {result.results.length === 1 ? '1 statement' : `${result.results.length} statements`} ·{' '}
            {result.duration} ms · in <span class="mono">{result.schema}</span>
            {result.runAs === 'admin' ? " with the admin's rights" : " as the schema's role"}
            {result.each ? ', one transaction per statement' : ''}
          </p>
          {result.plan ? (
            <PlanTree explained={result.plan} />
          ) : (
            <ResultTabs
              key={result.serial}
              results={result.results}
              exportable={result.runAs === 'schema' ? { sql: result.sql, schema: result.schema } : undefined}
            />
          )}
        </div>
      )}
      <SnippetsPanel schema={schema} text={() => text.current} onLoad={load} />
      <HistoryPanel generation={ran} onLoad={load} />
    </section>
  );
}
