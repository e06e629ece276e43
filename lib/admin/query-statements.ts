import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import Cursor from 'pg-cursor';
import { type Json, loadParser } from '#lib/admin/query-schema';
import { CallerQuery } from '#lib/db/caller-query';
import { jsonRowTypes } from '#lib/db/json-rows';
import { isPgError } from '#lib/db/pg-errors';
import { JsonSize, jsonBytesAtMost, ResultTooDeep } from '#lib/db/result-limits';
import { ApiError, BadRequest, ServiceUnavailable } from '#lib/errors';

/**
 * The SQL editor's way of running a script (POST /api/query with `maxRows`): its statements one at
 * a time, each answered with its own result, and rows shown up to a cap rather than refused past
 * the limits. A query's rows are read from a portal a batch at a time, so a SELECT stops at the
 * rows shown: the first 1,000 rows of a million-row table cost about a page's read, as in psql's
 * FETCH_COUNT, pgAdmin and DBeaver. Any other statement runs to its end (PostgreSQL finishes an
 * INSERT ... RETURNING before it sends a row anyway), so its command tag and count are exact.
 */

/** One statement of a script as its author wrote it, and where it starts in the script. */
export interface ScriptStatement {
  text: string;
  /** Characters before it in the script (PostgreSQL's error positions count characters). */
  start: number;
  /** Characters up to its end. */
  end: number;
  /** A plain query, whose reading may stop at the rows shown. */
  query: boolean;
  /** Its parse node's name (`SelectStmt`, `DeleteStmt`...). */
  kind?: string;
}

/** One statement's answer. */
export interface StatementResult {
  command: string | null;
  /** The rows the statement returned or changed; null when it was stopped at the rows shown. */
  rowCount: number | null;
  rows: unknown[];
  fields: { name: string; dataTypeID: number }[];
  /** It had more rows than are shown. */
  truncated: boolean;
  /** Milliseconds; null for those sent in one round trip with the next (lib/admin/query-script). */
  duration: number | null;
}

const isObject = (value: Json | undefined): value is { [key: string]: Json } =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** A SELECT (not SELECT INTO, which makes a table): nothing is left undone when its reading stops. */
function isQuery(statement: Json | undefined): boolean {
  if (!isObject(statement) || !isObject(statement.SelectStmt)) return false;
  return statement.SelectStmt.intoClause === undefined;
}

/**
 * The script's statements, split where PostgreSQL's own parser splits them; undefined when it
 * cannot read the script (a syntax error: the server then answers it whole, with its position).
 */
export async function splitScript(sql: string): Promise<ScriptStatement[] | undefined> {
  const parser = await loadParser();
  let tree: Json | undefined;
  try {
    tree = parser?.parseSync(sql);
  } catch {
    return undefined;
  }
  const raw = isObject(tree) && Array.isArray(tree.stmts) ? tree.stmts : [];
  if (raw.length === 0) return undefined;
  // The parser's locations count UTF-8 bytes; the last statement runs to the end.
  const bytes = Buffer.from(sql, 'utf8');
  return raw.filter(isObject).map((entry) => {
    const from = typeof entry.stmt_location === 'number' ? entry.stmt_location : 0;
    const to =
      typeof entry.stmt_len === 'number' && entry.stmt_len > 0 ? from + entry.stmt_len : bytes.length;
    const text = bytes.subarray(from, to).toString('utf8');
    const start = [...bytes.subarray(0, from).toString('utf8')].length;
    return {
      text,
      start,
      end: start + [...text].length,
      query: isQuery(entry.stmt),
      kind: isObject(entry.stmt) ? Object.keys(entry.stmt)[0] : undefined,
    };
  });
}

/**
 * Where each statement starts and ends in the script, in characters, or a 400 with the parser's
 * own words and position when it cannot read it.
 */
export async function statementBounds(sql: string) {
  const statements = await splitScript(sql);
  if (statements) return statements.map(({ start, end, query }) => ({ start, end, query }));
  // Parsed again only to say why it could not be: the failure's own path.
  const parser = await loadParser();
  if (!parser)
    throw new ServiceUnavailable(
      'SQL parser unavailable',
      'the SQL parser did not load; run the script whole',
    );
  try {
    parser.parseSync(sql);
  } catch (error) {
    // The parser's cursor counts UTF-8 bytes from 0; PostgreSQL's positions, characters from 1.
    const cursor = (error as { sqlDetails?: { cursorPosition?: number } }).sqlDetails?.cursorPosition;
    const at =
      cursor === undefined
        ? undefined
        : [...Buffer.from(sql).subarray(0, cursor).toString('utf8')].length + 1;
    throw new ApiError(400, 'Invalid SQL', (error as Error).message, {
      details: at === undefined ? {} : { position: at },
    });
  }
  // Parsed, yet no statement: only comments or semicolons.
  throw new BadRequest('No statement', 'the script holds no statement to run');
}

/** What the rows shown may take: so many per statement, and QUERY_MAX_BYTES of JSON in all. */
export class DisplayBudget {
  private readonly size: JsonSize;
  private readonly kept: unknown[] = [];
  private full = false;

  constructor(
    readonly rowsPerStatement: number,
    private readonly maxBytes: number,
  ) {
    this.size = new JsonSize(maxBytes);
  }

  /** The bytes the rows shown take so far. */
  get used(): number {
    return this.size.used;
  }

  /** Whether the row fits beside those shown before it (once one does not, none does). */
  take(row: unknown): boolean {
    if (this.full || this.size.over(row, this.kept)) {
      this.full = true;
      return false;
    }
    this.kept.push(row);
    return true;
  }

  /**
   * Rows the next read of a query fetches: one past those it may still show; at first a few, then
   * as many as the bytes left hold at the size its rows had so far (`bytes`, bounded from above,
   * for `shown` rows), so wide rows never arrive in a batch past the session's wire limit; one
   * once nothing more fits, to tell whether there were more.
   */
  batch(shown: number, bytes: number): number {
    if (this.full) return 1;
    const left = this.rowsPerStatement + 1 - shown;
    if (shown === 0) return Math.max(1, Math.min(left, FIRST_BATCH));
    const fit = Math.floor((this.maxBytes - this.used) / Math.max(1, bytes / shown)) + 1;
    return Math.max(1, Math.min(left, fit));
  }
}

/** A first read small enough that wide rows (up to a megabyte or so) stay under the wire limit. */
const FIRST_BATCH = 4;

type Read = { rows: unknown[]; result: pg.QueryResult | undefined };

/**
 * A batch of the cursor's rows. pg-cursor settles nothing when the connection dies while it
 * closes the portal (it is `done` by then): the client's own end or error settles it instead, so
 * the session is always given back.
 */
function settled<T>(
  client: pg.ClientBase,
  work: (done: (error: Error | undefined, value?: T) => void) => void,
) {
  return new Promise<T>((resolve, reject) => {
    const lost = (error?: Error) => finish(error ?? new Error('Connection terminated'));
    const finish = (error: Error | undefined, value?: T) => {
      client.removeListener('error', lost);
      client.removeListener('end', lost);
      if (error) reject(error);
      else resolve(value as T);
    };
    client.once('error', lost);
    client.once('end', lost);
    work(finish);
  });
}

const readFrom = (client: pg.ClientBase, cursor: Cursor, count: number) =>
  settled<Read>(client, (done) => cursor.read(count, (error, rows, result) => done(error, { rows, result })));

const closing = (client: pg.ClientBase, cursor: Cursor) =>
  settled<void>(client, (done) => cursor.close((error) => done(error ?? undefined)));

/** The rows a statement shows, and whether it had more. */
export class Shown {
  readonly rows: unknown[] = [];
  truncated = false;
  /** Rows read, shown or not. */
  read = 0;
  /** The shown rows' JSON, bounded from above: what sizes the next batch. */
  bytes = 0;
  /** A value JSON cannot render, met while pg read the socket: thrown once the statement ends. */
  failure: Error | undefined;

  constructor(private readonly budget: DisplayBudget) {}

  /** Called inside pg's reading of the socket: it must not throw there (the process would end). */
  add(row: unknown): void {
    this.read++;
    if (this.truncated || this.failure) return;
    try {
      if (this.rows.length < this.budget.rowsPerStatement && this.budget.take(row)) {
        this.rows.push(row);
        this.bytes += jsonBytesAtMost(row);
      } else this.truncated = true;
    } catch (error) {
      if (!(error instanceof RangeError)) throw error;
      this.failure = new ResultTooDeep(error);
    }
  }
}

/**
 * A query's rows from a portal of its own, a batch at a time, until the rows shown are full: the
 * rest is never read.
 */
async function readQuery(client: pg.ClientBase, text: string, shown: Shown, budget: DisplayBudget) {
  const cursor = client.query(new Cursor(text, undefined, { types: jsonRowTypes }));
  for (;;) {
    const count = budget.batch(shown.rows.length, shown.bytes);
    const read = await readFrom(client, cursor, count);
    for (const row of read.rows) shown.add(row);
    // Fewer rows than asked for: the statement ended.
    if (read.rows.length < count) return { ...read.result, rowCount: shown.read } as pg.QueryResult;
    if (shown.truncated || shown.failure) {
      await closing(client, cursor);
      return { ...read.result, command: 'SELECT', rowCount: null } as pg.QueryResult;
    }
  }
}

/**
 * Any other statement, alone (extended protocol), to its end: its rows past those shown are read
 * and let go (a RETURNING past the wire limit is refused, 413, as without maxRows: its count
 * could not be told otherwise), its command tag and count kept. COPY TO STDOUT shows nothing
 * (its rows are not rows); COPY FROM STDIN is refused (lib/db/caller-query).
 */
function runToEnd(client: pg.ClientBase, text: string, shown: Shown): Promise<pg.QueryResult> {
  const query = new CallerQuery({ text, queryMode: 'extended', types: jsonRowTypes } as pg.QueryConfig);
  query.on('row', (row: unknown) => shown.add(row));
  return new Promise((resolve, reject) => {
    query.on('error', reject);
    query.on('end', resolve);
    client.query(query);
  });
}

/**
 * Runs one statement of a script, showing its rows while the budget lasts. An error's position is
 * moved to count from the script's start.
 */
export async function runStatement(
  client: pg.ClientBase,
  statement: ScriptStatement,
  budget: DisplayBudget,
): Promise<StatementResult> {
  const started = performance.now();
  const shown = new Shown(budget);
  let result: pg.QueryResult;
  try {
    result = statement.query
      ? await readQuery(client, statement.text, shown, budget)
      : await runToEnd(client, statement.text, shown);
  } catch (error) {
    throw positioned(error, statement.start);
  }
  // An error after the rows (a cancel as the portal closed) leaves the transaction failed, and
  // pg-cursor lets it go: the script must not go on as if the statement had succeeded.
  if ((client as pg.PoolClient).getTransactionStatus?.() === 'E') {
    throw new BadRequest(
      'Query failed',
      `the statement at character ${statement.start + 1} failed as its rows were closed (most often a cancel that arrived as it ended): the script's transaction was rolled back and nothing of it was kept; run it again`,
    );
  }
  return resultOf(result, shown, Math.round(performance.now() - started));
}

/** A statement's answer from pg's result and the rows it shows. */
export function resultOf(result: pg.QueryResult, shown: Shown, duration: number | null): StatementResult {
  if (shown.failure) throw shown.failure;
  return {
    command: result.command ?? null,
    rowCount: result.rowCount ?? null,
    rows: shown.rows,
    fields: (result.fields ?? []).map((f) => ({ name: f.name, dataTypeID: f.dataTypeID })),
    truncated: shown.truncated,
    duration,
  };
}

/**
 * PostgreSQL's error position in the statement, counted from the script's start instead; none
 * when it falls before the caller's SQL (in our EXPLAIN in front of it).
 */
export function positioned(error: unknown, start: number): unknown {
  if (start === 0 || !isPgError(error) || !error.position) return error;
  const position = Number(error.position) + start;
  error.position = position > 0 ? String(position) : undefined;
  return error;
}

/** The statements EXPLAIN takes, by parse node. */
const EXPLAINABLE = new Set([
  'SelectStmt',
  'InsertStmt',
  'UpdateStmt',
  'DeleteStmt',
  'MergeStmt',
  'ExecuteStmt',
  'CreateTableAsStmt',
  'DeclareCursorStmt',
]);

export type ExplainMode = 'plan' | 'analyze';

/**
 * The one statement of `sql` under EXPLAIN in JSON (with ANALYZE, it runs, with buffers and
 * timing: the caller rolls its transaction back, always), or a 400 saying why not.
 */
export async function explained(sql: string, mode: ExplainMode): Promise<ScriptStatement> {
  const statements = await splitScript(sql);
  const prefix = `EXPLAIN (FORMAT JSON${mode === 'analyze' ? ', ANALYZE, BUFFERS' : ''}) `;
  // Unread by the parser: the server says where the syntax error is (and refuses a second statement).
  if (!statements) return { text: prefix + sql, start: -prefix.length, end: [...sql].length, query: false };
  const [statement] = statements;
  if (statements.length !== 1 || !statement) {
    throw new BadRequest(
      'One statement to explain',
      `EXPLAIN shows one statement's plan; this SQL has ${statements.length}: select the one to explain`,
    );
  }
  if (!EXPLAINABLE.has(statement.kind ?? '')) {
    throw new BadRequest(
      'Nothing to explain',
      'EXPLAIN shows the plan of a SELECT, INSERT, UPDATE, DELETE, MERGE, EXECUTE, CREATE TABLE AS or DECLARE; run this statement instead',
    );
  }
  return {
    ...statement,
    text: prefix + statement.text,
    start: statement.start - prefix.length,
    query: false,
  };
}
