import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
  verify,
} from 'node:crypto';
import { z } from 'zod';

/**
 * Signed leases: what the license server says about one key on one machine, signed with Ed25519.
 * The service trusts only the public keys compiled in below; nothing local (file, cache row,
 * environment, clock) can make or extend a lease. Both the service and the license server use this
 * module, so the two sides cannot disagree on the format.
 */

export interface TrustedKey {
  /** First 16 hex of SHA-256 of the raw public key. */
  id: string;
  /** The raw 32-byte Ed25519 public key, base64url. */
  publicKey: string;
}

/**
 * The vendor's signing keys: the current one and the next (rotation: sign with the next, ship a
 * release that drops the old). Made by `license-admin signing-key new`; never read at run time
 * from the environment or a file.
 */
export const TRUSTED_KEYS: readonly TrustedKey[] = [
  { id: 'f1f3828245522de8', publicKey: 'fHsrpF8byFmtPK9gs2_YFotWp1ZGSu0Iaj-PO3mRFg8' },
  { id: '80e877f78f3eb8fa', publicKey: 'wdUczoGscq-cFzkBDfmeugK7Y0-l0EUhO1-1pK801lc' },
];

const iso = z.iso.datetime({ offset: true });

/** What the server signs: an answer about `keyHash` on `machineId`, for the client's `nonce`. */
export const leasePayload = z.strictObject({
  v: z.literal(1),
  nonce: z.string().regex(/^[0-9a-f]{32}$/),
  keyHash: z.string().regex(/^[0-9a-f]{64}$/),
  machineId: z.string().min(1).max(128),
  /** The server's clock when it answered. */
  serverTime: iso,
  valid: z.boolean(),
  /** This machine holds one of the license's deployment slots. */
  activated: z.boolean(),
  type: z.enum(['trial', 'paid']).nullable(),
  expiresAt: iso.nullable(),
  /** The answer may stand in for the server (offline grace) until then; never later. */
  notAfter: iso,
  /** Increases with every lease the server signs: an older lease never replaces a newer one. */
  seq: z.number().int().nonnegative(),
});

export type LeasePayload = z.infer<typeof leasePayload>;

/** A lease as it travels and is stored: the exact signed bytes, their signature and the key's id. */
export const signedLease = z.strictObject({
  keyId: z.string().regex(/^[0-9a-f]{16}$/),
  payload: z.string().max(4096),
  signature: z.string().regex(/^[A-Za-z0-9_-]{86}$/),
});

export type SignedLease = z.infer<typeof signedLease>;

/** License keys compare in one spelling: upper case, no surrounding spaces. */
export const normalizeLicenseKey = (key: string) => key.trim().toUpperCase();

/** How the key is named in leases, the cache table and the license server's store. */
export const licenseKeyHash = (key: string) =>
  createHash('sha256').update(normalizeLicenseKey(key)).digest('hex');

const keyIdOf = (raw: Buffer) => createHash('sha256').update(raw).digest('hex').slice(0, 16);

const rawPublicKey = (key: KeyObject) => Buffer.from(key.export({ format: 'jwk' }).x as string, 'base64url');

/** A signing key from its base64 PKCS#8 DER form (LICENSE_SERVER_SIGNING_KEY). */
export function signingKey(pkcs8Base64: string): { id: string; key: KeyObject } {
  const key = createPrivateKey({ key: Buffer.from(pkcs8Base64, 'base64'), format: 'der', type: 'pkcs8' });
  if (key.asymmetricKeyType !== 'ed25519') throw new Error('the signing key must be an Ed25519 key');
  return { id: keyIdOf(rawPublicKey(createPublicKey(key))), key };
}

/** A new key pair: the private key for the license server, the public one to compile in. */
export function newSigningKey(): { privateKey: string; trusted: TrustedKey } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  const raw = rawPublicKey(publicKey);
  return {
    privateKey: privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64'),
    trusted: { id: keyIdOf(raw), publicKey: raw.toString('base64url') },
  };
}

export function signLease(signer: { id: string; key: KeyObject }, payload: LeasePayload): SignedLease {
  const text = JSON.stringify(leasePayload.parse(payload));
  return {
    keyId: signer.id,
    payload: text,
    signature: sign(null, Buffer.from(text, 'utf8'), signer.key).toString('base64url'),
  };
}

const publicKeys = new WeakMap<readonly TrustedKey[], Map<string, KeyObject>>();

function keyring(trusted: readonly TrustedKey[]): Map<string, KeyObject> {
  let ring = publicKeys.get(trusted);
  if (!ring) {
    ring = new Map(
      trusted.map(({ id, publicKey }) => [
        id,
        createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: publicKey }, format: 'jwk' }),
      ]),
    );
    publicKeys.set(trusted, ring);
  }
  return ring;
}

/**
 * The payload if `lease` is signed by one of `trusted` and well formed; otherwise undefined. What
 * the payload must echo (nonce, machine, key) is the caller's to check.
 */
export function openLease(lease: unknown, trusted: readonly TrustedKey[]): LeasePayload | undefined {
  const parsed = signedLease.safeParse(lease);
  if (!parsed.success) return undefined;
  const key = keyring(trusted).get(parsed.data.keyId);
  if (!key) return undefined;
  const bytes = Buffer.from(parsed.data.payload, 'utf8');
  if (!verify(null, bytes, key, Buffer.from(parsed.data.signature, 'base64url'))) return undefined;
  try {
    const payload = leasePayload.safeParse(JSON.parse(parsed.data.payload));
    return payload.success ? payload.data : undefined;
  } catch {
    return undefined;
  }
}
