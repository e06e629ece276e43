import type pg from 'pg';
import { CallerQuery } from '#lib/db/caller-query';
import { jsonRowTypes } from '#lib/db/json-rows';
import { ApiError } from '#lib/errors';
import { JSON_BYTES_PER_UNIT_AT_MOST } from '#lib/json-text';

/** Ceilings on what one response may carry, whoever asks (QUERY_MAX_ROWS, QUERY_MAX_BYTES). */
export interface ResultLimits {
  maxRows: number;
  maxBytes: number;
}

/**
 * A value JSON cannot render: nested past the stack's depth. lib/db/json-rows makes none (a json
 * value is its text, an array at most 6 deep); kept so that one that did could not end the process.
 */
export class ResultTooDeep extends ApiError {
  constructor(cause: unknown) {
    super(
      413,
      'Result too deep',
      'a value in the result is nested too deeply to answer as JSON; select a shallower part of it (->, #>)',
      { cause },
    );
  }
}

export class ResultTooLarge extends ApiError {
  constructor(setting: 'QUERY_MAX_ROWS' | 'QUERY_MAX_BYTES', limit: number) {
    const what = setting === 'QUERY_MAX_ROWS' ? `${limit} rows` : `${limit} bytes of JSON`;
    super(
      413,
      'Result too large',
      `the result is over ${what} (${setting}); select fewer rows or columns, or page with LIMIT/OFFSET`,
    );
  }
}

/** The socket under a pg client: watched so one huge row is cut off while it arrives. */
type Socket = { bytesRead: number; destroy(): void };
const socketOf = (client: pg.ClientBase) =>
  (client as unknown as { connection?: { stream?: Socket } }).connection?.stream;

/**
 * Bytes on the wire a result may take before it is cut off: the JSON limit twice over (escaping,
 * per-row framing) plus 1 MiB. pg (and pg-copy-streams) parse a row only once all of it has
 * arrived, so a single 500 MB value would sit in memory before any per-row check could see it.
 */
export const wireLimit = (limits: ResultLimits) => 2 * limits.maxBytes + 1024 * 1024;

/** A copy that read past its bound (streamingCopy): the schema holds more than one copy may move. */
export class CopyTooLarge extends ApiError {
  constructor() {
    super(
      413,
      'Copy too large',
      'the schema holds more than one copy or backup may move (IMPORT_MAX_BYTES); copy or back it up with pg_dump',
    );
  }
}

/** Sessions streaming a copy onward: where on the wire it began, and what it may read from there. */
const copies = new WeakMap<pg.ClientBase, { from: number; bytes: number }>();

/**
 * From now on, until its work ends, the session streams a copy onward and never holds it (a
 * backup's parts, a clone's rows): it may read the copy's own bound (IMPORT_MAX_BYTES) twice over,
 * for COPY's framing per row, and 1 MiB, rather than a result's. Its catalog reads before stay
 * under a result's limit.
 */
export function streamingCopy(client: pg.ClientBase, maxBytes: number): void {
  const socket = socketOf(client);
  if (socket) copies.set(client, { from: socket.bytesRead, bytes: 2 * maxBytes + 1024 * 1024 });
}

/** How often the socket's byte count is looked at: at loopback speed, a few MB between looks. */
const WIRE_CHECK_MS = 5;

/**
 * Watches the bytes arriving on the client's socket while `work` runs; past `limit` it calls
 * `onExceeded` and destroys the socket (the connection is discarded), so nothing more is read.
 * Polled rather than listened to: pg-copy-streams takes the socket's only 'data' listener.
 */
export async function watchWire<T>(
  client: pg.ClientBase,
  limit: number,
  onExceeded: (copying: boolean) => void,
  work: () => Promise<T>,
): Promise<T> {
  const socket = socketOf(client);
  if (!socket) return work();
  const start = socket.bytesRead;
  const timer = setInterval(() => {
    const copy = copies.get(client);
    if (copy ? socket.bytesRead - copy.from <= copy.bytes : socket.bytesRead - start <= limit) return;
    clearInterval(timer);
    onExceeded(copy !== undefined);
    socket.destroy();
  }, WIRE_CHECK_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
    copies.delete(client);
  }
}

/** The UTF-8 bytes of a value's JSON, as the answer will carry it. */
const exactJsonBytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value) ?? '');

/** Past this nesting the bound measures exactly, so a value JSON cannot render fails as JSON does. */
const BOUND_DEPTH = 32;

/**
 * At least exactJsonBytes(value), without making the JSON: one pass over the values. A string's
 * UTF-16 unit takes at most JSON_BYTES_PER_UNIT_AT_MOST bytes, a number at most 24
 * characters, a Date's ISO form with its quotes at most 29; a value of another kind (a Buffer in a
 * bytea[], anything with its own toJSON), or nested past BOUND_DEPTH, is measured exactly.
 */
export function jsonBytesAtMost(value: unknown, depth = 0): number {
  switch (typeof value) {
    case 'string':
      return JSON_BYTES_PER_UNIT_AT_MOST * value.length + 2;
    case 'number':
      return 24;
    case 'boolean':
      return 5;
    case 'object':
      return value === null ? 4 : objectBytesAtMost(value, depth);
    case 'undefined':
    case 'function':
    case 'symbol':
      return 4; // null in an array, left out of an object
    default:
      return exactJsonBytes(value);
  }
}

function objectBytesAtMost(value: object, depth: number): number {
  if (value instanceof Date) return 32;
  if (depth >= BOUND_DEPTH) return exactJsonBytes(value);
  let bytes = 2;
  if (Array.isArray(value)) {
    for (const item of value) bytes += jsonBytesAtMost(item, depth + 1) + 1;
    return bytes;
  }
  if (Object.getPrototypeOf(value) !== Object.prototype) return exactJsonBytes(value);
  for (const [key, item] of Object.entries(value))
    bytes += JSON_BYTES_PER_UNIT_AT_MOST * key.length + 4 + jsonBytesAtMost(item, depth + 1);
  return bytes;
}

/**
 * A result's rows as JSON against QUERY_MAX_BYTES: bounded cheaply (jsonBytesAtMost) while the
 * bound stays under the limit, counted exactly from the row that takes it past, so the limit is
 * the JSON's exact size and an ordinary page never makes its rows' JSON twice.
 */
export class JsonSize {
  private bound = 0;
  private exact: number | undefined;

  constructor(private readonly max: number) {}

  /** The bytes counted so far: the bound, or from the row that took it past, exactly. */
  get used(): number {
    return this.exact ?? this.bound;
  }

  /** Adds a row to those `kept` before it; whether they are over the limit now. */
  over(row: unknown, kept: readonly unknown[]): boolean {
    if (this.exact === undefined) {
      this.bound += jsonBytesAtMost(row) + 1;
      if (this.bound <= this.max) return false;
      this.exact = kept.reduce<number>((bytes, earlier) => bytes + exactJsonBytes(earlier) + 1, 0);
    }
    this.exact += exactJsonBytes(row) + 1;
    return this.exact > this.max;
  }
}

/**
 * Runs a query collecting its rows under the limits, so a huge result never sits in memory:
 * past a limit the rows are dropped and `onExceeded` cancels the statement in PostgreSQL (a
 * single huge row is cut off earlier, by the session's wire limit: lib/db/executor). A script
 * (several statements) yields one result per statement; only the current statement's rows are
 * kept, the limits apply to each.
 */
export function boundedQuery(
  client: pg.ClientBase,
  config: pg.QueryConfig,
  limits: ResultLimits,
  onExceeded: () => void,
  /** Handed the first row of all, whichever statement sent it (a script's own prefix). */
  onFirstRow?: (row: unknown) => void,
): Promise<pg.QueryResult[]> {
  const query = new CallerQuery({ types: jsonRowTypes, ...config });
  if (onFirstRow) query.once('row', (row: unknown) => onFirstRow(row));
  const collected = new Map<unknown, unknown[]>();
  let current: unknown;
  let rows: unknown[] = [];
  let size = new JsonSize(limits.maxBytes);
  let exceeded: ApiError | undefined;
  const exceed = (error: ApiError) => {
    if (exceeded) return;
    exceeded = error;
    collected.clear();
    rows = [];
    onExceeded();
  };
  query.on('row', (row: unknown, result?: unknown) => {
    if (result !== current) {
      collected.delete(current); // an earlier statement's rows are never answered
      current = result;
      rows = [];
      size = new JsonSize(limits.maxBytes);
      collected.set(result, rows);
    }
    if (exceeded) return;
    if (rows.length >= limits.maxRows) return exceed(new ResultTooLarge('QUERY_MAX_ROWS', limits.maxRows));
    let over: boolean;
    try {
      over = size.over(row, rows);
    } catch (error) {
      // Thrown here, inside pg's reading of the socket, it would end the process.
      if (!(error instanceof RangeError)) throw error;
      return exceed(new ResultTooDeep(error));
    }
    if (over) exceed(new ResultTooLarge('QUERY_MAX_BYTES', limits.maxBytes));
    else rows.push(row);
  });
  return new Promise<pg.QueryResult[]>((resolve, reject) => {
    query.on('error', (error: Error) => reject(exceeded ?? error));
    query.on('end', (ended: pg.QueryResult | pg.QueryResult[]) => {
      if (exceeded) return reject(exceeded);
      const results = Array.isArray(ended) ? ended : [ended];
      for (const result of results) result.rows = (collected.get(result) ?? []) as pg.QueryResult['rows'];
      resolve(results);
    });
    client.query(query);
  });
}
