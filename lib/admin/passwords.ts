import { createHash, createHmac, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { BadRequest } from '#lib/errors';

/**
 * People's passwords and the secrets dbadmin hands out to them (console sessions, personal tokens,
 * invitations). A password is kept as scrypt (memory-hard, Node's own, so it runs on Lambda too),
 * never reversibly; a secret is 256 random bits, kept as its SHA-256 (no guess can reach it, so a
 * slow hash would buy nothing and cost every request).
 */

/** scrypt's cost: N = 2^15, r = 8 (32 MiB, about 50-100 ms), p = 1; the parameters are stored with each hash. */
const COST = { logN: 15, r: 8, p: 1 };
const KEY_BYTES = 32;

function derive(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** logN;
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, KEY_BYTES, { N, r, p, maxmem: 256 * N * r }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

/** `scrypt$<logN>$<r>$<p>$<salt>$<key>`, base64. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, COST.logN, COST.r, COST.p);
  return ['scrypt', COST.logN, COST.r, COST.p, salt.toString('base64'), key.toString('base64')].join('$');
}

/** A hash of the same cost that matches nothing: compared when there is no person, so timing tells nothing. */
let nobody: Promise<string> | undefined;
const nobodysHash = () => {
  nobody ??= hashPassword(randomBytes(32).toString('base64'));
  return nobody;
};

/** Made once per process, before its first password check (see personByPassword). */
export const standInReady = async (): Promise<void> => {
  await nobodysHash();
};

/** Whether `password` matches `stored`; a missing hash (no such person, no password yet) takes as long and fails. */
export async function passwordMatches(stored: string | null | undefined, password: string): Promise<boolean> {
  const [scheme, logN, r, p, salt, key] = (stored ?? (await nobodysHash())).split('$');
  if (scheme !== 'scrypt' || !salt || !key) return false;
  const expected = Buffer.from(key, 'base64');
  const actual = await derive(password, Buffer.from(salt, 'base64'), Number(logN), Number(r), Number(p));
  return timingSafeEqual(actual, expected) && Boolean(stored);
}

export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;

/**
 * A new password's rules: 12 to 256 characters, not the login or the name in it, and not one
 * character or a short run repeated (the first guesses of any list). Length is what makes a
 * password hard to guess (NIST SP 800-63B); no rules of composition.
 */
export function checkNewPassword(password: string, login: string): void {
  if (password.length < PASSWORD_MIN || password.length > PASSWORD_MAX)
    throw new BadRequest(
      'Weak password',
      `password must be ${PASSWORD_MIN} to ${PASSWORD_MAX} characters long`,
    );
  const lower = password.toLowerCase();
  const name = login.split('@')[0] ?? login;
  if (name.length >= 4 && lower.includes(name))
    throw new BadRequest('Weak password', 'password must not contain the sign-in name');
  if (/^(.{1,4})\1+$/.test(lower) || /^(?:0123456789|1234567890|abcdefghij|qwertyuiop)/.test(lower))
    throw new BadRequest('Weak password', 'password is too easy to guess: choose a longer, less regular one');
}

/** A new secret to hand out, with its prefix (`dbs_` a session, `dbp_` a personal token, `dbi_` an invitation). */
export function newSecret(prefix: 'dbs_' | 'dbp_' | 'dbi_'): string {
  return `${prefix}${randomBytes(32).toString('base64url')}`;
}

export const SECRET_PATTERN = /^db[spi]_[A-Za-z0-9_-]{43}$/;

export const secretDigest = (secret: string) => createHash('sha256').update(secret).digest();

/**
 * The console's anti-forgery token for a session: an HMAC of its id under DBADMIN_SECRET, so the
 * service tells it again from the session alone (GET /api/session) and no one else can make it.
 */
export const csrfToken = (serviceSecret: string, sessionId: number) =>
  createHmac('sha256', serviceSecret).update(`csrf:${sessionId}`).digest('base64url');
