import { randomBytes } from 'node:crypto';
import { asDate, type Known, type Lease } from '#lib/license/known';
import { licenseKeyHash, openLease, type SignedLease, type TrustedKey } from '#lib/license/lease';
import type { LicenseType, ServerAnswer } from '#lib/license/state';

/**
 * The lease check: which leases and server answers count. A lease counts only when signed by a
 * trusted key for this machine and key; an answer only when its lease echoes our nonce and is
 * newer than the one held, or, unsigned, in warn mode for a key never seen signed.
 */

export const newNonce = () => randomBytes(16).toString('hex');

/** One of SPEC.md's answers the service judged untrustworthy: it counts as no answer at all. */
export class Untrusted extends Error {}

/** A lease that verifies, for this machine and this key; otherwise undefined. */
export function leaseFor(
  raw: unknown,
  trusted: readonly TrustedKey[],
  machineId: string,
  keyHash: string | null,
): Lease | undefined {
  const payload = openLease(raw, trusted);
  if (!payload || payload.machineId !== machineId || payload.keyHash !== keyHash) return undefined;
  return { signed: raw as SignedLease, payload };
}

/** What the license server said, as the validate and activate calls answer it. */
export interface Reply {
  valid: boolean;
  activated?: boolean | undefined;
  message?: string | undefined;
  type?: LicenseType | null;
  expiresAt?: string | null;
  lease?: unknown;
}

/** An answer that counts: its lease when signed, and what it says. */
export interface Judged {
  lease: Lease | undefined;
  valid: boolean;
  message: string | undefined;
  type: LicenseType | null;
  expiresAt: string | null;
}

/** Judges a server answer: a signed lease must verify and echo our nonce, machine and key. */
export function judge(
  known: Known,
  reply: Reply,
  {
    nonce,
    key,
    trusted,
    requireSignature,
  }: {
    nonce: string;
    key: string;
    trusted: readonly TrustedKey[];
    requireSignature: boolean;
  },
): Judged {
  if (reply.lease !== undefined) {
    const lease = leaseFor(reply.lease, trusted, known.machineId, licenseKeyHash(key));
    if (!lease || lease.payload.nonce !== nonce)
      throw new Untrusted('the answer is not signed by a trusted key for this request');
    if (known.lease && lease.payload.seq <= known.lease.payload.seq)
      throw new Untrusted('the answer is older than the lease already held');
    const { valid, activated, type, expiresAt } = lease.payload;
    return { lease, valid: valid && activated, message: reply.message, type, expiresAt };
  }
  if (requireSignature) throw new Untrusted('strict enforcement requires a signed answer');
  if (known.pinned) throw new Untrusted('an unsigned answer for a license seen signed before');
  return {
    lease: undefined,
    valid: reply.valid && reply.activated !== false,
    message: reply.message,
    type: reply.type ?? null,
    expiresAt: reply.expiresAt ?? null,
  };
}

/** Folds a judged answer, received at `at`, into what is known. */
export function accept(known: Known, judged: Judged, at: Date): Known {
  const highWater = Math.max(
    known.highWater,
    at.getTime(),
    judged.lease ? Date.parse(judged.lease.payload.serverTime) : 0,
  );
  const answer: ServerAnswer = judged.valid
    ? { kind: 'valid', at, expiresAt: asDate(judged.expiresAt) }
    : { kind: 'invalid', at, message: judged.message ?? 'License key not found or inactive' };
  return {
    ...known,
    lease: judged.lease ?? known.lease,
    pinned: known.pinned || judged.lease !== undefined,
    refusedUnsigned: !judged.lease && !judged.valid,
    unsigned:
      judged.lease || !judged.valid
        ? undefined
        : { at, type: judged.type ?? 'paid', expiresAt: asDate(judged.expiresAt) },
    answer,
    highWater,
  };
}
