import type pg from 'pg';
import { sweepAuditLog } from '#lib/admin/audit';
import { type Config, getConfig } from '#lib/config';
import { BackgroundDrains, type Drained, type DrainOptions, drainInbox } from '#lib/db/audit-inbox';
import { type AuditDraft, AuditUnavailable, appendAfter, newEntryId, readSealKey } from '#lib/db/audit-log';
import { sweepKeys } from '#lib/db/idempotency';
import { getDatabase, withClient } from '#lib/db/pool';
import { ServiceUnavailable } from '#lib/errors';
import { countAuditDrainFailure, countAuditFailure, countAuditRefused } from '#lib/http/metrics';
import { field, type RequestInput, requestSchema } from '#lib/http/request-schema';
import type { AnyRoute } from '#lib/http/route';
import { loggedError, logger } from '#lib/log';

/**
 * Every request that may change something gets its audit entry: the route's lib work writes it
 * inside its own transaction where it has one (inTransaction's `audit`, lib/db/audit-log's
 * commitAudited); a change made without one (a concurrent index build, a license activation) gets
 * it written here once the route has answered. A request that fails, or only previews (`dryRun`),
 * has none; nor does an anon key's, which can change nothing. Entries written into the inbox are
 * moved into the log in the background of the requests that wrote them, and before the log is read.
 */

interface AuditInput extends RequestInput {
  requestId: string;
}

let sealKey: { db: pg.Pool; key: Promise<Buffer> } | undefined;

/** The seal's key, read once per container (and again if that read failed). */
function keyFor(db: pg.Pool): Promise<Buffer> {
  if (sealKey?.db !== db) {
    const key = readSealKey(db).catch((error: unknown) => {
      sealKey = undefined;
      throw error;
    });
    sealKey = { db, key };
  }
  return sealKey.key;
}

const previewOnly = ({ query, body }: AuditInput) =>
  field(query, 'dryRun') === true || field(body, 'dryRun') === true;

/** Whether the request gets an entry at all. */
function audits(route: AnyRoute, input: AuditInput, config: Config): boolean {
  if (config.AUDIT_LOG === 'off' || (route.method === 'GET' && !route.audit) || route.audit === false)
    return false;
  if (input.principal?.kind === 'key' && input.principal.keyType === 'anon') return false;
  return !previewOnly(input);
}

function draftEntry(route: AnyRoute, input: AuditInput, key: Buffer): AuditDraft {
  const { principal } = input;
  const audit = route.audit || undefined;
  const target = audit?.target?.({ params: input.params, query: input.query, body: input.body });
  return {
    key,
    settled: false,
    entry: {
      id: newEntryId(),
      requestId: input.requestId,
      actor: principal?.kind ?? 'public',
      ...(principal?.kind === 'key'
        ? { keyId: principal.id, keyName: principal.name, keyType: principal.keyType }
        : {}),
      ...(principal?.kind === 'person'
        ? { personId: principal.id, personLogin: principal.login, via: principal.via }
        : {}),
      schema: requestSchema(input),
      action: audit?.action ?? `${route.method} ${route.path}`,
      target,
      status: route.status ?? 200,
    },
  };
}

/** Runs the route's work with its entry, and writes the entry after it if no commit did. */
export async function audited<T>(
  route: AnyRoute,
  input: AuditInput,
  work: (audit: AuditDraft | undefined) => Promise<T>,
): Promise<T> {
  const config = await getConfig();
  // Expired Idempotency-Key records go with the writes that come, keyed or not, audited or not.
  if (route.method !== 'GET') void getDatabase().then(sweepKeys, () => 0);
  if (!audits(route, input, config)) return work(undefined);
  const db = await getDatabase();
  const draft = draftEntry(route, input, await keyFor(db));
  const result = await work(draft).catch((error: unknown) => {
    if (error instanceof AuditUnavailable) countAuditFailure();
    throw error;
  });
  const changed = route.audit ? (route.audit.changed?.(result) ?? true) : true;
  if (!draft.settled && changed) {
    // The change is made and answered for: a failure here is counted and logged, not the caller's.
    await appendAfter(db, draft).catch((error: unknown) => {
      countAuditFailure();
      logger.error('audit entry not written', { action: draft.entry.action, error: loggedError(error) });
    });
  }
  drainSoon(db);
  void sweepAuditLog(db, config.AUDIT_RETENTION_DAYS);
  return result;
}

/** Background drains: at most one a fifth of a second per process. */
const background = new BackgroundDrains(200);

/** Moves what the inbox holds into the log (lib/db/audit-inbox); a refused row is counted and named. */
async function drain(db: pg.Pool, options: DrainOptions): Promise<Drained> {
  const key = await keyFor(db);
  const drained = await withClient(db, (client) => drainInbox(client, key, options));
  if (drained.refused > 0) {
    countAuditRefused(drained.refused);
    logger.warn('audit inbox rows refused: not sealed by the service for the transaction that wrote them', {
      refused: drained.refused,
      writers: [...drained.refusedFrom],
    });
  }
  return drained;
}

/**
 * Drains the inbox after a request that may have written to it, never waited for (see
 * BackgroundDrains). What is left waits for the next one, or for the next read of the log
 * (drainedLog).
 */
function drainSoon(db: pg.Pool): void {
  background.start(() =>
    drain(db, { batches: 10 }).then(
      () => undefined,
      (error: unknown) => {
        countAuditDrainFailure();
        logger.error('audit inbox not drained', { error: loggedError(error) });
      },
    ),
  );
}

/**
 * The log with every entry committed before the read in it: this process's own drain finished,
 * the inbox drained, waiting for rows another process is draining. When that cannot be done, the
 * read is refused (503) rather than answered without entries the inbox still holds.
 */
export async function drainedLog(): Promise<pg.Pool> {
  const db = await getDatabase();
  await background.settled();
  const drained = await drain(db, { batches: 100, wait: true }).catch((error: unknown) => {
    countAuditDrainFailure();
    throw new ServiceUnavailable(
      'Audit log unavailable',
      'entries waiting in the audit inbox could not be moved into the log; try again',
      error,
    );
  });
  if (drained.more) {
    throw new ServiceUnavailable(
      'Audit log busy',
      'more entries are waiting in the audit inbox than one read moves into the log; try again shortly',
    );
  }
  return db;
}
