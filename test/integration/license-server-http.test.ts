import { randomBytes } from 'node:crypto';
import { newSigningKey, openLease } from '#lib/license/lease';
import { call } from '#test/support/http';
import { handler, resetLicenseServer } from '../../license-server/functions/license';
import { closeLicenseDatabase, licenseDatabase } from '../../license-server/lib/db';
import { issueLicense } from '../../license-server/lib/store';

process.env.LICENSE_SERVER_DATABASE_URL = process.env.DATABASE_URL;
process.env.LICENSE_SERVER_RATE_PER_KEY = '12';
const signing = newSigningKey();
process.env.LICENSE_SERVER_SIGNING_KEY = signing.privateKey;

afterAll(closeLicenseDatabase);

const post = (path: string, body: unknown) => call(handler, { method: 'POST', path, body, auth: null });

const issue = async (maxDeployments = 5) =>
  (
    await issueLicense(await licenseDatabase(), {
      email: 'owner@example.com',
      type: 'paid',
      maxDeployments,
      expiresAt: null,
    })
  ).licenseKey;

describe('license server over HTTP', () => {
  it('validates and activates with the SPEC bodies', async () => {
    const key = await issue();

    const before = await post('/api/license/validate', { licenseKey: key, machineId: 'm-1' });
    const activated = await post('/api/license/activate', {
      licenseKey: key,
      machineId: 'm-1',
      email: 'OWNER@example.com',
    });
    const after = await post('/api/license/validate', { licenseKey: key, machineId: 'm-1' });

    expect(before.body).toMatchObject({ valid: true, activated: false });
    expect(activated.body).toEqual({ success: true, message: 'License activated' });
    expect(after.body).toEqual({
      valid: true,
      activated: true,
      message: 'License is valid',
      type: 'paid',
      expiresAt: null,
    });
  });

  it('lets exactly 5 of 10 parallel machines activate against a limit of 5', async () => {
    const key = await issue(5);

    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        post('/api/license/activate', { licenseKey: key, machineId: `p-${i}`, email: 'owner@example.com' }),
      ),
    );

    expect(replies.filter((r) => r.body.success)).toHaveLength(5);
  });

  it('frees a slot on deactivate', async () => {
    const key = await issue(1);
    await post('/api/license/activate', { licenseKey: key, machineId: 'a', email: 'owner@example.com' });

    const freed = await post('/api/license/deactivate', {
      licenseKey: key,
      machineId: 'a',
      email: 'owner@example.com',
    });
    const moved = await post('/api/license/activate', {
      licenseKey: key,
      machineId: 'b',
      email: 'owner@example.com',
    });

    expect(freed.body.success).toBe(true);
    expect(moved.body).toEqual({ success: true, message: 'License activated' });
  });

  it.each([
    ['no license key', '/api/license/validate', {}, /licenseKey is required/],
    ['no machine id', '/api/license/activate', { licenseKey: 'K', email: 'a@b.co' }, /machineId is required/],
    ['an unknown field', '/api/license/validate', { licenseKey: 'K', admin: true }, /unknown field admin/],
    ['a body that is not an object', '/api/license/activate', [], /JSON object/],
  ])('answers %s with 400 and nothing internal', async (_, path, body, message) => {
    const reply = await post(path, body);

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
    expect(reply.text).not.toMatch(/SELECT|at .*\.ts/);
  });

  it('signs the answer to a request with a nonce: the lease echoes nonce, key and machine', async () => {
    const key = await issue();
    const nonce = randomBytes(16).toString('hex');

    const activated = await post('/api/license/activate', {
      licenseKey: key,
      machineId: 'signed-1',
      email: 'owner@example.com',
      nonce,
    });
    const validated = await post('/api/license/validate', { licenseKey: key, machineId: 'signed-1', nonce });

    for (const reply of [activated, validated]) {
      expect(openLease(reply.body.lease, [signing.trusted])).toMatchObject({
        nonce,
        machineId: 'signed-1',
        keyHash: expect.stringMatching(/^[0-9a-f]{64}$/),
        valid: true,
        activated: true,
        type: 'paid',
      });
      expect(openLease(reply.body.lease, [newSigningKey().trusted])).toBeUndefined();
    }
    expect((await post('/api/license/validate', { licenseKey: key, nonce: 'abc' })).body.message).toMatch(
      /nonce must be 32 lowercase hex/,
    );
  });

  it('limits requests per key with 429 and Retry-After', async () => {
    const key = await issue();
    const replies = [];
    for (let i = 0; i < 13; i++) replies.push(await post('/api/license/validate', { licenseKey: key }));

    expect(replies.slice(0, 12).every((r) => r.status === 200)).toBe(true);
    expect(replies[12]?.status).toBe(429);
    expect(Number(replies[12]?.headers['Retry-After'])).toBeGreaterThan(0);
    expect((await post('/api/license/validate', { licenseKey: await issue() })).status).toBe(200);
  });

  it('shares the limit between containers through the database, and stores no key in clear', async () => {
    const key = await issue();
    const statuses = [];
    for (let i = 0; i < 13; i++) {
      resetLicenseServer(); // every request lands on a freshly started container
      statuses.push((await post('/api/license/validate', { licenseKey: key })).status);
    }
    const { rows } = await (await licenseDatabase()).query('SELECT key FROM license_server.rate_limits');

    expect(statuses.filter((status) => status === 429)).toEqual([429]);
    expect(statuses[12]).toBe(429);
    expect(rows.length).toBeGreaterThan(0);
    expect(JSON.stringify(rows)).not.toContain(key);
  });
});
