import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { type ImportCommit, type ImportOptions, type ImportOutcome, importRows } from '#lib/admin/import';
import { type AuditDraft, nothingChanged } from '#lib/db/audit-log';
import { tableInfo } from '#lib/db/catalog';
import { assertTenantSchema, type SchemaAccess } from '#lib/db/executor';
import { INTERNAL_SCHEMA } from '#lib/db/migrations';
import { withTransaction } from '#lib/db/pool';
import { ApiError, BadRequest, NotFound, PayloadTooLarge } from '#lib/errors';
import { ownerOf, type Principal } from '#lib/principal';

/**
 * An import too large for one request (Lambda takes 6 MB): opened, sent in numbered parts of at
 * most MAX_PART_BYTES, in any order and as often as needed (a part sent again replaces itself),
 * then committed, which streams the parts in order into one import (lib/admin/import), all or
 * nothing. The parts wait in dbadmin's own tables, out of every tenant's reach, which every
 * container and Lambda function shares. An import left alone past its expiry is deleted.
 *
 * A commit records the transaction that writes its rows before it reads or writes any, and that
 * transaction marks the import committed itself (migration 14's door), so the rows and the record
 * of them commit together. What became of a commit whose process died (killed, its answer lost)
 * is then PostgreSQL's to say, not a clock's: its transaction still runs (committing), committed
 * (committed, with its outcome), or ended without committing: nothing was written, and the import
 * is open again with its parts, to be committed again.
 */

/** The service's clock for expiry; tests move it (never a real wait). */
export const importClock = { now: (): number => Date.now() };

/** Under Lambda's 6 MB request, with room for the request's own envelope. */
export const MAX_PART_BYTES = 5 * 1024 * 1024;
export const MAX_PARTS = 10_000;
/** Imports open at once in one schema: each may stage up to IMPORT_MAX_BYTES. */
export const MAX_OPEN_PER_SCHEMA = 8;

const SESSIONS = `${INTERNAL_SCHEMA}.import_sessions`;
const PARTS = `${INTERNAL_SCHEMA}.import_parts`;

export interface SessionScope {
  schema: string;
  table: string;
  principal: Principal | undefined;
  /** The request's audit entry, committed with the change. */
  audit: AuditDraft | undefined;
}

interface SessionRow {
  id: string;
  options: ImportOptions;
  state: 'open' | 'committing' | 'committed';
  outcome: ImportOutcome | null;
  expires_at: Date;
  /** The transaction of the commit under way (xid8, as text: it is 64-bit). */
  commit_xid: string | null;
  /** The transaction of the last commit, found ended without committing (the import is open again). */
  interrupted_xid: string | null;
  /**
   * A commit begun by a version that recorded no transaction, longer ago than a commit may run:
   * it never reported back, and may have written its rows.
   */
  stale: boolean;
}

/** The settings an import lives by, from the service's (importLimits). */
export interface ImportLimits {
  /** An import this long without a part or a commit expires. */
  ttlSeconds: number;
  /** The most one import stages. */
  maxBytes: number;
  /**
   * How long a commit may run: the most its transaction sits idle between its statements, and how
   * long before a commit that recorded no transaction (an earlier version's) counts as never
   * reporting back.
   */
  commitLimitMs: number;
}

export const importLimits = (config: {
  IMPORT_SESSION_TTL_SECONDS: number;
  IMPORT_MAX_BYTES: number;
  QUERY_TIMEOUT_MS: number;
}): ImportLimits => ({
  ttlSeconds: config.IMPORT_SESSION_TTL_SECONDS,
  maxBytes: config.IMPORT_MAX_BYTES,
  commitLimitMs: config.QUERY_TIMEOUT_MS + 30_000,
});

const staleSince = (limits: ImportLimits) => new Date(importClock.now() - limits.commitLimitMs);

const now = () => new Date(importClock.now());
const expiry = (ttlSeconds: number) => new Date(importClock.now() + ttlSeconds * 1000);

/**
 * Deletes every import past its expiry (its parts go with it), but those another transaction holds
 * (a commit's, from its door call to its end, which code a tenant planted can make long): they
 * are skipped, not waited for, and go with a later sweep.
 */
export async function removeExpired(db: pg.Pool | pg.ClientBase): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM ${SESSIONS} WHERE id IN (
       SELECT id FROM ${SESSIONS} WHERE expires_at < $1 FOR UPDATE SKIP LOCKED)`,
    [now()],
  );
  return rowCount ?? 0;
}

const notFound = (id: string) =>
  new NotFound(
    'Import not found',
    `no import ${id} on this table: it was committed long ago, abandoned, expired, or never opened`,
  );

/**
 * What PostgreSQL says of the row's commit_xid: 'in progress', 'committed' or 'aborted'. One too
 * old for it to remember (NULL) ended long ago. pg_snapshot_xmax is one past the latest
 * transaction *completed* when the snapshot was taken, not past the latest begun: an id at or past
 * it may be running. A commit_xid read here is below it all the same, since the service's
 * statement that recorded it had a later id and had completed before the row could be read; one
 * at or past it therefore belongs to another history of the database (a restored copy), where
 * pg_xact_status would refuse it as in the future: it runs nowhere, and the row says whether it
 * committed.
 */
const COMMIT_STATUS = `CASE
    WHEN commit_xid >= pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()) THEN 'aborted'
    ELSE coalesce(pg_catalog.pg_xact_status(commit_xid), 'aborted')
  END`;

/**
 * The commit the row records, found no longer running, settled: open again, its transaction named
 * as interrupted, when it ended without committing (it wrote nothing: its rows and the import's
 * state commit together); committed when it did (which its own transaction said already, but for
 * a row changed since by hand). A transaction that commits meanwhile changes the row first, and
 * the row no longer matches.
 */
const SETTLE = `
  UPDATE ${SESSIONS}
     SET state = CASE WHEN ${COMMIT_STATUS} = 'committed' THEN 'committed' ELSE 'open' END,
         interrupted_xid = CASE WHEN ${COMMIT_STATUS} = 'committed' THEN NULL ELSE commit_xid END,
         commit_xid = NULL, committing_since = NULL
   WHERE id = $1 AND state = 'committing' AND commit_xid IS NOT NULL AND ${COMMIT_STATUS} <> 'in progress'`;

/** The import, when it is the caller's, on this table, and not expired; else 404. */
async function read(
  db: pg.Pool | pg.ClientBase,
  id: string,
  scope: SessionScope,
  limits: ImportLimits,
  lock: boolean,
) {
  const { rows } = await db.query<SessionRow>(
    `SELECT id, options, state, outcome, expires_at, commit_xid::pg_catalog.text,
            interrupted_xid::pg_catalog.text, commit_xid IS NULL AND committing_since < $6 AS stale
       FROM ${SESSIONS}
      WHERE id = $1 AND schema_name = $2 AND table_name = $3 AND owner = $4 AND expires_at >= $5
      ${lock ? 'FOR UPDATE' : ''}`,
    [id, scope.schema, scope.table, ownerOf(scope.principal), now(), staleSince(limits)],
  );
  const found = rows[0];
  if (!found) throw notFound(id);
  return found;
}

/** The import as read, once a commit that is no longer running has been settled. */
async function session(
  db: pg.Pool | pg.ClientBase,
  id: string,
  scope: SessionScope,
  limits: ImportLimits,
  lock = false,
) {
  const found = await read(db, id, scope, limits, lock);
  if (found.state !== 'committing' || found.commit_xid === null) return found;
  const { rowCount } = await db.query(SETTLE, [id]);
  return rowCount === 1 ? read(db, id, scope, limits, lock) : found;
}

export async function openImport(
  db: pg.Pool,
  scope: SessionScope,
  options: ImportOptions,
  limits: ImportLimits,
) {
  assertTenantSchema(scope.schema);
  await tableInfo(db, scope.schema, scope.table);
  const id = randomUUID();
  const expiresAt = expiry(limits.ttlSeconds);
  await withTransaction(
    db,
    async (client) => {
      // Opens one at a time, so the count below cannot be raced past (nor the sweep run twice). A
      // table lock rather than an advisory one, which any login could take and hold; one that
      // conflicts only with itself among what a write takes, not with the ROW EXCLUSIVE any login
      // holds on the table by calling migration 14's door in a transaction it keeps open.
      await client.query(`LOCK TABLE ${SESSIONS} IN SHARE UPDATE EXCLUSIVE MODE`);
      await removeExpired(client);
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${SESSIONS}
        WHERE schema_name = $1
          AND (state = 'open' OR (state = 'committing' AND (commit_xid IS NOT NULL OR committing_since >= $2)))`,
        [scope.schema, staleSince(limits)],
      );
      if ((rows[0]?.n ?? 0) >= MAX_OPEN_PER_SCHEMA) {
        throw new ApiError(
          409,
          'Too many imports',
          `schema "${scope.schema}" has ${MAX_OPEN_PER_SCHEMA} imports open: commit or abandon one (DELETE .../imports/:id) first`,
        );
      }
      await client.query(
        `INSERT INTO ${SESSIONS} (id, schema_name, table_name, owner, options, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [id, scope.schema, scope.table, ownerOf(scope.principal), JSON.stringify(options), expiresAt],
      );
    },
    { audit: scope.audit },
  );
  return {
    id,
    table: scope.table,
    format: options.format,
    mode: options.mode,
    maxPartBytes: MAX_PART_BYTES,
    expiresAt: expiresAt.toISOString(),
  };
}

function assertOpen(found: SessionRow) {
  if (found.state === 'open') return;
  if (found.state === 'committed') {
    throw new ApiError(
      409,
      'Import committed',
      `import ${found.id} was committed; open a new one to import more`,
    );
  }
  if (found.stale) {
    throw new ApiError(
      409,
      'Import interrupted',
      `import ${found.id}'s commit was begun by an earlier version, which recorded no transaction, and never reported back: it may have written its rows: look at the table, then abandon this import (DELETE) and open a new one if they are not there`,
    );
  }
  throw new ApiError(
    409,
    'Import committing',
    `import ${found.id} is being committed; its parts can no longer change`,
  );
}

export async function putPart(
  db: pg.Pool,
  id: string,
  scope: SessionScope,
  part: number,
  bytes: Buffer,
  limits: ImportLimits,
) {
  if (part > MAX_PARTS) throw new BadRequest('Too many parts', `parts are numbered 1 to ${MAX_PARTS}`);
  return withTransaction(
    db,
    async (client) => {
      assertOpen(await session(client, id, scope, limits, true));
      // What the schema's imports stage besides this part: IMPORT_MAX_BYTES holds for all of them
      // together, so eight imports open do not stage eight times as much in the service's database.
      const { rows } = await client.query<{ others: string; mine: string; n: number }>(
        `SELECT coalesce(sum(pg_catalog.length(p.bytes)), 0) AS others,
              coalesce(sum(pg_catalog.length(p.bytes)) FILTER (WHERE p.session_id = $1), 0) AS mine,
              (pg_catalog.count(*) FILTER (WHERE p.session_id = $1))::int AS n
         FROM ${PARTS} p JOIN ${SESSIONS} s ON s.id = p.session_id
        WHERE s.schema_name = $3 AND NOT (p.session_id = $1 AND p.part = $2)`,
        [id, part, scope.schema],
      );
      const others = Number(rows[0]?.others ?? 0);
      if (others + bytes.length > limits.maxBytes) {
        throw new PayloadTooLarge(
          limits.maxBytes,
          ` in all the parts schema "${scope.schema}"'s imports stage at once (IMPORT_MAX_BYTES); this part would make ${others + bytes.length}: commit or abandon an import first`,
        );
      }
      await client.query(
        `INSERT INTO ${PARTS} (session_id, part, bytes) VALUES ($1, $2, $3)
       ON CONFLICT (session_id, part) DO UPDATE SET bytes = EXCLUDED.bytes`,
        [id, part, bytes],
      );
      await client.query(`UPDATE ${SESSIONS} SET expires_at = $2 WHERE id = $1`, [
        id,
        expiry(limits.ttlSeconds),
      ]);
      const totalBytes = Number(rows[0]?.mine ?? 0) + bytes.length;
      return { part, bytes: bytes.length, parts: (rows[0]?.n ?? 0) + 1, totalBytes };
    },
    { audit: scope.audit },
  );
}

/** Why an import is open again: its last commit's transaction ended without committing. */
const interrupted = (xid: string) =>
  `the last commit was interrupted (its transaction ${xid} ended without committing): nothing was written, the parts are kept: commit again`;

export async function importStatus(db: pg.Pool, id: string, scope: SessionScope, limits: ImportLimits) {
  const found = await session(db, id, scope, limits);
  const { rows } = await db.query<{ part: number; bytes: number }>(
    `SELECT part, pg_catalog.length(bytes) AS bytes FROM ${PARTS} WHERE session_id = $1 ORDER BY part`,
    [id],
  );
  return {
    id,
    table: scope.table,
    state: found.state,
    format: found.options.format,
    mode: found.options.mode,
    parts: rows,
    totalBytes: rows.reduce((sum, r) => sum + r.bytes, 0),
    expiresAt: found.expires_at.toISOString(),
    ...(found.outcome ? { outcome: found.outcome } : {}),
    ...(found.interrupted_xid ? { message: interrupted(found.interrupted_xid) } : {}),
  };
}

export async function abandonImport(db: pg.Pool, id: string, scope: SessionScope, limits: ImportLimits) {
  const found = await session(db, id, scope, limits);
  // A commit whose transaction runs keeps its import; one begun by an earlier version (no
  // transaction recorded) may be abandoned once it never reported back.
  const { rowCount } = await db.query(
    `DELETE FROM ${SESSIONS} WHERE id = $1 AND (state <> 'committing'
       OR CASE WHEN commit_xid IS NULL THEN committing_since < $2 ELSE ${COMMIT_STATUS} <> 'in progress' END)`,
    [id, staleSince(limits)],
  );
  if (rowCount !== 1) assertOpen({ ...found, state: 'committing', stale: false });
  return { success: true, message: `import ${id} abandoned; its parts are deleted` };
}

/** Parts 1..count, each there once; 400 naming the first missing or the first beyond `count`. */
async function checkParts(db: pg.Pool, id: string, count: number) {
  const { rows } = await db.query<{ part: number }>(
    `SELECT part FROM ${PARTS} WHERE session_id = $1 ORDER BY part`,
    [id],
  );
  const beyond = rows.find((r) => r.part > count);
  if (beyond) {
    throw new BadRequest(
      'Parts beyond',
      `part ${beyond.part} was sent, but the commit says ${count} parts: send parts ${count + 1}… or commit with their number`,
    );
  }
  const have = new Set(rows.map((r) => r.part));
  for (let part = 1; part <= count; part++) {
    if (!have.has(part))
      throw new BadRequest(
        'Part missing',
        `part ${part} of ${count} was never received: send it, then commit again`,
      );
  }
}

/** The parts' bytes in order, one part in memory at a time. */
async function* partsOf(db: pg.Pool, id: string, count: number): AsyncGenerator<Buffer> {
  for (let part = 1; part <= count; part++) {
    // As base64 text: the pools hand bytea over as PostgreSQL's text for it (for JSON answers),
    // and pg decodes a binary column as UTF-8 text, which would break a character cut between parts.
    const { rows } = await db.query<{ bytes: string }>(
      `SELECT pg_catalog.encode(bytes, 'base64') AS bytes FROM ${PARTS} WHERE session_id = $1 AND part = $2`,
      [id, part],
    );
    const bytes = rows[0]?.bytes;
    if (bytes === undefined) throw new BadRequest('Part missing', `part ${part} of ${count} is gone`);
    yield Buffer.from(bytes, 'base64');
  }
}

/**
 * The commit's side of the import's transaction (lib/admin/import): once it has begun, the import
 * is marked committing in it, by its id, and its parts checked; once the rows are written, the
 * transaction marks the import committed itself, through migration 14's door, which refuses any
 * transaction but the one recorded. Only then can it commit: a commit that is not there to mark
 * it (its process gone) writes nothing.
 */
function commitOf(
  db: pg.Pool,
  found: SessionRow,
  count: number,
  limits: ImportLimits,
  began: (xid: string) => void,
): ImportCommit {
  return {
    begun: async (client, xid) => {
      // A transaction left idle (its process frozen or gone between statements) ends, so it is
      // never said to be running for longer than a commit may run.
      await client.query(
        `SET LOCAL idle_in_transaction_session_timeout = ${Math.ceil(limits.commitLimitMs)}`,
      );
      const { rowCount } = await db.query(
        `UPDATE ${SESSIONS}
            SET state = 'committing', commit_xid = $2, committing_since = $3, expires_at = $4,
                interrupted_xid = NULL
          WHERE id = $1 AND state = 'open'`,
        [found.id, xid, now(), expiry(limits.ttlSeconds)],
      );
      if (rowCount !== 1) assertOpen({ ...found, state: 'committing', stale: false });
      began(xid);
      await checkParts(db, found.id, count);
    },
    written: async (client, outcome) => {
      const { rows } = await client.query<{ marked: boolean }>(
        'SELECT _dbadmin_audit.import_committed($1::pg_catalog.uuid, $2::pg_catalog.text) AS marked',
        [found.id, JSON.stringify(outcome)],
      );
      if (rows[0]?.marked !== true) {
        throw new ApiError(
          409,
          'Import not recorded',
          `import ${found.id} could not be marked committed by its own transaction (code the table runs marked it first, or the import was removed meanwhile); nothing was written: commit again`,
        );
      }
    },
  };
}

/**
 * Writes the import: its parts, in order, as one file. Committed once: a commit sent again (its
 * answer lost on the way) answers the same outcome. A failed commit leaves the import open, so a
 * part can be sent again and the commit retried.
 */
export async function commitImport(
  access: SchemaAccess,
  id: string,
  scope: SessionScope,
  count: number,
  limits: ImportLimits,
): Promise<ImportOutcome> {
  const db = access.catalog;
  const found = await session(db, id, scope, limits);
  if (found.state === 'committed' && found.outcome) {
    // Sent again: the same answer, and no second audit entry for the one import.
    nothingChanged(scope.audit);
    return found.outcome;
  }
  assertOpen(found);
  let xid: string | undefined;
  const began = (transaction: string) => {
    xid = transaction;
  };
  try {
    return await importRows(
      access,
      scope.table,
      found.options,
      partsOf(db, id, count),
      commitOf(db, found, count, limits, began),
    );
  } catch (error) {
    // Open again at once when its transaction has ended without committing; one still ending
    // (its session being terminated) is settled by the next read.
    if (xid !== undefined) {
      await db
        .query(
          `UPDATE ${SESSIONS} SET state = 'open', commit_xid = NULL, committing_since = NULL
            WHERE id = $1 AND state = 'committing' AND commit_xid = $2 AND ${COMMIT_STATUS} = 'aborted'`,
          [id, xid],
        )
        .catch(() => undefined);
    }
    throw error;
  }
}
