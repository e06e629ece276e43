import { createHash, createHmac, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { getConfig } from '#lib/config';
import { type AuditDraft, bindingOnly } from '#lib/db/audit-log';
import {
  type Claim,
  claimKey,
  type KeyRecord,
  keepAnswer,
  keyRecord,
  MAX_ANSWER_BYTES,
  markApplied,
  settleFailed,
  sweepKeys,
  takeOver,
} from '#lib/db/idempotency';
import { getDatabase } from '#lib/db/pool';
import { ApiError, BadRequest } from '#lib/errors';
import { type HttpEvent, header } from '#lib/http/event';
import { requestSchema } from '#lib/http/request-schema';
import { type HttpResponse, jsonText } from '#lib/http/respond';
import type { AnyRoute } from '#lib/http/route';
import { loggedError, logger } from '#lib/log';
import type { Principal } from '#lib/principal';

/**
 * `Idempotency-Key` on the writes a client may retry (routes with `idempotent`): a retry with the
 * same key answers the first answer and never writes twice. A key is its principal's (the admin,
 * or one API key), its route's and its own; its record is kept KEPT_HOURS from its first use (from
 * its last take-over at the least), and goes with its schema or its API key when they are deleted.
 *
 * Before the route runs, the service claims the key in `_dbadmin.idempotency_keys` (lib/db/
 * idempotency) with a random claim; once the route has answered, the answer (at most 64 KiB) is
 * kept there. The write's own transaction, a tenant role's that cannot reach `_dbadmin`, binds
 * itself to the claim at its COMMIT through migration 15's door (lib/db/audit-log's
 * commitAudited): the record says the change committed exactly when it did, and a claim no longer
 * the request's makes the door raise and the write roll back. A request whose time is up rolls
 * back rather than commit (its signal is checked before the COMMIT). A tenant can neither forge the
 * binding (the door takes a proof of the claim for its very transaction) nor read or write a record.
 * So a retry finds:
 *
 * - the answer kept: it is sent again, with `Idempotency-Replayed: true`;
 * - the key claimed, its request within its time, or its change being committed right now: 409
 *   'Request in progress' and Retry-After;
 * - the change committed, its answer not kept (lost, or too large): 409 'Already applied', never
 *   written twice;
 * - the key claimed, its request's time up, nothing committed: the retry takes the claim and runs;
 *   the first, should it still be running, can no longer commit.
 *
 * A request that fails settles its claim by the record: applied if a transaction of its bound it,
 * released otherwise (a failure is not kept: a 404 for a table should not outlive the table's
 * creation), whether it is audited or not.
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
 * How long past its request's remaining time a claim is held: its session is normally terminated
 * by then (lib/db/executor); should it not be, the door keeps it from committing once taken over.
 */
const LEASE_MARGIN_MS = 5000;
const MAX_LEASE_MS = 15 * 60_000;

const who = (principal: Principal) =>
  principal.kind === 'admin' ? 'admin' : `${principal.kind} ${principal.id}`;

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
const alreadyApplied = (tooLarge: boolean) =>
  conflict(
    'Already applied',
    tooLarge
      ? `the first request with this Idempotency-Key made its change, but its answer was too large to keep (over ${MAX_ANSWER_BYTES / 1024} KiB); it is not made twice: read the result back`
      : 'the first request with this Idempotency-Key made its change, but its answer was lost (the database or the service failed as it answered); it is not made twice: read the result back',
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
  if (key !== undefined && !route.idempotent && route.method !== 'GET') {
    // A client that believes this write is protected from running twice must hear it is not.
    throw new BadRequest(
      'Idempotency-Key not taken',
      `${route.method} ${route.path} does not take an Idempotency-Key: only row inserts, bulk rows, an import's commit, schema and key creation do`,
    );
  }
  if (!route.idempotent || !request.principal || key === undefined) return undefined;
  if (!KEY_FORMAT.test(key)) {
    throw new BadRequest(
      'Invalid Idempotency-Key',
      'Idempotency-Key must be 1 to 255 printable ASCII characters (a UUID is a good one)',
    );
  }
  const leaseMs = Math.min(remainingMs ?? MAX_LEASE_MS, MAX_LEASE_MS) + LEASE_MARGIN_MS;
  const { principal } = request;
  return new KeyedRequest(
    route,
    recordScope(principal, `${route.method} ${route.path}`, key),
    request,
    leaseMs,
    { schema: requestSchema(request), keyId: principal.kind === 'key' ? principal.id : undefined },
  );
}

/** One request sent with an Idempotency-Key: its claim, and what becomes of it. */
export class KeyedRequest {
  #claim: Claim | undefined;

  constructor(
    private readonly route: AnyRoute,
    private readonly scope: Buffer,
    private readonly request: { params: unknown; query: unknown; body: unknown },
    private readonly leaseMs: number,
    private readonly owner: { schema: string | undefined; keyId: number | undefined },
  ) {}

  /**
   * Claims the key before the route's work. Throws the first answer (Replay) or a 409 when the key
   * is not this request's to run; returns the draft the route's work commits with: the request's
   * audit entry (`draft`) or, not audited, a draft of its own, either bound to the claim.
   */
  async claim(
    draft: AuditDraft | undefined,
    signal: AbortSignal | undefined,
    requestId: string,
  ): Promise<AuditDraft> {
    const [db, config] = await Promise.all([getDatabase(), getConfig()]);
    void sweepKeys(db);
    const claim: Claim = {
      scope: this.scope,
      fingerprint: fingerprint(config.DBADMIN_SECRET, this.request),
      claim: randomUUID(),
      leaseMs: this.leaseMs,
      ...this.owner,
    };
    // A record can expire or be released between the claim and the read: a few rounds settle it.
    for (let round = 0; round < 3; round++) {
      if (await claimKey(db, claim)) return this.claimed(claim, draft, signal, requestId);
      const record = await keyRecord(db, claim.scope, claim.fingerprint);
      if (record) await this.assertTakeable(db, record);
      if (record && (await takeOver(db, record.claim, claim)))
        return this.claimed(claim, draft, signal, requestId);
    }
    throw inProgress();
  }

  private claimed(
    claim: Claim,
    draft: AuditDraft | undefined,
    signal: AbortSignal | undefined,
    requestId: string,
  ): AuditDraft {
    this.#claim = claim;
    const binding = { scope: claim.scope, claim: claim.claim, signal };
    if (!draft) return bindingOnly(binding, requestId);
    draft.binding = binding;
    return draft;
  }

  /** Throws what the key's record answers this request; returns when its claim may be taken over. */
  private async assertTakeable(db: pg.Pool, record: KeyRecord): Promise<void> {
    if (!record.sameRequest) throw reused();
    if (record.state === 'done') throw this.replay(record);
    if (record.state === 'applied') throw alreadyApplied(record.status !== null);
    if (record.leased) throw inProgress();
    // Its request's time is up: a transaction of its that committed bound the claim.
    if (record.bound) {
      await markApplied(db, this.scope, record.claim);
      throw alreadyApplied(false);
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
      if (claim) await this.failed(claim).catch(unsettled);
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

  /** A failed request's claim: applied if a transaction of its committed, freed if none did. */
  private async failed(claim: Claim): Promise<void> {
    // Held: a transaction of its is committing; the claim stands until its time is up.
    await settleFailed(await getDatabase(), claim.scope, claim.claim);
  }
}

const unsettled = (error: unknown) =>
  logger.warn('idempotency key not settled: its claim stands until its time is up', {
    error: loggedError(error),
  });
