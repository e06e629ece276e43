import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { runScriptShown } from '#lib/admin/query-script';
import {
  DisplayBudget,
  type ExplainMode,
  explained,
  positioned,
  runStatement,
  type ScriptStatement,
  type StatementResult,
  splitScript,
} from '#lib/admin/query-statements';
import {
  type AuditDraft,
  auditing,
  commitAudited,
  describeChange,
  nothingChanged,
  sealFor,
  xidOf,
} from '#lib/db/audit-log';
import { isCopyInRefused } from '#lib/db/caller-query';
import type { SchemaAccess } from '#lib/db/executor';
import { quoteIdent } from '#lib/db/identifiers';
import { fromDatabaseError, isPgError } from '#lib/db/pg-errors';
import { discardAfterUse } from '#lib/db/pool';
import { beginStatements } from '#lib/db/pooler';
import { boundedQuery, type ResultLimits, ResultTooLarge } from '#lib/db/result-limits';
import { ApiError, BadRequest, Forbidden, QueryTimeout } from '#lib/errors';

/**
 * The ad-hoc SQL of POST /api/query: the admin's scripts and a key's one statement, run in one
 * transaction of ours under the statement timeout and the result limits, committed with the
 * request's audit entry or rolled back; what a statement may not do (end our transaction, outlive
 * the request) is refused here.
 */

export interface RunQueryInput {
  sql: string;
  schema: string;
  timeoutMs: number;
  limits: ResultLimits;
  /**
   * SQL on behalf of an API key: exactly one statement (extended protocol, so a `;` cannot smuggle
   * in a second one), inside a transaction of ours it may not end.
   */
  asKey: boolean;
  /** The admin's own rights (runAs admin): the search path is set here, to `schema` alone. */
  adminRights?: boolean;
  /** A read-only transaction (a key's SQL while its schema is over its storage quota). */
  readOnly?: boolean;
  /**
   * The schema must still exist when the statement is done (a person whose role may not delete
   * schemas; their SQL runs as the schema's `_exec` role, a member of its owner): checked in our
   * transaction before it commits, so a DROP SCHEMA, however hidden (a DO block, a function), is
   * rolled back. Needs `asKey`: a statement that could end our transaction first is refused.
   */
  keepSchema?: boolean;
  /**
   * The SQL editor's answer: each statement's own result, its rows shown up to so many (and
   * QUERY_MAX_BYTES in all) rather than refused past the limits (lib/admin/query-statements).
   */
  maxRows?: number;
  /** Carried in application_name while it runs, for POST /api/query/cancel (lib/admin/query-cancel). */
  tag?: string;
  /**
   * The one statement's plan (EXPLAIN in JSON; with `analyze`, run with ANALYZE and BUFFERS), in a
   * transaction that is always rolled back, whatever the statement writes.
   */
  explain?: ExplainMode;
}

export interface QueryResult {
  /** The last statement's rows and fields; left out with maxRows (its result in `results` has them). */
  rows?: unknown[];
  fields?: { name: string; dataTypeID: number }[];
  rowCount: number;
  duration: number;
  /** With maxRows: every statement's result, in order (the last one is also the answer's own). */
  results?: StatementResult[];
  /** With maxRows: the last statement had more rows than are shown. */
  truncated?: boolean;
  /** With explain: PostgreSQL's plan, as EXPLAIN (FORMAT JSON) gives it. */
  plan?: unknown;
}

/** A SQL error is the caller's to fix: 400 with PostgreSQL's message and position. */
function queryError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  const mapped = fromDatabaseError(error);
  if (!isPgError(error)) return mapped ?? error;
  // Unmapped codes, and outage codes raised by code rather than by an outage, are left to the
  // session's own mapping (lib/db/executor): 400s.
  if (!mapped || (mapped.status === 503 && (error as { where?: string }).where)) return error;
  if (mapped.status === 503) return mapped;
  if (isCopyInRefused(error)) {
    return new BadRequest(
      'COPY from the client',
      'COPY ... FROM STDIN waits for rows the SQL route cannot send; import them with POST /api/table/{tableName}/import or the import sessions (/api/table/{tableName}/imports)',
      error,
    );
  }
  if (isCancelled(error)) {
    return new BadRequest(
      'Query cancelled',
      'the statement was cancelled (POST /api/query/cancel) and its transaction rolled back',
      error,
    );
  }
  if (error.code === '57014') return new QueryTimeout('ran longer than the query timeout', error);
  // Raised by the caller's SQL (RAISE ... ERRCODE '28000'), not a refused login of ours.
  if (error.code.startsWith('28')) return new BadRequest('Query failed', error.message, error);
  const status = mapped.status === 404 ? 400 : mapped.status;
  return new ApiError(status, mapped.title, mapped.message, { cause: error, details: mapped.details });
}

/** PostgreSQL's words for a pg_cancel_backend: POST /api/query/cancel, or the database's administrator. */
const isCancelled = (error: unknown) =>
  isPgError(error) && error.code === '57014' && error.message.includes('due to user request');

const transactionControl = () =>
  new BadRequest(
    'Transaction control not allowed',
    "an API key's statement runs in a transaction of its own; COMMIT, ROLLBACK and PREPARE TRANSACTION are refused",
  );

/**
 * A key's PREPARE TRANSACTION must not outlive the request: what its session prepared since the
 * statement started is rolled back (not what the tenant's own login prepared before).
 */
async function rollBackPrepared(client: pg.ClientBase, since: Date): Promise<void> {
  const { rows } = await client.query<{ gid: string }>(
    `SELECT gid FROM pg_catalog.pg_prepared_xacts
      WHERE owner = current_user AND database = current_database() AND prepared >= $1`,
    [since],
  );
  for (const { gid } of rows) await client.query(`ROLLBACK PREPARED ${pgLiteral(gid)}`);
}

const pgLiteral = (value: string) => `'${value.replace(/'/g, "''")}'`;

/**
 * Runs a caller's SQL in one transaction under PostgreSQL's statement timeout and the result
 * limits. The admin may send a script (the response describes its last statement); a key sends
 * one statement, and a statement that ends our transaction (COMMIT, ROLLBACK, PREPARE
 * TRANSACTION) is refused, so nothing a key starts outlives its request. The session is reset
 * (or destroyed) before anyone else uses it: see lib/db/pool withSession.
 */
export async function runQuery(access: SchemaAccess, input: RunQueryInput): Promise<QueryResult> {
  // A read-only access runs in a transaction of its own that it rolls back (lib/db/executor).
  // Our transaction's id, for the audit entry committed with it (lib/db/audit-log).
  const sealed = !access.readOnly && !input.readOnly && auditing(access.audit);
  const shown = input.explain
    ? [await explained(input.sql, input.explain)]
    : input.maxRows === undefined
      ? undefined
      : await statementsShown(input.sql, input.asKey);
  return access.run(async (client) => {
    const started = performance.now();
    const begin = opening(client, access, input, sealed);
    try {
      const results = shown
        ? await runShown(client, access, input, begin, shown, sealed)
        : await runWhole(client, access, input, begin, sealed);
      if (input.keepSchema) await assertSchemaKept(client, input.schema);
      // Our transaction is still open unless the admin's script ended it itself.
      // An explained statement changes nothing, whatever it wrote: rolled back like a read-only one.
      const kept = input.readOnly === true || input.explain !== undefined;
      await endTransaction(client, access, kept, changedRows(results));
      return answerOf(input, shown !== undefined, results, Math.round(performance.now() - started));
    } catch (error) {
      // Always: pg rejects on the server's error before the ReadyForQuery after it, so the status
      // read here can still be the one from before our BEGIN. Queued behind that ReadyForQuery, the
      // ROLLBACK ends whatever is open (outside a transaction it is only a warning).
      await client.query('ROLLBACK').catch(() => undefined);
      // Cancelled from outside (POST /api/query/cancel): a second signal could still be on its way.
      if (isCancelled(error)) discardAfterUse(client);
      throw queryError(error);
    }
  });
}

/** The SQL editor's answer: the statements one by one, each with its rows shown (maxRows). */
function runShown(
  client: pg.PoolClient,
  access: SchemaAccess,
  input: RunQueryInput,
  begin: string[],
  statements: ScriptStatement[],
  sealed: boolean,
): Promise<StatementResult[]> {
  // An explained statement answers one row: its plan.
  const rows = input.explain ? 1 : Math.min(input.maxRows ?? 0, input.limits.maxRows);
  const budget = new DisplayBudget(rows, input.limits.maxBytes);
  // A key's one statement alone; the admin's script in as few round trips as keep every result.
  const each = async () =>
    input.asKey
      ? [await runStatement(client, statements[0] as ScriptStatement, budget)]
      : runScriptShown(client, input.sql, statements, budget);
  return input.asKey
    ? runKeyStatement(client, begin, each, access.audit)
    : runShownScript(client, begin, each, sealed ? access.audit : undefined);
}

/** The SQL whole, under the result limits (cancelled past them): the last statement's result. */
async function runWhole(
  client: pg.PoolClient,
  access: SchemaAccess,
  { sql, limits, asKey }: RunQueryInput,
  begin: string[],
  sealed: boolean,
): Promise<pg.QueryResult[]> {
  const bounded: Bounded = (query, onFirstRow) =>
    boundedQuery(client, query, limits, () => access.cancel(client), onFirstRow);
  if (asKey) {
    const statement = () => bounded({ text: sql, queryMode: 'extended' } as pg.QueryConfig);
    return runKeyStatement(client, begin, statement, access.audit);
  }
  // The script's first row is our prefix's: the transaction's id.
  let xid: string | undefined;
  const results = await runScript(begin, sql, bounded, (row) => {
    xid = String((row as { xid?: unknown }).xid);
  });
  if (sealed) sealScript(access.audit, results.slice(begin.length), xid);
  return results;
}

/**
 * The answer: the last statement's rows and fields; or the editor's, every statement's result (the
 * last one's rows not sent twice; a script the parser could not split ran whole, its one result,
 * refused past the limits); or an explained statement's plan.
 */
function answerOf(input: RunQueryInput, split: boolean, results: Answer[], duration: number): QueryResult {
  if (input.explain) return planAnswer(results as StatementResult[], duration, input.limits.maxBytes);
  const last = results.at(-1) as Answer;
  const rowCount = last.rowCount ?? last.rows.length;
  if (input.maxRows === undefined) return { rows: last.rows, fields: fieldsOf(last), rowCount, duration };
  const each = split ? (results as StatementResult[]) : [asShown(last, duration)];
  return { rowCount, duration, results: each, truncated: each.at(-1)?.truncated ?? false };
}

const fieldsOf = (answer: Answer) =>
  (answer.fields ?? []).map((f) => ({ name: f.name, dataTypeID: f.dataTypeID }));

/** The answer of SQL run whole, as one statement's result of the editor's answer. */
const asShown = (answer: Answer, duration: number): StatementResult => ({
  command: answer.command,
  rowCount: answer.rowCount,
  rows: answer.rows,
  fields: fieldsOf(answer),
  truncated: false,
  duration,
});

/** The explained statement's answer: its plan, parsed, and no rows. */
function planAnswer([explain]: StatementResult[], duration: number, maxBytes: number): QueryResult {
  const text = (explain?.rows[0] as Record<string, unknown> | undefined)?.['QUERY PLAN'];
  if (explain?.truncated || typeof text !== 'string') throw new ResultTooLarge('QUERY_MAX_BYTES', maxBytes);
  const result: StatementResult = { ...(explain as StatementResult), rows: [], fields: [], rowCount: null };
  return { rowCount: 0, duration, results: [result], plan: JSON.parse(text) };
}

/** A statement's answer, whichever way it ran. */
interface Answer {
  rows: unknown[];
  fields: { name: string; dataTypeID: number }[];
  command: string | null;
  rowCount: number | null;
}

/**
 * The statements the SQL editor's answer runs one by one: a key's one statement as sent (the
 * extended protocol refuses a second), the admin's script as PostgreSQL's parser splits it.
 * Undefined when the parser cannot split it: it then runs whole as without maxRows.
 */
async function statementsShown(sql: string, asKey: boolean): Promise<ScriptStatement[] | undefined> {
  const statements = await splitScript(sql);
  if (!asKey) return statements;
  const query = statements?.length === 1 && statements[0]?.query === true;
  return [{ text: sql, start: 0, end: [...sql].length, query }];
}

/**
 * The admin's script, a statement at a time after our prefix (sent first, in one round trip);
 * the script may end our transaction itself.
 */
async function runShownScript(
  client: pg.ClientBase,
  begin: string[],
  each: () => Promise<StatementResult[]>,
  audit: AuditDraft | undefined,
): Promise<StatementResult[]> {
  const opened = (await client.query(begin.join('; '))) as unknown as pg.QueryResult[];
  const results = await each();
  if (audit) sealScript(audit, results, xidOf(opened));
  return results;
}

/** What our transaction starts with, before the caller's SQL: one round trip with it. */
function opening(client: pg.ClientBase, access: SchemaAccess, input: RunQueryInput, sealed: boolean) {
  return [
    // Through a transaction pooler, the session's settings follow the BEGIN (lib/db/pooler).
    ...(access.readOnly ? [] : beginStatements(client, input.readOnly ? 'BEGIN READ ONLY' : 'BEGIN')),
    `SET LOCAL statement_timeout = ${Math.trunc(input.timeoutMs)}`,
    ...(input.tag ? [`SET LOCAL application_name = '${runningTagText(input.tag)}'`] : []),
    // The schema alone: a tenant with a key for public may have planted operators there.
    ...(input.adminRights ? [`SET LOCAL search_path TO ${quoteIdent(input.schema, 'schema name')}`] : []),
    ...(sealed ? [XID] : []),
  ];
}

/** A running tag is a MAC in base64url (lib/admin/query-cancel): nothing to quote, and never anything else. */
function runningTagText(tag: string): string {
  if (!/^[\w -]+$/.test(tag)) throw new Error(`a running tag is base64url, not ${JSON.stringify(tag)}`);
  return tag;
}

type Bounded = (query: pg.QueryConfig, onFirstRow?: (row: unknown) => void) => Promise<pg.QueryResult[]>;

/**
 * Ends our transaction, unless the admin's script ended it itself: committed with its audit
 * entry; or, read-only (a key over its schema's storage quota), rolled back like an anon key's,
 * since before PostgreSQL 17 a READ ONLY transaction may still create large objects.
 */
async function endTransaction(client: pg.PoolClient, access: SchemaAccess, readOnly: boolean, rows: number) {
  const open = !access.readOnly && client.getTransactionStatus() !== 'I';
  if (readOnly) {
    nothingChanged(access.audit);
    if (open) await client.query('ROLLBACK');
  } else if (open) await commitAudited(client, access.audit, rows);
  else describeChange(access.audit, { rows });
}

/** Refuses (and so rolls back) a statement that deleted its schema, before our COMMIT. */
async function assertSchemaKept(client: pg.PoolClient, schema: string): Promise<void> {
  const { rowCount } = await client.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [
    schema,
  ]);
  if (!rowCount) throw new Forbidden(`your role may not delete the schema "${schema}"; nothing was changed`);
}

const XID = 'SELECT pg_catalog.pg_current_xact_id()::pg_catalog.text AS xid';
const TRANSACTION_CONTROL = new Set(['COMMIT', 'ROLLBACK', 'BEGIN', 'PREPARE', 'START']);

const WRITES = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE', 'COPY']);

/** The rows the statements wrote, for the audit log. */
const changedRows = (results: Answer[]) =>
  results.reduce((sum, r) => sum + (WRITES.has(r.command ?? '') ? (r.rowCount ?? 0) : 0), 0);

/**
 * A key's one statement, alone (extended protocol), after our transaction is open; the server's
 * clock is read with the BEGIN, for what the statement may prepare (never compare with ours).
 */
async function runKeyStatement<T extends Answer>(
  client: pg.PoolClient,
  begin: string[],
  statement: () => Promise<T[]>,
  audit: AuditDraft | undefined,
): Promise<T[]> {
  const opened = (await client.query(
    [...begin, 'SELECT pg_catalog.transaction_timestamp() AS began'].join('; '),
  )) as unknown as pg.QueryResult<{ began: Date }>[];
  const began = opened.at(-1)?.rows[0]?.began ?? new Date(0);
  sealFor(audit, xidOf(opened));
  const results = await statement();
  // The statement ended our transaction itself (COMMIT, ROLLBACK, PREPARE TRANSACTION), or ended
  // it and chained a new one, which would run without our settings (COMMIT/ROLLBACK AND CHAIN).
  const ended = ['COMMIT', 'ROLLBACK'].includes(results.at(-1)?.command ?? '');
  if (ended || client.getTransactionStatus() === 'I') {
    await rollBackPrepared(client, began);
    throw transactionControl();
  }
  return results;
}

/**
 * The admin's script, sent with our BEGIN in front of it in one round trip: PostgreSQL parses the
 * whole string before it runs any of it, and each of our statements is complete. The script may
 * end our transaction itself. Our COMMIT is never appended to the string: a result over the limits
 * is cancelled from another connection, and by the time the cancel lands the server would have
 * committed, so a 413 would no longer mean nothing was written.
 */
function runScript(
  begin: string[],
  sql: string,
  bounded: Bounded,
  onFirstRow: (row: unknown) => void,
): Promise<pg.QueryResult[]> {
  const prefix = `${begin.join('; ')}; `;
  return bounded({ text: prefix + sql }, onFirstRow).catch((error: unknown) => {
    throw positionedInScript(error, prefix);
  });
}

/**
 * An error's position as the caller counts it, in the SQL they sent, not in our prefix and their
 * SQL together (PostgreSQL counts characters, not UTF-16 units).
 */
const positionedInScript = (error: unknown, prefix: string) => positioned(error, -[...prefix].length);

/**
 * The audit entry sealed for our transaction, unless the caller's statements ended it themselves
 * (COMMIT, ROLLBACK, ...): then it is written in whichever transaction commits it.
 */
function sealScript(
  audit: AuditDraft | undefined,
  results: readonly { command: string | null }[],
  xid: string | undefined,
) {
  const ended = results.some((r) => TRANSACTION_CONTROL.has(r.command ?? ''));
  sealFor(audit, ended ? undefined : xid);
}
