import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { AUDIT_SCHEMA } from '#lib/db/own-schemas';
import { isPgError } from '#lib/db/pg-errors';
import { ApiError, QueryTimeout, ServiceUnavailable } from '#lib/errors';

/**
 * The audit entry of the request in flight, and how it is written: inside the change's own
 * transaction, on whichever session makes the change (a tenant role's, the service's), so no
 * committed change lacks its entry and no entry outlives a change that rolled back.
 *
 * Tenant sessions cannot touch `_dbadmin`. An entry goes with its seal, SHA-256(k ‖ SHA-256(k ‖
 * entry)), k being a random key in `_dbadmin.audit_seal` that only the service reads, either into
 * `_dbadmin_audit.inbox` (migration 12: a plain row in the same round trip as our COMMIT, sealed
 * for the transaction's id; lib/db/audit-inbox moves it into the log, checking the seal and the
 * transaction that wrote it) or through `_dbadmin_audit.append(entry, seal)` (migration 9: checked
 * as it is written, for entries sent as bind parameters). Tenant code running in the same
 * transaction (a trigger, a deferred constraint) can write either, never forge an entry, and never
 * remove one: neither the log nor the inbox grants a read, a change or a delete to anyone.
 */

/** What an entry records: never row values, keys, passwords, or SQL text unless asked for. */
export interface AuditEntry {
  id: string;
  requestId: string;
  /** Who asked: the admin, a person, an API key, or anyone (the license routes SPEC leaves public). */
  actor: 'admin' | 'person' | 'key' | 'public';
  keyId?: number;
  keyName?: string;
  keyType?: string;
  personId?: number;
  personLogin?: string;
  /** How the person signed in: password, sso, token. */
  via?: string;
  schema?: string;
  action: string;
  target?: string;
  status: number;
  rows?: number;
  sqlKind?: string;
  sqlFingerprint?: string;
  sqlText?: string;
  /** The transaction it is written in, when written with its change (pg_current_xact_id). */
  xid?: string;
}

/** A request's entry while it runs: written once, by the first of its commits or after it. */
export interface AuditDraft {
  entry: AuditEntry;
  /** The seal's key (migration 9), read once per container. */
  key: Buffer;
  /** Written, or found to need none (the work changed nothing after all). */
  settled: boolean;
  /** The request's Idempotency-Key claim, which every transaction committed with this draft binds. */
  binding?: ClaimBinding;
}

/**
 * A request's claim on its Idempotency-Key (lib/http/idempotency), as its write transactions bind
 * themselves to it at their COMMIT (migration 15's door): the key's record then says the change
 * committed, in the change's own transaction, and a claim taken over meanwhile makes it roll back.
 */
export interface ClaimBinding {
  scope: Buffer;
  /** The claim: a random uuid, never sent in text a tenant's code can read (only its proof is). */
  claim: string;
  /** The request's: once it has aborted (its time is up), its transaction rolls back, never commits. */
  signal: AbortSignal | undefined;
  /** The transaction open on behalf of the request, once it is known (BEGIN_AUDITED). */
  xid?: string | undefined;
}

/**
 * The draft of a request that is not audited (AUDIT_LOG=off, a preview) but sent an
 * Idempotency-Key: it carries the claim's binding only, and never writes an entry.
 */
export const bindingOnly = (binding: ClaimBinding, requestId: string): AuditDraft => ({
  key: Buffer.alloc(0),
  settled: true,
  entry: { id: newEntryId(), requestId, actor: 'public', action: 'unaudited', status: 0 },
  binding,
});

/** Whether the transactions of the request must know their id (to seal an entry, or to bind a claim). */
export const needsXid = (draft: AuditDraft | undefined) => draft?.binding !== undefined || auditing(draft);

/**
 * Whether the request is audited and its entry still to be written. The draft goes down the call
 * chain by hand (RouteInput.audit, SchemaAccess.audit), never through AsyncLocalStorage: on Node 20
 * and 22 that runs on async hooks, a tax on every promise of every request once one has used it.
 */
export const auditing = (draft: AuditDraft | undefined): draft is AuditDraft => draft?.settled === false;

/** The request turned out to change nothing (a read-only transaction): it gets no entry. */
export function nothingChanged(draft: AuditDraft | undefined): void {
  if (draft) draft.settled = true;
}

/** What the work learnt about its change (rows, the SQL's kind): kept for the entry. */
export function describeChange(
  draft: AuditDraft | undefined,
  details: Partial<Pick<AuditEntry, 'rows' | 'target' | 'schema' | 'sqlKind' | 'sqlFingerprint' | 'sqlText'>>,
): void {
  if (auditing(draft)) Object.assign(draft.entry, details);
}

/** A request that signed someone in acts, from then on, as them: its entry names the person (null: the administrator). */
export function signedInAs(
  draft: AuditDraft | undefined,
  person: { id: number; login: string } | null,
  via: 'password' | 'sso',
): void {
  if (!auditing(draft)) return;
  if (person === null) draft.entry.actor = 'admin';
  else Object.assign(draft.entry, { actor: 'person', personId: person.id, personLogin: person.login, via });
}

export const newEntryId = () => randomUUID();

const sha256 = (...parts: Buffer[]) => createHash('sha256').update(Buffer.concat(parts)).digest();

/** An entry's seal: SHA-256(k ‖ SHA-256(k ‖ its bytes)), k the key in `_dbadmin.audit_seal`. */
export const sealOf = (key: Buffer, bytes: Buffer) => sha256(key, sha256(key, bytes));

/** Text jsonb takes: no lone surrogate (JSON.stringify would write `\ud800`), no NUL. */
const storable = (_: string, value: unknown) =>
  typeof value === 'string'
    ? value.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]|\0/g, '\ufffd')
    : value;

/** The entry as the append function takes it: its JSON and the seal over those very bytes. */
export function sealed(draft: AuditDraft): { entry: string; seal: string } {
  const entry = JSON.stringify(draft.entry, storable);
  const bytes = Buffer.from(entry, 'utf8');
  return { entry, seal: sealOf(draft.key, bytes).toString('hex') };
}

/** The audit log refused or failed: the change is not made (its transaction rolls back). */
export class AuditUnavailable extends ServiceUnavailable {
  constructor(cause: unknown) {
    super(
      'Audit log unavailable',
      'the audit entry could not be written, so the change was not made; try again',
      cause,
    );
  }
}

/**
 * The append failed on the service's side. What the tenant's code set up in the transaction
 * (READ ONLY, a short statement timeout) is the tenant's doing, answered as such.
 */
const TENANT_CAUSED = new Set(['25006', '57014']);
const fromAppend = (error: unknown) =>
  isPgError(error) &&
  !TENANT_CAUSED.has(error.code) &&
  // Raised in our own call (the outermost frame), not in the tenant's code calling it.
  Boolean(error.where?.split('\n').at(-1)?.startsWith('PL/pgSQL function _dbadmin_audit.append('));

const APPEND = 'SELECT _dbadmin_audit.append($1, $2)';

/** Sent after BEGIN in an audited transaction: the transaction's id, for the entry's seal. */
export const SELECT_XID = 'SELECT pg_catalog.pg_current_xact_id()::pg_catalog.text AS xid';

/**
 * The request's entry is to be written in the transaction just begun, whose id is `xid`; with
 * none, in whatever transaction commits it (its text then never holds it).
 */
export function sealFor(draft: AuditDraft | undefined, xid: string | undefined): void {
  if (!auditing(draft)) return;
  if (xid) draft.entry.xid = xid;
  else delete draft.entry.xid;
}

/** The id the results of SELECT_XID (sent with others, or alone) carry. */
export const xidOf = (results: pg.QueryResult | pg.QueryResult[]) =>
  (Array.isArray(results) ? results : [results])
    .map((r) => (r.rows[0] as { xid?: unknown } | undefined)?.xid)
    .find((xid): xid is string => typeof xid === 'string');

/**
 * The entry into the inbox in the same round trip as our COMMIT: one plain row, no function call.
 * Its text holds the entry (base64) and the seal (hex), which code running in the transaction can
 * read (current_query()) and write again; the entry is sealed for this transaction's id, which
 * the inbox records for each row from the database's side, so a copy written in any other
 * transaction is refused when the inbox is drained (lib/db/audit-inbox), and one written again in
 * this one is the same entry.
 */
function appendAndCommit(draft: AuditDraft): string {
  const { entry, seal } = sealed(draft);
  const base64 = Buffer.from(entry, 'utf8').toString('base64');
  return `INSERT INTO _dbadmin_audit.inbox (entry, seal) VALUES ('${base64}', '${seal}'); COMMIT`;
}

/**
 * The inbox insert failed, not our COMMIT after it. Its errors carry no PL/pgSQL context (tenant
 * code raising at COMMIT does), and name the inbox: in their schema field where PostgreSQL sets
 * one (a constraint), else in their message (a privilege, a missing table).
 */
const fromInbox = (error: unknown) =>
  isPgError(error) &&
  !TENANT_CAUSED.has(error.code) &&
  !error.where &&
  (error.schema ? error.schema === AUDIT_SCHEMA : /\binbox\b/.test(error.message));

/** The claim's door call, sent as text before our COMMIT: the proof fits this transaction only. */
function bindStatement(binding: ClaimBinding, xid: string): string {
  const proof = createHash('sha256').update(`${binding.claim} ${xid}`, 'utf8').digest('hex');
  const scope = binding.scope.toString('hex');
  return `SELECT _dbadmin_audit.idempotency_bound(pg_catalog.decode('${scope}', 'hex'), pg_catalog.decode('${proof}', 'hex')); `;
}

/** The claim was taken over (its request's time was up) or released: the change must not commit. */
const fromDoor = (error: unknown) =>
  isPgError(error) &&
  Boolean(error.where?.split('\n').at(-1)?.startsWith('PL/pgSQL function _dbadmin_audit.idempotency_bound('));

const takenOver = (cause: unknown) =>
  new ApiError(
    409,
    'Request taken over',
    'this request ran past its time, and its Idempotency-Key was taken over by a retry: its change was not made',
    { cause },
  );

/**
 * What goes before our COMMIT for the request's Idempotency-Key (nothing without one), once the
 * request is known still to be waiting for it: a request whose time is up rolls back instead.
 */
async function beforeCommit(client: pg.ClientBase, draft: AuditDraft | undefined): Promise<string> {
  const binding = draft?.binding;
  if (!binding) return '';
  if (binding.signal?.aborted) throw new QueryTimeout("ran longer than the function's time allows");
  const xid =
    binding.xid ??
    (await client.query<{ xid: string }>(XID)).rows[0]?.xid ??
    // Unreachable: pg_current_xact_id() always answers inside a transaction.
    '';
  return bindStatement(binding, xid);
}

const XID = 'SELECT pg_catalog.pg_current_xact_id()::pg_catalog.text AS xid';

/**
 * Commits the open transaction on `client`, with the request's entry in it when the request is
 * audited and its entry not yet written (one round trip either way), and bound to the request's
 * Idempotency-Key claim when it has one (in the same round trip). A transaction not begun with
 * BEGIN_AUDITED has no id in its entry: the entry then goes as bind parameters, never in text.
 */
export async function commitAudited(
  client: pg.ClientBase,
  draft: AuditDraft | undefined,
  rows?: number,
): Promise<void> {
  const bind = await beforeCommit(client, draft);
  const commit = (text: string) =>
    client.query(`${bind}${text}`).catch((error: unknown) => {
      throw fromDoor(error) ? takenOver(error) : fromInbox(error) ? new AuditUnavailable(error) : error;
    });
  if (!auditing(draft)) {
    await commit('COMMIT');
    return;
  }
  if (rows !== undefined && draft.entry.rows === undefined) draft.entry.rows = rows;
  if (draft.entry.xid) {
    await commit(appendAndCommit(draft));
  } else {
    const { entry, seal } = sealed(draft);
    await client.query(APPEND, [entry, seal]).catch((error: unknown) => {
      throw fromAppend(error) ? new AuditUnavailable(error) : error;
    });
    await commit('COMMIT');
  }
  draft.settled = true;
}

/** Writes the entry on its own (the change had no transaction of ours), once. */
export async function appendAfter(db: pg.Pool, draft: AuditDraft): Promise<void> {
  if (draft.settled) return;
  delete draft.entry.xid;
  const { entry, seal } = sealed(draft);
  await db.query(APPEND, [entry, seal]);
  draft.settled = true;
}

/** The seal's key, from the service's pool (search path pg_catalog alone, so names are qualified). */
export async function readSealKey(db: pg.Pool | pg.ClientBase): Promise<Buffer> {
  const { rows } = await db.query<{ key: string }>(
    `SELECT pg_catalog.encode(key, 'hex') AS key FROM _dbadmin.audit_seal`,
  );
  const key = rows[0] && Buffer.from(rows[0].key, 'hex');
  if (!key) throw new Error('_dbadmin.audit_seal has no key');
  return key;
}
