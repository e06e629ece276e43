import pg from 'pg';
import { migrate } from '#lib/db/migrations';
import { newSigningKey, openLease, signingKey } from '#lib/license/lease';
import { newLicenseKey } from '../../license-server/lib/keys';
import {
  activate,
  deactivate,
  findLicense,
  issueLicense,
  revoke,
  STORE_MIGRATIONS,
  STORE_TARGET,
  validate,
} from '../../license-server/lib/store';

const db = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: 12 });

beforeAll(async () => {
  const client = await db.connect();
  try {
    await migrate(client, STORE_MIGRATIONS, STORE_TARGET);
  } finally {
    client.release();
  }
});
afterAll(() => db.end());

const NOW = new Date();
/** The clock and no signer: the store's own rules (signing is tested in test/security/licensee). */
const at = (now: Date = NOW) => ({ now, signer: undefined });
const seat = (now: Date = NOW) => ({ ...at(now), staleAfterMs: 72 * 3_600_000 });

const paid = (maxDeployments = 5) =>
  issueLicense(db, { email: 'Owner@Example.com', type: 'paid', maxDeployments, expiresAt: null });

describe('license keys', () => {
  it('are long, random and grouped for reading', () => {
    const keys = new Set(Array.from({ length: 1000 }, newLicenseKey));

    expect(keys.size).toBe(1000);
    for (const key of keys) expect(key).toMatch(/^DBA(-[0-9A-HJKMNP-TV-Z]{5}){5}$/);
  });
});

describe('license store', () => {
  it('validates a good key, with the email compared ignoring case and spaces', async () => {
    const license = await paid();

    expect(
      await validate(db, { licenseKey: license.licenseKey, email: '  owner@EXAMPLE.com ' }, at()),
    ).toEqual({
      valid: true,
      message: 'License is valid',
      type: 'paid',
      expiresAt: null,
    });
    expect(
      await validate(db, { licenseKey: license.licenseKey.toLowerCase(), machineId: 'm1' }, at()),
    ).toMatchObject({
      valid: true,
      activated: false,
    });
  });

  it('answers unknown and revoked keys the same way', async () => {
    const license = await paid();
    await revoke(db, license.licenseKey);

    const revoked = await validate(db, { licenseKey: license.licenseKey }, at());
    const unknown = await validate(db, { licenseKey: 'DBA-NOPE' }, at());

    expect(revoked).toEqual(unknown);
    expect(
      (
        await activate(
          db,
          { licenseKey: license.licenseKey, machineId: 'm', email: 'owner@example.com' },
          seat(),
        )
      ).message,
    ).toBe('Invalid license');
  });

  it('treats an expired license as invalid', async () => {
    const license = await issueLicense(db, {
      email: 'a@b.co',
      type: 'trial',
      maxDeployments: 5,
      expiresAt: new Date('2026-01-01T00:00:00Z'),
    });

    expect(
      (await validate(db, { licenseKey: license.licenseKey }, at(new Date('2026-01-02T00:00:00Z')))).valid,
    ).toBe(false);
    expect(
      (await validate(db, { licenseKey: license.licenseKey }, at(new Date('2025-12-31T00:00:00Z')))).valid,
    ).toBe(true);
  });

  it('activates, says Already activated for the same machine, and refuses another owner', async () => {
    const license = await paid();
    const input = { licenseKey: license.licenseKey, machineId: 'machine-a', email: 'owner@example.com' };

    expect(await activate(db, input, seat())).toEqual({ success: true, message: 'License activated' });
    expect(await findLicense(db, license.licenseKey)).not.toHaveProperty('licenseKey');
    expect(await activate(db, input, seat())).toEqual({ success: true, message: 'Already activated' });
    expect(await activate(db, { ...input, email: 'thief@example.com' }, seat())).toEqual({
      success: false,
      message: 'Email mismatch',
    });
    expect((await findLicense(db, license.licenseKey))?.activatedAt).toBeInstanceOf(Date);
  });

  it('activates exactly 5 of 10 machines racing for a limit of 5, every time', async () => {
    for (let run = 0; run < 5; run++) {
      const license = await paid(5);

      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          activate(
            db,
            { licenseKey: license.licenseKey, machineId: `race-${run}-${i}`, email: 'owner@example.com' },
            seat(),
          ),
        ),
      );

      expect(results.filter((r) => r.success)).toHaveLength(5);
      expect(results.filter((r) => !r.success).map((r) => r.message)).toEqual(
        Array(5).fill('Deployment limit reached. Deactivate an existing deployment first.'),
      );
      expect((await findLicense(db, license.licenseKey))?.machineIds).toHaveLength(5);
    }
  });

  it('frees a slot on deactivation, so another machine can activate', async () => {
    const license = await paid(1);
    const owner = 'owner@example.com';
    await activate(db, { licenseKey: license.licenseKey, machineId: 'old', email: owner }, seat());
    expect(
      (await activate(db, { licenseKey: license.licenseKey, machineId: 'new', email: owner }, seat()))
        .success,
    ).toBe(false);

    expect(await deactivate(db, { licenseKey: license.licenseKey, machineId: 'old', email: owner })).toEqual({
      success: true,
      message: 'Deployment deactivated',
    });
    expect(
      (await activate(db, { licenseKey: license.licenseKey, machineId: 'new', email: owner }, seat()))
        .success,
    ).toBe(true);
  });

  it('frees a slot not seen for 72 hours when another machine needs it, and says so', async () => {
    const license = await paid(1);
    const owner = 'owner@example.com';
    const t0 = new Date('2026-05-01T00:00:00Z');
    const later = (hours: number) => new Date(t0.getTime() + hours * 3_600_000);
    await activate(db, { licenseKey: license.licenseKey, machineId: 'gone', email: owner }, seat(t0));
    await validate(db, { licenseKey: license.licenseKey, machineId: 'gone' }, at(later(10)));

    const early = await activate(
      db,
      { licenseKey: license.licenseKey, machineId: 'new', email: owner },
      seat(later(81)),
    );
    const late = await activate(
      db,
      { licenseKey: license.licenseKey, machineId: 'new', email: owner },
      seat(later(83)),
    );

    expect(early.success).toBe(false);
    expect(late).toMatchObject({
      success: true,
      message: 'License activated',
      released: ['gone'],
      notice: expect.stringMatching(/not seen for 72 h/),
    });
    expect(
      (await validate(db, { licenseKey: license.licenseKey, machineId: 'gone' }, at(later(84)))).activated,
    ).toBe(false);
  });
});

describe('signed leases', () => {
  it('keep increasing their sequence when the database is restored from a backup', async () => {
    const { privateKey, trusted } = newSigningKey();
    const signer = signingKey(privateKey);
    const license = await paid();
    const ask = async () => {
      const answer = await validate(
        db,
        { licenseKey: license.licenseKey, machineId: 'm', nonce: '0'.repeat(32) },
        { now: new Date(), signer },
      );
      return openLease(answer.lease, [trusted])?.seq ?? Number.NaN;
    };
    const before = await ask();

    await db.query('ALTER SEQUENCE license_server.lease_seq RESTART WITH 1');
    const after = await ask();

    expect(after).toBeGreaterThan(before);
    expect(Number.isSafeInteger(after)).toBe(true);
  });
});
