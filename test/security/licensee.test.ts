import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { getConfig } from '#lib/config';
import { newSigningKey, openLease, signingKey, signLease } from '#lib/license/lease';
import { fileKeys, LICENSE_FILE, loadLicenseFile, saveLicenseFile } from '#lib/license/license-file';
import { DAY, HOUR } from '#lib/license/state';
import { paidLicenseFile } from '#test/support/license-file';
import { LicensingHarness, randomMachineId } from '#test/support/licensing';

/**
 * The licensee owns the disk, the database, the clock and the network. Each test is one way to a
 * free license that once worked (or would without the defence): files, cache rows and machine ids
 * edited, clocks rolled back, answers forged, replayed or left unsigned.
 */
const h = new LicensingHarness();
const file = () => join(h.dataDir, LICENSE_FILE);
const machineIdFile = () => join(h.dataDir, 'machine-id.json');

beforeAll(() => h.start());
afterAll(() => h.close());
afterEach(() => {
  h.server.intercept = undefined;
  h.server.sign(true);
});

describe('the trial cannot be renewed', () => {
  it('by writing a new machine id', async () => {
    await h.deploy();
    const started = await h.post('/api/trial/start', { email: 'me@example.com' });
    expect(started.status).toBe(200);

    writeFileSync(
      machineIdFile(),
      JSON.stringify({ machineId: randomMachineId(), createdAt: h.T0.toISOString(), recovered: false }),
    );
    await h.deploy({ dir: h.dataDir });

    expect(await h.status()).toMatchObject({ status: 'trial', trialExpiresAt: started.body.trialExpiresAt });
    expect((await h.post('/api/trial/start', { email: 'me@example.com' })).status).toBe(400);
  });

  it('by deleting every local file and the cache rows', async () => {
    await h.deploy();
    const started = await h.post('/api/trial/start', { email: 'me@example.com' });
    rmSync(file());
    rmSync(machineIdFile());
    await h.db.query('DELETE FROM _dbadmin.license_cache');
    await h.deploy({ dir: h.dataDir });

    expect((await h.post('/api/trial/start', { email: 'me@example.com' })).status).toBe(400);
    expect(await h.status()).toMatchObject({ status: 'trial', trialExpiresAt: started.body.trialExpiresAt });
  });

  it('by deleting the database record while the file remains', async () => {
    await h.deploy();
    await h.post('/api/trial/start', { email: 'me@example.com' });
    await h.db.query('DELETE FROM _dbadmin.trial');
    await h.deploy({ dir: h.dataDir });

    expect((await h.post('/api/trial/start', { email: 'me@example.com' })).status).toBe(400);
  });
});

describe('nothing local grants a license', () => {
  it('not a cache row rewritten to a lifetime paid license validated in the future', async () => {
    await h.deploy();
    const machineId = await (await h.deploy({ dir: h.dataDir })).machineId();
    await h.db.query(
      `INSERT INTO _dbadmin.license_cache (machine_id, license_key_hash, license_type, expires_at, last_validated_at, status)
       VALUES ($1, repeat('a', 64), 'paid', NULL, '2100-01-01', 'active')`,
      [machineId],
    );
    await h.deploy({ dir: h.dataDir });

    const status = await h.status();
    expect(status.valid).toBe(false);
    expect(status.status).not.toBe('active');
  });

  it('not a license file forged with DBADMIN_SECRET', async () => {
    await h.deploy();
    const licensing = await h.deploy({ dir: h.dataDir });
    const keys = fileKeys((await getConfig()).DBADMIN_SECRET, await licensing.machineId());
    await saveLicenseFile(h.dataDir, keys, {
      licenseKey: 'DBA-FORGE-FORGE-FORGE-FORGE-FORGE',
      email: 'me@example.com',
      type: 'paid',
      valid: true,
      status: 'active',
      expiresAt: null,
      daysRemaining: null,
      lastValidatedAt: '2100-01-01T00:00:00.000Z',
      lastSavedAt: h.T0.toISOString(),
    });
    await h.offline(async () => {
      await h.deploy({ dir: h.dataDir });
      const status = await h.status();
      expect(status.valid).toBe(false);
      expect(status.status).toBe('expired');
    });
  });

  it('a lastValidatedAt in the future is stale: the server is asked, and its revocation counts', async () => {
    const key = await h.activated();
    const machineId = await (await h.deploy({ dir: h.dataDir })).machineId();
    await h.db.query(
      `UPDATE _dbadmin.license_cache SET last_validated_at = '2100-01-01' WHERE machine_id = $1`,
      [machineId],
    );
    await h.server.revoke(key);
    h.at(13 * HOUR);
    await h.deploy({ dir: h.dataDir });

    expect((await h.status()).status).toBe('invalid');
  });
});

describe('revocation', () => {
  it('survives a restart within 12 hours, with the server unreachable', async () => {
    const key = await h.activated();
    await h.server.revoke(key);
    h.at(HOUR);
    expect((await h.post('/api/license/refresh')).body.status).toBe('invalid');

    await h.offline(async () => {
      await h.deploy({ dir: h.dataDir });
      expect((await h.status()).status).toBe('invalid');
    });
  });

  it('is not undone by restoring the license file saved before it', async () => {
    const key = await h.activated();
    await expectRevocationOutlivesRestoredFile(key);
  });
});

/** Revokes `key`, sees it refused, puts back the file saved before, and is still refused offline. */
async function expectRevocationOutlivesRestoredFile(key: string): Promise<void> {
  const before = readFileSync(file(), 'utf8');
  await h.server.revoke(key);
  h.at(HOUR);
  expect((await h.post('/api/license/refresh')).body.status).toBe('invalid');

  writeFileSync(file(), before);
  await h.offline(async () => {
    await h.deploy({ dir: h.dataDir });
    expect((await h.status()).status).toBe('invalid');
  });
}

describe('revocation by a server that does not sign', () => {
  it('is not undone by restoring the license file that recorded the unsigned validation', async () => {
    h.server.sign(false);
    await h.deploy();
    const key = await h.server.issue('owner@example.com');
    await h.post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });
    await expectRevocationOutlivesRestoredFile(key);
  });
});

describe('the clock', () => {
  it('rolled back more than 5 minutes behind the last signed time makes the license invalid', async () => {
    await h.activated();
    h.at(3 * DAY);
    expect((await h.post('/api/license/refresh')).body.status).toBe('active');

    h.at(3 * DAY - 6 * 60_000);
    await h.deploy({ dir: h.dataDir });
    const status = await h.status();
    expect(status.status).toBe('invalid');
    expect(status.warning).toMatch(/clock rollback/);
  });

  it('rolled back within the fresh window after running for hours, then restarted, is caught', async () => {
    await h.activated();
    h.at(10 * HOUR);
    expect((await h.status()).status).toBe('active'); // running: time seen is kept each minute

    h.at(HOUR); // still "fresh" against the lease's server time
    await h.deploy({ dir: h.dataDir });

    expect((await h.status()).warning).toMatch(/clock rollback/);
  });

  it('rolled back to the start of a trial, then restarted, does not give the days back', async () => {
    await h.deploy();
    expect((await h.post('/api/trial/start', { email: 'me@example.com' })).status).toBe(200);
    h.at(13 * DAY);
    expect((await h.status()).status).toBe('trial');

    h.at(HOUR);
    await h.deploy({ dir: h.dataDir });
    const status = await h.status();

    expect(status.valid).toBe(false);
    expect(status.warning).toMatch(/clock rollback/);
  });

  it('a high-water mark of infinity in the cache row is tampering, not a crash', async () => {
    await h.activated();
    await h.db.query(`UPDATE _dbadmin.license_cache SET high_water = 'infinity'`);
    await h.deploy({ dir: h.dataDir });

    const reply = await h.post('/api/license/refresh');
    expect(reply.status).toBe(200);
    expect(reply.body.warning).toMatch(/clock rollback/);
  });

  it('behind PostgreSQL’s own clock makes the license invalid', async () => {
    await h.activated();
    // The test clock stands in 2026-03; PostgreSQL's clock is the real one, later.
    await h.deploy({ dir: h.dataDir, realDatabaseClock: true });

    expect((await h.status()).warning).toMatch(/clock rollback/);
  });
});

describe('grace is measured from the signed lease', () => {
  it('ends exactly at notAfter: 1 ms before is grace, 1 ms after is expired', async () => {
    await h.activated();
    const lease = JSON.parse(readFileSync(file(), 'utf8')).lease;
    const notAfter = Date.parse(JSON.parse(lease.payload).notAfter);
    expect(notAfter).toBe(h.T0.getTime() + 7 * DAY);
    await h.offline(async () => {
      h.now = new Date(notAfter - 1);
      expect((await h.status()).status).toBe('grace_period');
      h.now = new Date(notAfter + 1);
      await h.deploy({ dir: h.dataDir });
      expect((await h.status()).status).toBe('expired');
    });
  });

  it('no local field moves it: a rewritten lastValidatedAt does not extend grace', async () => {
    await h.activated();
    const machineId = await (await h.deploy({ dir: h.dataDir })).machineId();
    await h.offline(async () => {
      h.at(8 * DAY);
      await h.db.query(`UPDATE _dbadmin.license_cache SET last_validated_at = $2 WHERE machine_id = $1`, [
        machineId,
        h.now,
      ]);
      await h.deploy({ dir: h.dataDir });
      expect((await h.status()).status).toBe('expired');
    });
  });
});

describe('answers that are not our server’s', () => {
  /** A license seen signed, then the next answer tampered with; 13 hours on so the server is asked. */
  async function tamperedRefresh(tamper: (body: any) => any) {
    await h.activated();
    h.at(13 * HOUR);
    h.server.intercept = (body, path) => (path.endsWith('/validate') ? tamper(body) : body);
    return (await h.post('/api/license/refresh')).body;
  }

  it('an unsigned answer after a signed one is refused (downgrade)', async () => {
    const status = await tamperedRefresh(({ lease: _, ...body }) => body);
    expect(status.status).toBe('grace_period');
    expect(status.warning).toMatch(/unsigned/);
  });

  it('an answer signed by a foreign key is refused', async () => {
    const foreign = signingKey(newSigningKey().privateKey);
    const status = await tamperedRefresh((body) => ({
      ...body,
      lease: signLease(foreign, { ...JSON.parse(body.lease.payload) }),
    }));
    expect(status.status).toBe('grace_period');
    expect(status.warning).toMatch(/trusted key/);
  });

  it('a replayed answer (signed, but for another nonce) is refused', async () => {
    let captured: any;
    await h.activated();
    h.at(13 * HOUR);
    h.server.intercept = (body) => {
      captured ??= body;
      return body;
    };
    expect((await h.post('/api/license/refresh')).body.status).toBe('active');
    h.server.intercept = (body, path) => (path.endsWith('/validate') ? captured : body);
    h.at(26 * HOUR);

    const status = (await h.post('/api/license/refresh')).body;
    expect(status.status).toBe('grace_period');
  });

  it('a payload field changed under a good signature is refused', async () => {
    const status = await tamperedRefresh((body) => {
      const payload = JSON.parse(body.lease.payload);
      return {
        ...body,
        lease: {
          ...body.lease,
          payload: JSON.stringify({ ...payload, notAfter: '2100-01-01T00:00:00.000Z' }),
        },
      };
    });
    expect(status.status).toBe('grace_period');
    expect(status.gracePeriodEndsAt).toBe(new Date(h.T0.getTime() + 7 * DAY).toISOString());
  });

  it('an unsigned server is usable but reported verified: false, and not in strict mode', async () => {
    h.server.sign(false);
    await h.deploy();
    const key = await h.server.issue('owner@example.com');
    await h.post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });
    expect(await h.status()).toMatchObject({ status: 'active', verified: false });

    await h.deploy({ env: { LICENSE_ENFORCEMENT: 'strict' } });
    const refused = await h.post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });
    expect(refused.body.success).toBe(false);
    expect(refused.body.message).toMatch(/signed/);
  });

  it('a recorded unsigned validation counts for nothing in strict mode, even one written to look fresh', async () => {
    const licensing = await h.deploy();
    const key = await h.server.issue('owner@example.com');
    const keys = fileKeys((await getConfig()).DBADMIN_SECRET, await licensing.machineId());
    h.at(2 * DAY);
    await saveLicenseFile(h.dataDir, keys, { ...paidLicenseFile(key, h.now.toISOString()), lease: null });
    await h.offline(async () => {
      await h.deploy({ dir: h.dataDir });
      // In warn mode requests proceed whatever the file says: it is reported, never verified.
      expect(await h.status()).toMatchObject({ verified: false });

      await h.deploy({ dir: h.dataDir, env: { LICENSE_ENFORCEMENT: 'strict' } });
      expect(await h.status()).toMatchObject({ status: 'expired', valid: false, lastValidatedAt: null });
    });
  });

  it('an unsigned validation written beside a signed lease does not count, across a restart', async () => {
    await h.activated();
    const machineId = await (await h.deploy({ dir: h.dataDir })).machineId();
    const keys = fileKeys((await getConfig()).DBADMIN_SECRET, machineId);
    const saved = await loadLicenseFile(h.dataDir, keys);
    if (!saved) throw new Error('no license file after activation');
    h.at(8 * DAY);
    await saveLicenseFile(h.dataDir, keys, { ...saved, lease: null, lastValidatedAt: h.now.toISOString() });

    await h.offline(async () => {
      await h.deploy({ dir: h.dataDir });
      expect(await h.status()).toMatchObject({ status: 'expired', valid: false, verified: true });
    });
  });

  it('an unsigned server answering a date that is not one is unreadable, not a crash', async () => {
    h.server.sign(false);
    await h.deploy();
    const key = await h.server.issue('owner@example.com');
    h.server.intercept = (body, path) => (path.endsWith('/validate') ? { ...body, expiresAt: 'soon' } : body);

    const reply = await h.post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });

    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ success: false, message: 'Unable to connect to license server' });
    expect((await h.post('/api/license/refresh')).status).toBe(200);
  });

  it('the lease names the key by hash, the machine and the nonce, and verifies only with our key', async () => {
    await h.activated();
    const { lease } = JSON.parse(readFileSync(file(), 'utf8'));
    const payload = openLease(lease, h.server.trustedKeys);
    expect(payload).toMatchObject({ valid: true, activated: true, type: 'paid', seq: expect.any(Number) });
    expect(payload?.nonce).toMatch(/^[0-9a-f]{32}$/);
    const other = generateKeyPairSync('ed25519').publicKey.export({ format: 'jwk' }).x as string;
    expect(openLease(lease, [{ id: lease.keyId, publicKey: other }])).toBeUndefined();
  });
});

describe('the license server', () => {
  it('gives exactly 5 slots to 10 machines racing for them', async () => {
    await h.deploy();
    const key = await h.server.issue('owner@example.com', { maxDeployments: 5 });
    const { licenseServerClient } = await import('#lib/license/server-client');
    const client = licenseServerClient({ url: h.server.url, caFile: h.server.tls.caFile });

    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        client.activate({ licenseKey: key, machineId: randomMachineId(), email: 'owner@example.com' }),
      ),
    );

    expect(answers.filter((a) => a.success)).toHaveLength(5);
    expect(answers.filter((a) => !a.success).map((a) => a.message)).toEqual(
      Array(5).fill('Deployment limit reached. Deactivate an existing deployment first.'),
    );
  });
});
