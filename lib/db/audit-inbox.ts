import { timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { type AuditEntry, sealOf } from '#lib/db/audit-log';
import { inTransaction } from '#lib/db/transaction';

/**
 * Moving entries from `_dbadmin_audit.inbox` into `_dbadmin.audit_log`, as the service, a batch
 * at a time. A change writes its entry into the inbox in its own transaction (lib/db/audit-log):
 * one plain row, so the write a request pays for is the cheapest PostgreSQL has, and the log's
 * indexes are kept up by one statement per batch here. Anyone may add a row to the inbox, so each
 * is checked before it becomes an entry:
 *
 * - its seal, against the key only the service reads;
 * - the transaction its entry was sealed for, against the one that wrote the row (the inbox's own
 *   column default, which no writer can set): a copy written anywhere else is refused;
 * - its id: a copy written again in its own transaction is the same entry, kept once.
 *
 * A refused row is deleted and counted; it never becomes an entry. Taking rows, moving them and
 * deleting them is one transaction: should the log refuse them, they wait in the inbox for the
 * next drain. Rows another container is draining are skipped, not waited for.
 */

/** Rows taken at a time, and their entries' bytes at most (one row more when the first is bigger). */
const BATCH_ROWS = 1000;
const BATCH_BYTES = 4 * 1024 * 1024;

/**
 * How long a batch's transaction may sit idle: a Lambda container frozen mid-drain (it does no
 * work between invocations) has its session ended by PostgreSQL, and the rows go back.
 */
const IDLE_LIMIT = `SET LOCAL idle_in_transaction_session_timeout = '10s'`;

/**
 * A batch taken out of the inbox, in the order rows lie in it, up to BATCH_ROWS and BATCH_BYTES
 * (entries' sizes read from their headers, never decompressed). Rows another drain holds are
 * skipped by a background drain and waited for by a read's (`LOCK`), so that a read of the log
 * never answers without entries committed before it. Times go as UTC text the next statement
 * reads back exactly, whatever this session's DateStyle and TimeZone.
 */
const take = (lock: 'FOR UPDATE' | 'FOR UPDATE SKIP LOCKED') => `
  WITH rows AS (
    SELECT ctid, pg_catalog.octet_length(entry) AS size
      FROM _dbadmin_audit.inbox LIMIT $1 ${lock}
  ), sized AS (
    SELECT ctid, pg_catalog.sum(size) OVER (ROWS UNBOUNDED PRECEDING) - size AS bytes_before FROM rows
  )
  DELETE FROM _dbadmin_audit.inbox
   WHERE ctid = ANY (ARRAY(SELECT ctid FROM sized WHERE bytes_before < $2))
  RETURNING entry, seal, writer::pg_catalog.text AS writer, xact::pg_catalog.text AS xact,
            pg_catalog.to_char(pg_catalog.timezone('UTC', at), 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at`;

/**
 * Entries into the log, in time order (which gives their `seq`). A copy of an entry already in the
 * log (written again in its own transaction, then drained in another batch) keeps the earlier time.
 */
const MOVE = `
  INSERT INTO _dbadmin.audit_log AS log (id, at, request_id, actor, key_id, key_name, key_type,
                                         person_id, person_login, via, schema_name, action, target,
                                         status, row_count, sql_kind, sql_fingerprint, sql_text, xact_id)
  SELECT e."id", e."at", e."requestId", e."actor", e."keyId", e."keyName", e."keyType",
         e."personId", e."personLogin", e."via", e."schema", e."action", e."target", e."status",
         e."rows", e."sqlKind", e."sqlFingerprint", e."sqlText", e."xid"::pg_catalog.int8
    FROM pg_catalog.jsonb_to_recordset($1::pg_catalog.jsonb) AS e(
           "id" pg_catalog.uuid, "at" pg_catalog.timestamptz, "requestId" pg_catalog.text,
           "actor" pg_catalog.text, "keyId" pg_catalog.int4, "keyName" pg_catalog.text,
           "keyType" pg_catalog.text, "personId" pg_catalog.int4, "personLogin" pg_catalog.text,
           "via" pg_catalog.text, "schema" pg_catalog.text, "action" pg_catalog.text,
           "target" pg_catalog.text, "status" pg_catalog.int2, "rows" pg_catalog.int8,
           "sqlKind" pg_catalog.text, "sqlFingerprint" pg_catalog.text, "sqlText" pg_catalog.text,
           "xid" pg_catalog.text)
   ORDER BY e."at", e."id"
  ON CONFLICT (id) DO UPDATE SET at = EXCLUDED.at WHERE EXCLUDED.at < log.at`;

interface InboxRow {
  entry: string;
  seal: string;
  writer: string;
  xact: string;
  at: string;
}

type Entry = AuditEntry & { at: string };

const SEAL = /^[0-9a-f]{64}$/;

/** The row's entry, if the service sealed it for the transaction that wrote the row. */
function entryOf(row: InboxRow, key: Buffer): Entry | undefined {
  if (!SEAL.test(row.seal)) return undefined;
  const bytes = Buffer.from(row.entry, 'base64');
  if (!timingSafeEqual(sealOf(key, bytes), Buffer.from(row.seal, 'hex'))) return undefined;
  const entry = JSON.parse(bytes.toString('utf8')) as AuditEntry;
  return entry.xid === row.xact ? { ...entry, at: row.at } : undefined;
}

/** One entry per id (copies written in its own transaction), the earliest. */
function earliest(entries: Entry[]): Entry[] {
  const byId = new Map<string, Entry>();
  for (const entry of entries) {
    const known = byId.get(entry.id);
    if (!known || entry.at < known.at) byId.set(entry.id, entry);
  }
  return [...byId.values()];
}

export interface Drained {
  /** Entries moved into the log (a copy of one already there not counted). */
  moved: number;
  /** Rows refused: not sealed by the service, or sealed for another transaction. */
  refused: number;
  /** The roles that wrote the refused rows (their sessions' login). */
  refusedFrom: Set<string>;
  /** Whether the inbox may hold more than was drained (the batches ran out first). */
  more: boolean;
}

export interface DrainOptions {
  /** Batches at most: a tenant may fill the inbox with rows of its own, refused at this pace. */
  batches: number;
  /** Wait for rows another drain holds (a read of the log), rather than skip them. */
  wait?: boolean;
}

/** One batch, in one transaction; what it moved and refused counts once it has committed. */
async function drainBatch(client: pg.ClientBase, key: Buffer, wait: boolean) {
  return inTransaction(
    client,
    async () => {
      await client.query(IDLE_LIMIT);
      const { rows } = await client.query<InboxRow>(take(wait ? 'FOR UPDATE' : 'FOR UPDATE SKIP LOCKED'), [
        BATCH_ROWS,
        BATCH_BYTES,
      ]);
      const refused: string[] = [];
      const entries: Entry[] = [];
      for (const row of rows) {
        const entry = entryOf(row, key);
        if (entry) entries.push(entry);
        else refused.push(row.writer);
      }
      const moved =
        entries.length > 0
          ? ((await client.query(MOVE, [JSON.stringify(earliest(entries))])).rowCount ?? 0)
          : 0;
      // Cut short by its rows or its bytes: the inbox may hold more.
      const full =
        rows.length === BATCH_ROWS || rows.reduce((bytes, row) => bytes + row.entry.length, 0) >= BATCH_BYTES;
      return { moved, refused, full };
    },
    // A read waits this long at most for another drain's batch, then answers 503.
    wait ? { lockTimeout: '5s' } : {},
  );
}

/** Moves what the inbox holds into the log, `batches` batches at most. */
export async function drainInbox(
  client: pg.ClientBase,
  key: Buffer,
  { batches, wait = false }: DrainOptions,
): Promise<Drained> {
  const drained: Drained = { moved: 0, refused: 0, refusedFrom: new Set(), more: true };
  for (let i = 0; drained.more && i < batches; i++) {
    const batch = await drainBatch(client, key, wait);
    drained.moved += batch.moved;
    drained.refused += batch.refused.length;
    for (const writer of batch.refused) drained.refusedFrom.add(writer);
    drained.more = batch.full;
  }
  return drained;
}

/**
 * Drains started in the background of requests: one at a time, at most once every `everyMs`,
 * never waited for by the request. `drain` handles its own failure (it is nobody's to await).
 */
export class BackgroundDrains {
  #running: Promise<void> | undefined;
  #last = Number.NEGATIVE_INFINITY;

  constructor(private readonly everyMs: number) {}

  start(drain: () => Promise<void>, now = performance.now()): void {
    if (this.#running || now - this.#last < this.everyMs) return;
    this.#last = now;
    this.#running = drain().finally(() => {
      this.#running = undefined;
    });
  }

  /** The drain in flight, if any, once it has ended. */
  async settled(): Promise<void> {
    await this.#running;
  }
}
