import { randomBytes } from 'node:crypto';
import { licenseKeyHash, normalizeLicenseKey } from '#lib/license/lease';

/** Crockford's base32: no I, L, O or U, so a key read aloud or retyped survives. */
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** `DBA-` and five groups of five base32 characters (e.g. `DBA-HJQHA-VWD5F-BY7Z0-XCKXR-C9CHP`): 125 random bits. */
export function newLicenseKey(): string {
  const bytes = randomBytes(25);
  const chars = [...bytes].map((byte) => ALPHABET[byte & 31]).join('');
  return `DBA-${chars.match(/.{5}/g)?.join('-')}`;
}

/** Keys are compared in one spelling: upper case, no surrounding spaces. */
export const normalizeKey = normalizeLicenseKey;

/** The store keeps only this and a display prefix: a copy of the database gives away no key. */
export const keyHash = licenseKeyHash;

/** What lists show of a key: `DBA-HJQHA…`, enough to tell keys apart, useless to activate. */
export const keyPrefix = (key: string) => normalizeKey(key).slice(0, 9);

/** Emails match regardless of case and surrounding spaces. */
export const normalizeEmail = (email: string) => email.trim().toLowerCase();
