import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { signedLease } from '#lib/license/lease';

/**
 * The license file in LICENSE_DATA_DIR: its format, with the license key encrypted and the whole
 * signed under keys derived from DBADMIN_SECRET and the machine id, so the disk alone neither
 * reveals the key nor lets anyone forge the file or move it to another machine.
 */

export const LICENSE_FILE = 'license.json';

/** SPEC.md's license file, plus what the service needs to rebuild its state from it. */
const contentsSchema = z.object({
  encryptedLicenseKey: z.object({ encrypted: z.string(), iv: z.string() }).nullable(),
  email: z.string().nullable(),
  type: z.enum(['trial', 'paid']),
  valid: z.boolean(),
  status: z.string(),
  expiresAt: z.string().nullable(),
  daysRemaining: z.number().nullable(),
  lastValidatedAt: z.string().nullable(),
  lastSavedAt: z.string(),
  /** The license server's last signed answer, verified again on every read (the HMAC proves nothing to us). */
  lease: signedLease.nullable().optional(),
  /** The latest trustworthy time seen when the file was saved (clock rollback check). */
  highWater: z.string().nullable().optional(),
});
const fileSchema = contentsSchema.extend({ signature: z.string() });

export type LicenseFileContents = z.infer<typeof contentsSchema>;

/** What the file holds once verified and decrypted. */
export interface LicenseFile extends Omit<LicenseFileContents, 'encryptedLicenseKey'> {
  licenseKey: string | null;
}

export interface FileKeys {
  encryption: Buffer;
  signing: Buffer;
}

/**
 * Keys for this machine's file: HKDF of the server secret (kept outside the license-data
 * directory) salted with the machine id, so a file copied to another machine neither decrypts nor
 * verifies there.
 */
export function fileKeys(secret: string, machineId: string): FileKeys {
  const derive = (info: string) =>
    Buffer.from(hkdfSync('sha256', secret, machineId, `dbadmin license file ${info}`, 32));
  return { encryption: derive('encryption'), signing: derive('signing') };
}

/** Stable JSON (sorted keys), so the signature does not depend on property order. */
const canonical = (value: Record<string, unknown>) =>
  JSON.stringify(Object.fromEntries(Object.entries(value).sort(([a], [b]) => a.localeCompare(b))));

const sign = (keys: FileKeys, contents: LicenseFileContents) =>
  createHmac('sha256', keys.signing).update(canonical(contents)).digest('hex');

export function sealLicenseFile(
  keys: FileKeys,
  file: LicenseFile,
): LicenseFileContents & { signature: string } {
  const { licenseKey, ...rest } = file;
  let encryptedLicenseKey: LicenseFileContents['encryptedLicenseKey'] = null;
  if (licenseKey !== null) {
    const iv = randomBytes(16);
    const cipher = createCipheriv('aes-256-cbc', keys.encryption, iv);
    const encrypted = Buffer.concat([cipher.update(licenseKey, 'utf8'), cipher.final()]);
    encryptedLicenseKey = { encrypted: encrypted.toString('base64'), iv: iv.toString('hex') };
  }
  const contents: LicenseFileContents = { ...rest, encryptedLicenseKey };
  return { ...contents, signature: sign(keys, contents) };
}

/** The file's contents if its signature holds and its key decrypts; otherwise undefined, as if absent. */
export function openLicenseFile(keys: FileKeys, raw: unknown): LicenseFile | undefined {
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) return undefined;
  const { signature, ...contents } = parsed.data;
  const expected = Buffer.from(sign(keys, contents), 'hex');
  const given = Buffer.from(signature, 'hex');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  const { encryptedLicenseKey, ...rest } = contents;
  if (!encryptedLicenseKey) return { ...rest, licenseKey: null };
  try {
    const decipher = createDecipheriv(
      'aes-256-cbc',
      keys.encryption,
      Buffer.from(encryptedLicenseKey.iv, 'hex'),
    );
    const key = Buffer.concat([decipher.update(encryptedLicenseKey.encrypted, 'base64'), decipher.final()]);
    return { ...rest, licenseKey: key.toString('utf8') };
  } catch {
    return undefined;
  }
}

/** Writes the whole file or nothing: a temporary file, flushed, then renamed over the old one. */
export async function writeFileAtomically(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  const temporary = join(dirname(path), `.${randomBytes(6).toString('hex')}.tmp`);
  const handle = await open(temporary, 'w', 0o600);
  try {
    await handle.writeFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temporary, path);
  } catch (error) {
    await rm(temporary, { force: true });
    throw error;
  }
}

export async function saveLicenseFile(dir: string, keys: FileKeys, file: LicenseFile): Promise<void> {
  await writeFileAtomically(
    join(dir, LICENSE_FILE),
    `${JSON.stringify(sealLicenseFile(keys, file), null, 2)}\n`,
  );
}

/**
 * For a change of DBADMIN_SECRET: the file opened with the first of `secrets` it verifies under,
 * `absent` when there is none, `unverified` when none of them opens it (or it is not JSON). The
 * machine id is asked for only when there is a file.
 */
export async function openLicenseFileWith(
  dir: string,
  machineId: () => Promise<string>,
  secrets: readonly string[],
): Promise<{ secret: string; file: LicenseFile; machineId: string } | 'absent' | 'unverified'> {
  let text: string;
  try {
    text = await readFile(join(dir, LICENSE_FILE), 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
    throw error;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return 'unverified';
  }
  const id = await machineId();
  for (const secret of secrets) {
    const file = openLicenseFile(fileKeys(secret, id), raw);
    if (file) return { secret, file, machineId: id };
  }
  return 'unverified';
}

/** The verified file, or undefined when it is missing, unreadable, or fails its signature. */
export async function loadLicenseFile(dir: string, keys: FileKeys): Promise<LicenseFile | undefined> {
  try {
    return openLicenseFile(keys, JSON.parse(await readFile(join(dir, LICENSE_FILE), 'utf8')));
  } catch {
    return undefined;
  }
}
