import type pg from 'pg';
import type { SchemaAccess } from '#lib/db/executor';
import { fromDatabaseError, isPgError } from '#lib/db/pg-errors';
import { discardAfterUse, RUNNING_STATEMENT } from '#lib/db/pool';
import { isPooled } from '#lib/db/pooler';
import { inTransaction } from '#lib/db/transaction';
import { ApiError } from '#lib/errors';

/**
 * A schema change as it will run, and how it runs: the exact statements, the lock each takes on
 * each table (PostgreSQL's levels, per ALTER TABLE subcommand as the documentation lists them),
 * whether it rewrites or scans the table. `dryRun` answers all of that with the table's size and
 * the sessions holding a conflicting lock, and changes nothing. A real run waits at most the lock
 * timeout for its locks, then answers 409 naming who holds them, instead of queuing: a queued
 * ACCESS EXCLUSIVE request stalls every reader of the table behind it.
 */

/** PostgreSQL's table lock levels (documentation, "Table-Level Locks"), weakest first. */
export const LOCK_LEVELS = [
  'ACCESS SHARE',
  'ROW SHARE',
  'ROW EXCLUSIVE',
  'SHARE UPDATE EXCLUSIVE',
  'SHARE',
  'SHARE ROW EXCLUSIVE',
  'EXCLUSIVE',
  'ACCESS EXCLUSIVE',
] as const;
export type LockLevel = (typeof LOCK_LEVELS)[number];

/** The documentation's conflict table: which held levels each level waits for. */
const CONFLICTS: Record<LockLevel, readonly LockLevel[]> = {
  'ACCESS SHARE': ['ACCESS EXCLUSIVE'],
  'ROW SHARE': ['EXCLUSIVE', 'ACCESS EXCLUSIVE'],
  'ROW EXCLUSIVE': ['SHARE', 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE'],
  'SHARE UPDATE EXCLUSIVE': [
    'SHARE UPDATE EXCLUSIVE',
    'SHARE',
    'SHARE ROW EXCLUSIVE',
    'EXCLUSIVE',
    'ACCESS EXCLUSIVE',
  ],
  SHARE: ['ROW EXCLUSIVE', 'SHARE UPDATE EXCLUSIVE', 'SHARE ROW EXCLUSIVE', 'EXCLUSIVE', 'ACCESS EXCLUSIVE'],
  'SHARE ROW EXCLUSIVE': [
    'ROW EXCLUSIVE',
    'SHARE UPDATE EXCLUSIVE',
    'SHARE',
    'SHARE ROW EXCLUSIVE',
    'EXCLUSIVE',
    'ACCESS EXCLUSIVE',
  ],
  EXCLUSIVE: [
    'ROW SHARE',
    'ROW EXCLUSIVE',
    'SHARE UPDATE EXCLUSIVE',
    'SHARE',
    'SHARE ROW EXCLUSIVE',
    'EXCLUSIVE',
    'ACCESS EXCLUSIVE',
  ],
  'ACCESS EXCLUSIVE': LOCK_LEVELS,
};

/** What a level stops others doing while it is held, in plain words. */
export const LOCK_BLOCKS: Record<LockLevel, string> = {
  'ACCESS SHARE': 'nothing but changes that take ACCESS EXCLUSIVE',
  'ROW SHARE': 'EXCLUSIVE and ACCESS EXCLUSIVE locks',
  'ROW EXCLUSIVE': 'index builds and changes that lock out writes',
  'SHARE UPDATE EXCLUSIVE': 'other schema changes, VACUUM and index builds; reads and writes go on',
  SHARE: 'writes (INSERT, UPDATE, DELETE); reads go on',
  'SHARE ROW EXCLUSIVE': 'writes and other schema changes; reads go on',
  EXCLUSIVE: 'everything but plain reads',
  'ACCESS EXCLUSIVE': 'every read and write of the table',
};

/** pg_locks' names for the levels. */
const MODE_NAMES: Record<LockLevel, string> = Object.fromEntries(
  LOCK_LEVELS.map((level) => [
    level,
    `${level
      .toLowerCase()
      .split(' ')
      .map((word) => word[0]?.toUpperCase() + word.slice(1))
      .join('')}Lock`,
  ]),
) as Record<LockLevel, string>;

export interface TableLock {
  schema: string;
  table: string;
  level: LockLevel;
  /**
   * Beyond its own level's conflicts, it also waits out the holders of locks that conflict with
   * this level (a concurrent index build takes SHARE UPDATE EXCLUSIVE, then waits for writers).
   */
  waitsLike?: LockLevel;
}

export interface Change {
  /** What it does, in a sentence. */
  summary: string;
  /** The statements, run in order in one transaction. */
  statements: string[];
  locks: TableLock[];
  /** The table is written anew (every row copied). */
  rewrites: boolean;
  /** Every row is read (to check a constraint, or to build an index). */
  scans: boolean;
  /**
   * What goes with it, as PostgreSQL names it (`index shop.people_email_idx`): `cascade` marks
   * what only CASCADE drops (without it, the change fails naming them).
   */
  drops?: Dropped[];
  /** Turns a failure of the statements into a 400 that explains it (rows that fail, say). */
  explain?: (client: pg.ClientBase, error: unknown) => Promise<unknown>;
  /**
   * Run each statement on its own, outside a transaction (CREATE and DROP INDEX CONCURRENTLY
   * refuse to run in one); lock waits are bounded by the session's lock_timeout, reset after.
   */
  outsideTransaction?: boolean;
  /**
   * Outside a transaction a failure can leave something half-made (an INVALID index): clears it
   * after a failure, and says what it did in a sentence the error's message ends with.
   */
  undo?: (client: pg.ClientBase, error: unknown) => Promise<string | undefined>;
  /**
   * For a dry run, on the schema's session: whether the change needs a USING expression it was not
   * given (a type PostgreSQL does not convert by itself), so the preview says so rather than the run.
   */
  needsUsing?: (client: pg.ClientBase) => Promise<NeedsUsing | undefined>;
}

/** A type change that cannot run without USING: why, in a sentence, and an expression to offer. */
export interface NeedsUsing {
  message: string;
  using: string;
}

export interface Dropped {
  what: string;
  cascade: boolean;
}

export interface Blocker {
  pid: number;
  role: string;
  state: string | null;
  /** Seconds its transaction has been open. */
  transactionSeconds: number | null;
  lock: string;
  /** The start of its statement; only for the admin. */
  query?: string;
}

interface TableFacts {
  table: string;
  sizeBytes: number;
  estimatedRows: number;
}

/**
 * The tables' size and row estimate from the catalog (relpages and reltuples: reading them takes
 * no lock, where pg_relation_size would wait behind the very lock a dry run is asked about).
 */
async function tableFacts(catalog: pg.Pool, locks: TableLock[]): Promise<TableFacts[]> {
  const { rows } = await catalog.query<{ table: string; size_bytes: string; estimated_rows: string }>(
    `SELECT t.schema || '.' || t.name AS "table",
            coalesce(c.relpages::int8 * pg_catalog.current_setting('block_size')::int8, 0) AS size_bytes,
            greatest(coalesce(c.reltuples, 0), 0)::int8 AS estimated_rows
       FROM unnest($1::text[], $2::text[]) AS t(schema, name)
       LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = t.schema
       LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = t.name`,
    [locks.map((l) => l.schema), locks.map((l) => l.table)],
  );
  return rows.map((r) => ({
    table: r.table,
    sizeBytes: Number(r.size_bytes),
    estimatedRows: Number(r.estimated_rows),
  }));
}

/** The held levels a lock request waits for. */
const waitedFor = (lock: TableLock): LockLevel[] => [
  ...new Set([...CONFLICTS[lock.level], ...(lock.waitsLike ? CONFLICTS[lock.waitsLike] : [])]),
];

/** Sessions other than `except` holding a lock on one of the tables that the change's level waits for. */
export async function blockers(
  catalog: pg.Pool,
  locks: TableLock[],
  { showQueries, except }: { showQueries: boolean; except?: number },
): Promise<Blocker[]> {
  const found: Blocker[] = [];
  for (const lock of locks) {
    const { rows } = await catalog.query<{
      pid: number;
      role: string;
      state: string | null;
      seconds: number | null;
      mode: string;
      query: string | null;
    }>(
      `SELECT DISTINCT l.pid, a.usename::text AS role, a.state,
              floor(extract(epoch FROM pg_catalog.now() - a.xact_start))::int AS seconds,
              l.mode, pg_catalog.left(a.query, 200) AS query
         FROM pg_catalog.pg_locks l
         JOIN pg_catalog.pg_class c ON c.oid = l.relation
         JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
        WHERE n.nspname = $1 AND c.relname = $2 AND l.granted AND l.mode = ANY($3)
          AND l.pid <> pg_catalog.pg_backend_pid() AND l.pid IS DISTINCT FROM $4
        ORDER BY l.pid`,
      [lock.schema, lock.table, waitedFor(lock).map((level) => MODE_NAMES[level]), except ?? null],
    );
    for (const row of rows) {
      if (found.some((b) => b.pid === row.pid)) continue;
      found.push({
        pid: row.pid,
        role: row.role,
        state: row.state,
        transactionSeconds: row.seconds,
        lock: row.mode,
        ...(showQueries && row.query ? { query: row.query } : {}),
      });
    }
  }
  return found;
}

export interface ChangeOptions {
  dryRun: boolean;
  lockTimeoutMs: number;
  /** Blockers' statements are shown to the admin only. */
  showQueries: boolean;
}

/** What a change would do, without doing it. */
export async function previewChange(access: SchemaAccess, change: Change, options: ChangeOptions) {
  const { needsUsing } = change;
  const [tables, held, using] = await Promise.all([
    tableFacts(access.catalog, change.locks),
    blockers(access.catalog, change.locks, options),
    needsUsing ? access.run(needsUsing) : undefined,
  ]);
  return {
    dryRun: true as const,
    summary: change.summary,
    sql: change.statements,
    locks: change.locks.map((l) => ({
      table: `${l.schema}.${l.table}`,
      level: l.level,
      blocks: LOCK_BLOCKS[l.level],
    })),
    rewrites: change.rewrites,
    scans: change.scans,
    ...(change.drops ? { drops: change.drops } : {}),
    ...(using ? { needsUsing: using } : {}),
    tables,
    blockers: held,
  };
}

/**
 * Runs the change as the schema's role, its lock waits bounded by the lock timeout: past it, 409
 * naming the sessions that hold the table. In one transaction, a failure leaves nothing changed;
 * outside one (Change.outsideTransaction), `undo` clears what a failure left. `explain` may turn
 * a failure into a clearer 400.
 */
export async function runChange(access: SchemaAccess, change: Change, options: ChangeOptions) {
  if (options.dryRun) return previewChange(access, change, options);
  await access.run((client) =>
    change.outsideTransaction
      ? runOutsideTransaction(access, client, change, options)
      : runInTransaction(access, client, change, options),
  );
  return { success: true, message: change.summary, sql: change.statements };
}

/** Each statement alone in the extended protocol, so `;` in a caller's SQL cannot add a statement. */
const runStatement = (client: pg.ClientBase, statement: string) =>
  client.query({ text: statement, queryMode: 'extended' } as pg.QueryConfig);

async function runInTransaction(
  access: SchemaAccess,
  client: pg.ClientBase,
  change: Change,
  options: ChangeOptions,
) {
  try {
    await inTransaction(
      client,
      async () => {
        for (const statement of change.statements) await runStatement(client, statement);
      },
      { lockTimeout: `${Math.trunc(options.lockTimeoutMs)}ms`, audit: access.audit },
    );
  } catch (error) {
    throw await failure(access, client, change, options, error);
  }
}

async function runOutsideTransaction(
  access: SchemaAccess,
  client: pg.ClientBase,
  change: Change,
  options: ChangeOptions,
) {
  const waits = await boundLockWaits(access.catalog, client, options.lockTimeoutMs);
  try {
    for (const statement of change.statements) await runStatement(client, statement);
  } catch (caught) {
    const error = waits.outwaited(caught);
    const undone = change.undo ? await change.undo(client, error).catch(() => undefined) : undefined;
    const failed = await failure(access, client, change, options, error);
    throw undone ? withNote(failed, undone) : failed;
  } finally {
    await waits.end();
  }
}

/**
 * A lock timeout for statements outside a transaction. On a session of our own, `SET lock_timeout`
 * holds until reset. Through a transaction pooler it would not reach the next statement (which may
 * run on another server connection, reset in between): the service watches the statement instead
 * and, once it has waited longer than that for a lock, cancels it by the protocol (lib/db/pooler);
 * the cancel then counts as the lock timeout's 55P03.
 */
async function boundLockWaits(catalog: pg.Pool, client: pg.ClientBase, timeoutMs: number) {
  if (!isPooled(client)) {
    await client.query(`SET lock_timeout = ${Math.trunc(timeoutMs)}`);
    return {
      outwaited: (error: unknown) => error,
      end: () => client.query('RESET lock_timeout').then(noop, noop),
    };
  }
  let outwaited = false;
  let stopped = false;
  let watching: Promise<void> | undefined;
  const watch = async () => {
    const { rowCount } = await catalog.query(
      `SELECT 1 FROM pg_catalog.pg_stat_activity a JOIN pg_catalog.pg_locks l ON l.pid = a.pid AND NOT l.granted
        WHERE ${RUNNING_STATEMENT}
          AND l.waitstart < pg_catalog.now() - pg_catalog.make_interval(secs => $3::float8 / 1000)`,
      [client.user, client.lastStatement ?? '', timeoutMs],
    );
    // Each statement in turn (a failed build's clean-up too): the cancel reaches the one running.
    // Never once the work is over: the connection may serve another request by then.
    if (rowCount && !stopped) {
      outwaited = true;
      discardAfterUse(client);
      client.cancelOnWire();
    }
  };
  const timer = setInterval(
    () => {
      watching ??= watch()
        .catch(noop)
        .finally(() => {
          watching = undefined;
        });
    },
    Math.max(timeoutMs / 4, 25),
  );
  timer.unref();
  return {
    /** The error as the lock timeout would have raised it, when the watch cancelled its statement. */
    outwaited: (error: unknown) => {
      const cancelled = outwaited && isPgError(error) && error.code === '57014';
      outwaited = false;
      return cancelled ? Object.assign(error, { code: '55P03' }) : error;
    },
    end: async () => {
      stopped = true;
      clearInterval(timer);
      await watching;
    },
  };
}

const noop = () => undefined;

async function failure(
  access: SchemaAccess,
  client: pg.ClientBase,
  change: Change,
  options: ChangeOptions,
  error: unknown,
): Promise<unknown> {
  if (isPgError(error) && error.code === '55P03') return lockedOut(access, change, options, error);
  return change.explain ? change.explain(client, error) : error;
}

/** The error with a sentence added to its message (what undo did). */
function withNote(error: unknown, note: string): unknown {
  const mapped = error instanceof ApiError ? error : fromDatabaseError(error);
  if (!mapped) return error;
  return new ApiError(mapped.status, mapped.title, `${mapped.message}; ${note}`, {
    cause: mapped.cause ?? error,
    headers: mapped.headers,
    details: mapped.details,
  });
}

async function lockedOut(access: SchemaAccess, change: Change, options: ChangeOptions, cause: unknown) {
  const onTable = await blockers(access.catalog, change.locks, options);
  // A concurrent build also waits for every older transaction of the database, on any table.
  const older =
    onTable.length === 0 && change.outsideTransaction ? await olderTransactions(access.catalog, options) : [];
  const held = [...onTable, ...older];
  const names = change.locks.map((l) => `"${l.table}"`).join(', ');
  const who = held.length
    ? `${older.length ? 'transactions older than the build, which it waits for: ' : ''}${held
        .map(
          (b) =>
            `session ${b.pid} (${b.role}, ${b.state ?? 'unknown state'}${b.transactionSeconds !== null ? `, in a transaction for ${b.transactionSeconds} s` : ''})`,
        )
        .join('; ')}`
    : 'a session that has since let go; try again';
  return new ApiError(
    409,
    'Table locked',
    `the change waited ${options.lockTimeoutMs} ms for its lock on ${names} and gave up rather than stall its readers: held by ${who}`,
    { cause, details: { blockers: held } },
  );
}

/**
 * Open transactions of this database that a concurrent index build waits for (it waits out every
 * snapshot older than its own). A key is shown their pids and ages, not whose they are.
 */
async function olderTransactions(
  catalog: pg.Pool,
  { showQueries }: { showQueries: boolean },
): Promise<Blocker[]> {
  const { rows } = await catalog.query<{
    pid: number;
    role: string;
    state: string | null;
    seconds: number | null;
  }>(
    `SELECT a.pid, a.usename::text AS role, a.state,
            floor(extract(epoch FROM pg_catalog.now() - a.xact_start))::int AS seconds
       FROM pg_catalog.pg_stat_activity a
      WHERE a.datname = pg_catalog.current_database() AND a.pid <> pg_catalog.pg_backend_pid()
        AND a.backend_xmin IS NOT NULL AND a.xact_start IS NOT NULL
      ORDER BY a.xact_start LIMIT 10`,
  );
  return rows.map((row) => ({
    pid: row.pid,
    role: showQueries ? row.role : 'another session',
    state: row.state,
    transactionSeconds: row.seconds,
    lock: 'snapshot',
  }));
}
