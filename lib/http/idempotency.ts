import { createHash, createHmac, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { getConfig } from '#lib/config';
import type { AuditDraft } from '#lib/db/audit-log';
import {
  type Claim,
  claimKey,
  entryLogged,
  KEPT_HOURS,
  type KeyRecord,
  keepAnswer,
  keyRecord,
  markApplied,
  releaseKey,
  sweepKeys,
  takeOver,
  transactionStatus,
} from '#lib/db/idempotency';
import { getDatabase } from '#lib/db/pool';
import { ApiError, BadRequest, QueryTimeout } from '#lib/errors';
import { drainedLog } from '#lib/http/audit';
import { type HttpEvent, header } from '#lib/http/event';
import { type HttpResponse, jsonText } from '#lib/http/respond';
import type { AnyRoute } from '#lib/http/route';
import { loggedError, logger } from '#lib/log';
import type { Principal } from '#lib/principal';

/**
 * `Idempotency-Key` on the writes a client may retry (routes with `idempotent`): a retry with the
 * same key answers the first answer and never writes twice. A key is its principal's (the admin,
 * or one API key), its route's and its own; its record is kept KEPT_HOURS from its first use.
 *
 * Before the route runs, the service claims the key in `_dbadmin.idempotency_keys` (lib/db/
 * idempotency), naming the request's audit entry; once the route has answered, the answer is kept
 * there. Neither is written in the write's own transaction, which is a tenant role's and must not
 * reach `_dbadmin` (nor could the answer be: it is made from what the lib call returns after its
 * COMMIT), and neither needs to be: what commits with the write is its audit entry (lib/db/
 * audit-log), sealed with the service's key for that very transaction. That entry is the proof the
 * write committed; a tenant can neither forge one nor make a copy count in another transaction
 * (lib/db/audit-inbox), and can neither read nor write a record. So a retry finds:
 *
 * - the answer kept: it is sent again, with `Idempotency-Replayed: true`;
 * - the key claimed, its request within its time: 409 'Request in progress' and Retry-After;
 * - the key claimed, its request's time up (its process died, or never learnt how its COMMIT
 *   ended): the audit log says whether the change committed. It did: 409 'Already applied' (the
 *   answer is lost, the write is never made twice). It did not: the retry takes the claim and runs.
 *
 * A request that fails asks PostgreSQL what became of its transaction (pg_xact_status of its
 * entry's xid). Rolled back, or never begun: the key is released, and a retry runs again (a
 * failure is not kept: a 404 for a table should not outlive the table's creation). Committed: the
 * key is marked applied. Unknown (the database went away): the claim stands until its time is up.
 * With AUDIT_LOG=off there is no entry to prove anything: a request that failed in a way that may
 * have committed keeps its key, answered 409 'Outcome unknown' until it expires.
 *
 * An answer holding a secret shown once (a key's creation: `shownOnce`) is kept without it; its
 * retry answers 409 'Already made' with the rest. A key is stored only as its hash (SPEC.md): a
 * copy encrypted with DBADMIN_SECRET would put every key made in the last day within reach of
 * whoever holds a backup and that secret.
 */

const IDEMPOTENCY_KEY = 'Idempotency-Key';
const REPLAYED = 'idempotency-replayed';

/** 1 to 255 printable ASCII characters. */
const KEY_FORMAT = /^[\x20-\x7e]{1,255}$/;

/**
 * How long past its request's remaining time a claim is held: the request's session has been
 * terminated by then (lib/db/executor), so nothing it began can still commit.
 */
const LEASE_MARGIN_MS = 5000;
const MAX_LEASE_MS = 15 * 60_000;

const who = (principal: Principal) => (principal.kind === 'key' ? `key ${principal.id}` : principal.kind);

/** Where a key's record is found: its principal's, its route's (`POST /api/...`), the key's own. */
export const recordScope = (principal: Principal, route: string, key: string): Buffer =>
  createHash('sha256')
    .update(JSON.stringify([who(principal), route, key]))
    .digest();

/** JSON with every object's keys in order: the same request, however its sender ordered them. */
const canonical = (value: unknown) =>
  JSON.stringify(value, (_, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );

/**
 * The request as its route parsed it, keyed with the service's secret: a schema's password is
 * part of its creation's request, and no reader of the table may try guesses against it.
 */
const fingerprint = (secret: string, request: { params: unknown; query: unknown; body: unknown }) =>
  createHmac('sha256', createHash('sha256').update(`idempotency ${secret}`).digest())
    .update(canonical([request.params ?? null, request.query ?? null, request.body ?? null]))
    .digest();

const conflict = (title: string, message: string, options?: ConstructorParameters<typeof ApiError>[3]) =>
  new ApiError(409, title, message, options);

const reused = () =>
  conflict(
    'Idempotency-Key reused',
    'this Idempotency-Key was first sent with another request (its path, query or body differ); a key names one request: send a new key for a new request',
  );
const inProgress = () =>
  conflict(
    'Request in progress',
    'the first request with this Idempotency-Key is still running; send it again after Retry-After seconds for its answer',
    { headers: { 'Retry-After': '1' } },
  );
const alreadyApplied = () =>
  conflict(
    'Already applied',
    'the first request with this Idempotency-Key made its change, but its answer was lost (the database or the service failed as it answered); it is not made twice: read the result back',
  );
const outcomeUnknown = () =>
  conflict(
    'Outcome unknown',
    `the first request with this Idempotency-Key failed without the service learning whether its change was made, and with AUDIT_LOG=off nothing records it; it is not run again while the key is kept (${KEPT_HOURS} hours): read the result back, and send a new key if it is missing`,
  );

/** The key's first answer, thrown past the route's work and its audit: nothing runs, nothing is written. */
class Replay extends Error {
  constructor(readonly response: HttpResponse) {
    super('replayed');
  }
}

/** The request's Idempotency-Key, when its route takes one and it sent one; a malformed key is a 400. */
export function idempotencyOf(
  route: AnyRoute,
  event: HttpEvent,
  request: { principal: Principal | undefined; params: unknown; query: unknown; body: unknown },
  remainingMs: number | undefined,
): KeyedRequest | undefined {
  const key = header(event, IDEMPOTENCY_KEY);
  if (!route.idempotent || !request.principal || key === undefined) return undefined;
  if (!KEY_FORMAT.test(key)) {
    throw new BadRequest(
      'Invalid Idempotency-Key',
      'Idempotency-Key must be 1 to 255 printable ASCII characters (a UUID is a good one)',
    );
  }
  const leaseMs = Math.min(remainingMs ?? MAX_LEASE_MS, MAX_LEASE_MS) + LEASE_MARGIN_MS;
  return new KeyedRequest(
    route,
    recordScope(request.principal, `${route.method} ${route.path}`, key),
    request,
    leaseMs,
  );
}

/** One request sent with an Idempotency-Key: its claim, and what becomes of it. */
export class KeyedRequest {
  #claim: Claim | undefined;
  #draft: AuditDraft | undefined;

  constructor(
    private readonly route: AnyRoute,
    private readonly scope: Buffer,
    private readonly request: { params: unknown; query: unknown; body: unknown },
    private readonly leaseMs: number,
  ) {}

  /**
   * Claims the key before the route's work, naming its audit entry (`draft`, committed with the
   * change). Throws the first answer (Replay) or a 409 when the key is not this request's to run.
   */
  async claim(draft: AuditDraft | undefined): Promise<void> {
    this.#draft = draft;
    const [db, config] = await Promise.all([getDatabase(), getConfig()]);
    void sweepKeys(db);
    const claim: Claim = {
      scope: this.scope,
      fingerprint: fingerprint(config.DBADMIN_SECRET, this.request),
      claim: draft?.entry.id ?? randomUUID(),
      entryId: draft?.entry.id,
      leaseMs: this.leaseMs,
    };
    // A record can expire or be released between the claim and the read: a few rounds settle it.
    for (let round = 0; round < 3; round++) {
      if (await claimKey(db, claim)) {
        this.#claim = claim;
        return;
      }
      const record = await keyRecord(db, claim.scope, claim.fingerprint);
      if (record) await this.assertTakeable(db, record);
      if (record && (await takeOver(db, record.claim, claim))) {
        this.#claim = claim;
        return;
      }
    }
    throw inProgress();
  }

  /** Throws what the key's record answers this request; returns when its claim may be taken over. */
  private async assertTakeable(db: pg.Pool, record: KeyRecord): Promise<void> {
    if (!record.sameRequest) throw reused();
    if (record.state === 'done') throw this.replay(record);
    if (record.state === 'applied') throw alreadyApplied();
    if (record.leased) throw inProgress();
    // Its request's time is up: whether its change committed is its audit entry's to say.
    if (record.entryId === null) throw outcomeUnknown();
    if (await entryLogged(await drainedLog(), record.entryId)) {
      await markApplied(db, this.scope, record.claim);
      throw alreadyApplied();
    }
  }

  /** Runs the request's work; keeps its answer, or settles its claim when it failed. */
  async answer(work: () => Promise<HttpResponse>): Promise<HttpResponse> {
    let response: HttpResponse;
    try {
      response = await work();
    } catch (error) {
      if (error instanceof Replay) return error.response;
      const claim = this.#claim;
      if (claim) await this.failed(claim, error).catch(unsettled);
      throw error;
    }
    const claim = this.#claim;
    if (claim) await this.keep(claim, response).catch(unsettled);
    return response;
  }

  /** The first answer again; for one that held a secret shown once, a 409 with the rest of it. */
  private replay(record: KeyRecord): Replay | ApiError {
    const answer = record.answer ?? 'null';
    const { idempotent } = this.route;
    if (typeof idempotent === 'object') {
      return conflict(
        'Already made',
        `the first request with this Idempotency-Key made it; its answer held "${idempotent.shownOnce}", which is shown once and never kept, so it is not sent again. "first" is the rest of that answer: if "${idempotent.shownOnce}" was lost, delete what was made and make another`,
        { details: { first: JSON.parse(answer) } },
      );
    }
    return new Replay(jsonText(record.status ?? 200, answer, { [REPLAYED]: 'true' }));
  }

  /** The route's answer (JSON, a success: failures are thrown) is kept, without what is shown once. */
  private async keep(claim: Claim, response: HttpResponse): Promise<void> {
    const db = await getDatabase();
    const { idempotent } = this.route;
    let answer = response.body;
    if (typeof idempotent === 'object') {
      const { [idempotent.shownOnce]: _secret, ...rest } = JSON.parse(answer) as Record<string, unknown>;
      answer = JSON.stringify(rest);
    }
    await keepAnswer(db, claim.scope, claim.claim, response.statusCode, answer);
  }

  /** A failed request's claim: applied if its change committed, freed if not, left standing if unknown. */
  private async failed(claim: Claim, error: unknown): Promise<void> {
    const db = await getDatabase();
    const outcome = this.#draft?.settled ? 'committed' : await this.outcome(db, error);
    if (outcome === 'committed') await markApplied(db, claim.scope, claim.claim);
    else if (outcome === 'aborted') await releaseKey(db, claim.scope, claim.claim);
    // Unknown: the claim stands until its time is up, and the audit log decides then.
  }

  /** What became of the failed request's transaction, as PostgreSQL says. */
  private async outcome(db: pg.Pool, error: unknown): Promise<'committed' | 'aborted' | 'unknown'> {
    const draft = this.#draft;
    if (!draft) {
      // Not audited: a refusal (4xx) is one PostgreSQL or we gave, nothing committed; a timeout
      // may have cut a COMMIT short.
      const refused = error instanceof ApiError && error.status < 500 && !(error instanceof QueryTimeout);
      return refused ? 'aborted' : 'unknown';
    }
    // No transaction of its change began (BEGIN gives the entry its xid).
    if (!draft.entry.xid) return 'aborted';
    // A session cut mid-COMMIT ends a moment later: asked a few times, a tenth of a second apart.
    for (let asked = 0; asked < 10; asked++) {
      const status = await transactionStatus(db, draft.entry.xid);
      if (status === 'committed' || status === 'aborted') return status;
      if (status !== 'in progress') return 'unknown';
      await sleep(100);
    }
    return 'unknown';
  }
}

const unsettled = (error: unknown) =>
  logger.warn('idempotency key not settled: its claim stands until its time is up', {
    error: loggedError(error),
  });
