import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  fileKeys,
  LICENSE_FILE,
  type LicenseFile,
  loadLicenseFile,
  openLicenseFile,
  saveLicenseFile,
  sealLicenseFile,
} from '#lib/license/license-file';
import { MACHINE_ID_FILE, machineId } from '#lib/license/machine-id';
import { paidLicenseFile } from '#test/support/license-file';

const keys = fileKeys('server-secret-0123456789abcdef0123456789', 'a'.repeat(32));
const license: LicenseFile = paidLicenseFile('DBA-1234-5678-90AB-CDEF', '2026-01-01T00:00:00.000Z');
const fresh = () => mkdtempSync(join(tmpdir(), 'dbadmin-license-'));

describe('license file', () => {
  it('round-trips, with the key stored only encrypted', async () => {
    const dir = fresh();
    await saveLicenseFile(dir, keys, license);

    const text = readFileSync(join(dir, LICENSE_FILE), 'utf8');
    expect(text).not.toContain(license.licenseKey);
    expect(JSON.parse(text)).toMatchObject({
      encryptedLicenseKey: { encrypted: expect.any(String), iv: expect.stringMatching(/^[0-9a-f]{32}$/) },
    });
    expect(await loadLicenseFile(dir, keys)).toEqual(license);
  });

  it('uses a new IV every time it is written', () => {
    const a = sealLicenseFile(keys, license);
    const b = sealLicenseFile(keys, license);

    expect(a.encryptedLicenseKey?.iv).not.toBe(b.encryptedLicenseKey?.iv);
  });

  it.each([
    ['a changed status', { status: 'expired' }],
    ['a later expiry', { expiresAt: '2099-01-01T00:00:00.000Z' }],
    [
      'a swapped key',
      { encryptedLicenseKey: sealLicenseFile(keys, { ...license, licenseKey: 'OTHER' }).encryptedLicenseKey },
    ],
    ['a missing signature', { signature: undefined }],
  ])('is ignored, as if absent, after %s', (_, change) => {
    const tampered = { ...sealLicenseFile(keys, license), ...change };

    expect(openLicenseFile(keys, tampered)).toBeUndefined();
  });

  it('does not open on another machine or with another secret', () => {
    const sealed = sealLicenseFile(keys, license);

    expect(
      openLicenseFile(fileKeys('server-secret-0123456789abcdef0123456789', 'b'.repeat(32)), sealed),
    ).toBeUndefined();
    expect(
      openLicenseFile(fileKeys('another-secret-0123456789abcdef01234567', 'a'.repeat(32)), sealed),
    ).toBeUndefined();
  });

  it('reads a missing or garbled file as absent', async () => {
    const dir = fresh();
    expect(await loadLicenseFile(dir, keys)).toBeUndefined();
    writeFileSync(join(dir, LICENSE_FILE), '{"half": ');
    expect(await loadLicenseFile(dir, keys)).toBeUndefined();
  });

  it('leaves no temporary files behind', async () => {
    const dir = fresh();
    await saveLicenseFile(dir, keys, license);
    await saveLicenseFile(dir, keys, { ...license, status: 'grace_period' });

    expect(readdirSync(dir)).toEqual([LICENSE_FILE]);
  });
});

describe('machine id', () => {
  const never = async () => undefined;

  it('is made once, 32 hex characters, and kept', async () => {
    const dir = fresh();
    const first = await machineId(dir, never, new Date('2026-01-01T00:00:00Z'));
    const again = await machineId(dir, never);

    expect(first).toEqual({
      machineId: expect.stringMatching(/^[0-9a-f]{32}$/),
      createdAt: '2026-01-01T00:00:00.000Z',
      recovered: false,
    });
    expect(again).toEqual(first);
  });

  it('is recovered from the cache table when the file is lost, and the file rewritten', async () => {
    const dir = fresh();
    const recovered = await machineId(dir, async () => 'c'.repeat(32));

    expect(recovered).toMatchObject({ machineId: 'c'.repeat(32), recovered: true });
    expect(JSON.parse(readFileSync(join(dir, MACHINE_ID_FILE), 'utf8')).machineId).toBe('c'.repeat(32));
  });

  it('replaces a garbled file rather than trusting it', async () => {
    const dir = fresh();
    writeFileSync(join(dir, MACHINE_ID_FILE), '{"machineId": "../../etc"}');

    expect((await machineId(dir, never)).machineId).toMatch(/^[0-9a-f]{32}$/);
  });
});
