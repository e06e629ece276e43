import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { handler as license } from '#functions/license';
import { handler as tables } from '#functions/tables';
import { loadConfig, resetConfig } from '#lib/config';
import { closePool } from '#lib/db/pool';
import { createLicensing, setLicensing } from '#lib/license/index';
import type { Licensing } from '#lib/license/licensing';
import { licenseServerClient } from '#lib/license/server-client';
import { DAY, HOUR } from '#lib/license/state';
import { call } from '#test/support/http';
import { LicensingHarness } from '#test/support/licensing';

const h = new LicensingHarness();
const server = h.server;
const T0 = h.T0;
const setNow = (date: Date) => {
  h.now = date;
};
let dataDir: string;

beforeAll(() => h.start());
afterAll(async () => {
  await h.close();
  await closePool();
});

/** A fresh deployment, or with `dir` a restart of one; the clock at T0 for a fresh one. */
async function deploy(options: { dir?: string; env?: Record<string, string> } = {}): Promise<Licensing> {
  const licensing = await h.deploy(options);
  dataDir = h.dataDir;
  return licensing;
}

const status = h.status;
const post = (path: string, body: unknown) => h.post(path, body);
const gated = h.gated;

describe('before any license', () => {
  it('is none, and requests proceed with a warning header so activation stays possible', async () => {
    await deploy();

    expect(await status()).toMatchObject({ valid: false, status: 'none', type: null });
    const reply = await gated();
    expect(reply.status).toBe(200);
    expect(reply.headers['X-License-Status']).toBe('none');
    expect(reply.headers['X-License-Warning']).toMatch(/no license/);
  });
});

describe('trial', () => {
  it('starts once for 14 days, and deleting the file neither resets nor extends it', async () => {
    await deploy();

    const started = await post('/api/trial/start', { email: 'me@example.com' });
    expect(started.status).toBe(200);
    expect(started.body).toEqual({
      success: true,
      message: expect.any(String),
      trialExpiresAt: new Date(T0.getTime() + 14 * DAY).toISOString(),
    });
    expect(await status()).toMatchObject({ valid: true, status: 'trial', type: 'trial', daysRemaining: 14 });
    expect((await call(license, { path: '/api/trial/status', auth: null })).body).toEqual({
      active: true,
      trialExpiresAt: started.body.trialExpiresAt,
      daysRemaining: 14,
      email: 'me@example.com',
    });

    const again = await post('/api/trial/start', { email: 'me@example.com' });
    expect(again.status).toBe(400);

    rmSync(join(dataDir, 'license.json'));
    await deploy({ dir: dataDir });
    expect(await status()).toMatchObject({ status: 'trial', trialExpiresAt: started.body.trialExpiresAt });
    expect((await post('/api/trial/start', { email: 'other@example.com' })).status).toBe(400);
  });

  it('expires after 14 days; strict enforcement then answers 402 on gated endpoints only', async () => {
    const licensing = await deploy({ env: { LICENSE_ENFORCEMENT: 'strict' } });
    await post('/api/trial/start', { email: 'me@example.com' });
    setNow(new Date(T0.getTime() + 14 * DAY));
    process.env.LICENSE_ENFORCEMENT = 'strict';
    resetConfig();
    try {
      expect((await licensing.state()).status).toBe('expired');
      const refused = await gated();
      expect(refused.status).toBe(402);
      expect(refused.body.error).toBe('License required');
      expect(refused.headers['X-License-Status']).toBe('expired');
      expect((await call(license, { path: '/api/license/status', auth: null })).status).toBe(200);
      // Freeing this deployment's slot must stay possible, as activating does.
      const deactivated = await call(license, { method: 'POST', path: '/api/license/deactivate', body: {} });
      expect([deactivated.status, deactivated.body.error]).toEqual([400, 'Not activated']);
    } finally {
      delete process.env.LICENSE_ENFORCEMENT;
      resetConfig();
    }
  });

  it('under strict enforcement, signs in before the gate: 401 first, then 402 after one statement', async () => {
    await deploy({ env: { LICENSE_ENFORCEMENT: 'strict' } });
    process.env.LICENSE_ENFORCEMENT = 'strict';
    resetConfig();
    // Called through: every statement the pools send, by its prepared name or its text.
    const spy = jest.spyOn(pg.Client.prototype, 'query');
    const sent = () =>
      spy.mock.calls.map(([config]) =>
        typeof config === 'string' ? config : ((config as { name?: string; text?: string }).name ?? ''),
      );
    try {
      // Wrong credentials: the caller learns nothing of the license.
      const stranger = await call(tables, { path: '/api/tables', auth: { user: 'someone', pass: 'wrong' } });
      expect(stranger.status).toBe(401);

      await h.gated(); // the license's traces read once, as on any container's first request
      spy.mockClear();
      const refused = await h.gated();
      expect(refused.status).toBe(402);
      // One statement: the sign-in read with the route's catalog read carried in it (no round trip
      // of its own); the gate, deciding from memory, refuses before anything else runs.
      expect(sent()).toEqual([expect.stringMatching(/^dbadmin\.sign-in\+/)]);
      expect(JSON.stringify(refused.body)).not.toMatch(/tables/);
    } finally {
      spy.mockRestore();
      delete process.env.LICENSE_ENFORCEMENT;
      resetConfig();
    }
  });

  it('requires an email', async () => {
    await deploy();

    const reply = await post('/api/trial/start', {});
    expect(reply.status).toBe(400);
    expect(reply.body.message).toBe('email is required');
  });
});

describe('activation', () => {
  it('activates through the API and keeps the key only encrypted', async () => {
    await deploy();
    const KEY_PAID_0001 = await server.issue('owner@example.com');

    const reply = await post('/api/license/activate', {
      licenseKey: KEY_PAID_0001,
      email: ' Owner@Example.com ',
    });

    expect(reply.body).toEqual({ valid: true, success: true, message: 'License activated' });
    expect(await status()).toMatchObject({ valid: true, status: 'active', type: 'paid', expiresAt: null });
    expect(readFileSync(join(dataDir, 'license.json'), 'utf8')).not.toContain(KEY_PAID_0001);
    const again = await post('/api/license/activate', {
      licenseKey: KEY_PAID_0001,
      email: 'owner@example.com',
    });
    expect(again.body).toEqual({ valid: true, success: true, message: 'Already activated' });
  });

  it.each([
    ['an unknown key', false, 'owner@example.com', 'Invalid license'],
    ['another owner', true, 'thief@example.com', 'Email mismatch'],
  ])('refuses %s with the server message', async (_, known, email, message) => {
    await deploy();
    const key = known ? await server.issue('owner@example.com') : 'DBA-NOPE-NOPE';

    const reply = await post('/api/license/activate', { licenseKey: key, email });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ valid: false, success: false, message });
    expect((await status()).status).toBe('none');
  });

  it('reports the deployment limit', async () => {
    const KEY_SMALL = await server.issue('owner@example.com', { maxDeployments: 1 });
    await deploy();
    expect(
      (await post('/api/license/activate', { licenseKey: KEY_SMALL, email: 'owner@example.com' })).body
        .success,
    ).toBe(true);
    await deploy();

    const reply = await post('/api/license/activate', {
      licenseKey: KEY_SMALL,
      email: 'owner@example.com',
    });

    expect(reply.body).toEqual({
      valid: true,
      success: false,
      message: 'Deployment limit reached. Deactivate an existing deployment first.',
    });
  });

  it('moves a license: deactivate the old deployment at the server, then activate the new one', async () => {
    const key = await server.issue('owner@example.com', { maxDeployments: 1 });
    const oldDeployment = await deploy();
    await post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });
    const oldMachine = await oldDeployment.machineId();
    await deploy();
    const refused = await post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });

    const freed = await licenseServerClient({ url: server.url, caFile: server.tls.caFile }).deactivate({
      licenseKey: key,
      machineId: oldMachine,
      email: 'owner@example.com',
    });
    const moved = await post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });

    expect(refused.body.message).toBe('Deployment limit reached. Deactivate an existing deployment first.');
    expect(freed).toEqual({ success: true, message: 'Deployment deactivated' });
    expect(moved.body).toEqual({ valid: true, success: true, message: 'License activated' });
  });

  it('says when the server cannot be reached or is not configured', async () => {
    await deploy({ env: { LICENSE_SERVER_URL: 'https://127.0.0.1:1' } });
    expect((await post('/api/license/validate', { licenseKey: 'K' })).body).toMatchObject({
      valid: false,
      message: 'Unable to connect to license server',
    });

    const config = await loadConfig({ ...process.env, LICENSE_DATA_DIR: dataDir });
    setLicensing(createLicensing(config, h.db, { clock: h.clock, databaseClock: h.clock }));
    expect((await post('/api/license/activate', { licenseKey: 'K', email: 'a@b.co' })).body).toEqual({
      valid: false,
      success: false,
      message: 'LICENSE_SERVER_URL not configured',
    });
  });

  it('validates without activating', async () => {
    await deploy();
    const KEY_CHECK = await server.issue('owner@example.com', {
      type: 'trial',
      expiresAt: '2026-12-31T00:00:00.000Z',
    });

    const reply = await post('/api/license/validate', {
      licenseKey: KEY_CHECK,
      email: 'owner@example.com',
    });

    expect(reply.body).toEqual({
      valid: true,
      message: 'License is valid',
      type: 'trial',
      expiresAt: '2026-12-31T00:00:00.000Z',
    });
    expect((await status()).status).toBe('none');
    expect((await post('/api/license/validate', {})).status).toBe(400);
  });
});

describe('at run time', () => {
  /** A fresh deployment with a newly issued paid license activated; answers the key. */
  async function activated(): Promise<string> {
    await deploy();
    const key = await server.issue('owner@example.com');
    await post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });
    return key;
  }

  it('asks the license server nothing while the last check is under 12 hours old', async () => {
    await activated();
    const before = server.requests;
    setNow(new Date(T0.getTime() + 12 * HOUR - 1));

    for (let i = 0; i < 20; i++) expect((await gated()).headers['X-License-Status']).toBe('active');
    expect(server.requests).toBe(before);
  });

  it('revalidates after 12 hours and notices a revocation', async () => {
    const key = await activated();
    await server.revoke(key);
    setNow(new Date(T0.getTime() + 12 * HOUR));

    const reply = await gated();

    expect(reply.headers['X-License-Status']).toBe('invalid');
    expect((await status()).valid).toBe(false);
  });

  it('works offline within 7 days (grace, with a warning) and is expired beyond', async () => {
    await activated();
    await server.stop();
    try {
      setNow(new Date(T0.getTime() + 2 * DAY));
      const within = await gated();
      expect(within.status).toBe(200);
      expect(within.headers['X-License-Status']).toBe('grace_period');
      expect(within.headers['X-License-Warning']).toMatch(/unreachable/);
      expect(await status()).toMatchObject({
        gracePeriodEndsAt: new Date(T0.getTime() + 7 * DAY).toISOString(),
      });

      setNow(new Date(T0.getTime() + 8 * DAY));
      expect((await status()).status).toBe('expired');
    } finally {
      await server.start();
    }
  });

  /** Activated against a server that follows SPEC.md only (no signature), then the server stops. */
  async function activatedUnsigned(): Promise<void> {
    server.sign(false);
    try {
      await activated();
    } finally {
      server.sign(true);
    }
    await server.stop();
  }

  it('works offline within 7 days after an unsigned validation (warn), also after a restart, and is expired beyond', async () => {
    await activatedUnsigned();
    try {
      const graceFromActivation = {
        status: 'grace_period',
        valid: true,
        verified: false,
        lastValidatedAt: T0.toISOString(),
        gracePeriodEndsAt: new Date(T0.getTime() + 7 * DAY).toISOString(),
      };
      setNow(new Date(T0.getTime() + 2 * DAY));
      const within = await gated();
      expect(within.status).toBe(200);
      expect(within.headers['X-License-Status']).toBe('grace_period');
      expect(await status()).toMatchObject(graceFromActivation);

      await deploy({ dir: dataDir });
      expect(await status()).toMatchObject(graceFromActivation);

      setNow(new Date(T0.getTime() + 7 * DAY + 1));
      expect(await status()).toMatchObject({ status: 'expired', valid: false, verified: false });
      await deploy({ dir: dataDir });
      expect(await status()).toMatchObject({
        status: 'expired',
        valid: false,
        verified: false,
        lastValidatedAt: T0.toISOString(),
      });
    } finally {
      await server.start();
    }
  });

  it('in strict mode, an unsigned validation recorded in warn mode gives neither a fresh check nor grace', async () => {
    await activatedUnsigned();
    try {
      for (const offset of [HOUR, 2 * DAY]) {
        setNow(new Date(T0.getTime() + offset));
        await deploy({ dir: dataDir, env: { LICENSE_ENFORCEMENT: 'strict' } });
        expect(await status()).toMatchObject({
          status: 'expired',
          valid: false,
          lastValidatedAt: null,
          gracePeriodEndsAt: null,
        });
      }
    } finally {
      await server.start();
    }
    // The server back, still unsigned: strict mode counts none of its answers.
    server.sign(false);
    try {
      await deploy({ dir: dataDir, env: { LICENSE_ENFORCEMENT: 'strict' } });
      expect((await post('/api/license/refresh', undefined)).body).toMatchObject({
        status: 'expired',
        lastValidatedAt: null,
      });
    } finally {
      server.sign(true);
    }
  });

  it('in strict mode, lets requests through an unreachable server in development only', async () => {
    await activated();
    await server.stop();
    setNow(new Date(T0.getTime() + 8 * DAY));
    try {
      for (const [nodeEnv, expected] of [
        ['development', 200],
        ['production', 402],
      ] as const) {
        Object.assign(process.env, { LICENSE_ENFORCEMENT: 'strict', NODE_ENV: nodeEnv });
        resetConfig();
        expect((await gated()).status).toBe(expected);
      }
    } finally {
      Object.assign(process.env, { NODE_ENV: 'test' });
      delete process.env.LICENSE_ENFORCEMENT;
      resetConfig();
      await server.start();
    }
  });

  it('notices an activation by another process (the CLI) within a minute, without a file watcher', async () => {
    const running = await deploy();
    expect((await running.state()).status).toBe('none');
    const KEY_CLI = await server.issue('owner@example.com');

    const cli = createLicensing(
      await loadConfig({
        ...process.env,
        LICENSE_SERVER_URL: server.url,
        LICENSE_SERVER_CA_FILE: server.tls.caFile,
        LICENSE_DATA_DIR: dataDir,
      }),
      h.db,
      { clock: h.clock, databaseClock: h.clock, trustedKeys: server.trustedKeys },
    );
    expect((await cli.activate(KEY_CLI, 'owner@example.com')).success).toBe(true);

    setNow(new Date(T0.getTime() + 59_999));
    expect((await running.state()).status).toBe('none');
    setNow(new Date(T0.getTime() + 60_000));
    expect((await running.state()).status).toBe('active');
  });

  it('refresh reads the license data again and asks the server now', async () => {
    const running = await deploy();
    const key = await server.issue('owner@example.com');
    const cli = await h.deploy({ dir: dataDir });
    expect((await cli.activate(key, 'owner@example.com')).success).toBe(true);
    setLicensing(running);
    const before = server.requests;

    const refreshed = await post('/api/license/refresh', undefined);

    expect(refreshed.status).toBe(200);
    expect(refreshed.body).toMatchObject({
      status: 'active',
      verified: true,
      lastValidatedAt: T0.toISOString(),
    });
    expect(server.requests).toBe(before + 1);
  });

  it('refresh asks the server now (a revocation shows at once), then at most once every 10 s', async () => {
    const key = await server.issue('owner@example.com');
    await deploy();
    await post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });
    expect((await h.status()).status).toBe('active'); // as the console does after activating
    await server.revoke(key);
    const before = server.requests;
    setNow(new Date(T0.getTime() + 1_000));

    const first = await post('/api/license/refresh', undefined);
    setNow(new Date(T0.getTime() + 10_999));
    await post('/api/license/refresh', undefined);
    const throttled = server.requests;
    setNow(new Date(T0.getTime() + 11_000));
    await post('/api/license/refresh', undefined);

    expect(first.body.status).toBe('invalid');
    expect(throttled).toBe(before + 1);
    expect(server.requests).toBe(before + 2);
  });

  it('deactivates its own machine with admin credentials, freeing the slot', async () => {
    const key = await server.issue('owner@example.com', { maxDeployments: 1 });
    await deploy();
    await post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' });

    const anonymous = await h.post('/api/license/deactivate');
    const freed = await h.postAsAdmin('/api/license/deactivate');

    expect(anonymous.status).toBe(401);
    expect(freed.body).toEqual({ success: true, message: 'Deployment deactivated' });
    expect((await status()).status).toBe('none');
    expect((await h.postAsAdmin('/api/license/deactivate')).status).toBe(400);
    await deploy();
    expect(
      (await post('/api/license/activate', { licenseKey: key, email: 'owner@example.com' })).body.success,
    ).toBe(true);
  });

  it('recovers a lost machine id from the cache table, marked recovered', async () => {
    await activated();
    const { machineId } = JSON.parse(readFileSync(join(dataDir, 'machine-id.json'), 'utf8'));
    rmSync(join(dataDir, 'machine-id.json'));
    rmSync(join(dataDir, 'license.json'));

    const recovered = await deploy({ dir: dataDir });

    expect(await recovered.machineId()).toBe(machineId);
    expect(JSON.parse(readFileSync(join(dataDir, 'machine-id.json'), 'utf8'))).toMatchObject({
      machineId,
      recovered: true,
    });
    const row = await h.db.query('SELECT license_type FROM _dbadmin.license_cache WHERE machine_id = $1', [
      machineId,
    ]);
    expect(row.rows[0].license_type).toBe('paid');
  });

  it('ignores a tampered license file', async () => {
    await activated();
    const file = JSON.parse(readFileSync(join(dataDir, 'license.json'), 'utf8'));
    writeFileSync(
      join(dataDir, 'license.json'),
      JSON.stringify({ ...file, type: 'trial', expiresAt: '2099-01-01T00:00:00.000Z' }),
    );

    const reread = await deploy({ dir: dataDir });

    // The file is discarded; the cache table still knows a paid license was validated at T0.
    expect((await reread.state()).type).toBe('paid');
  });
});
