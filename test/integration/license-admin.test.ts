import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const admin = (...args: string[]) =>
  promisify(execFile)(process.execPath, ['bin/license-admin.cjs', ...args], {
    env: { ...process.env, LICENSE_SERVER_DATABASE_URL: process.env.DATABASE_URL },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );

describe('license-admin (in a child process)', () => {
  it('issues a key, lists and shows it, and revokes it', async () => {
    const issued = await admin('issue', '--email', 'buyer@example.com', '--max-deployments', '3');
    const key = issued.stdout.trim();

    expect(issued.code).toBe(0);
    expect(key).toMatch(/^DBA(-[0-9A-Z]{5}){5}$/);
    const prefix = `${key.slice(0, 9)}…`;
    const list = (await admin('list')).stdout;
    expect(list).toContain(`${prefix}  buyer@example.com  paid  active  0/3  lifetime`);
    expect(list).not.toContain(key);
    const shown = JSON.parse((await admin('show', key)).stdout);
    expect(shown).toMatchObject({ keyPrefix: key.slice(0, 9), maxDeployments: 3, machineIds: [] });
    expect(JSON.stringify(shown)).not.toContain(key);
    const notThere = await admin('deactivate', key, 'machine-x');
    expect(notThere.code).toBe(1);
    expect(notThere.stderr).toMatch(/not activated/);
    expect((await admin('revoke', key)).stdout.trim()).toBe(`revoked ${key}`);
    expect((await admin('list')).stdout).toContain(`${prefix}  buyer@example.com  paid  revoked`);
  });

  it('issues a time-limited trial', async () => {
    const key = (
      await admin(
        'issue',
        '--email',
        't@example.com',
        '--type',
        'trial',
        '--expires-at',
        '2027-01-01T00:00:00Z',
      )
    ).stdout.trim();

    expect(JSON.parse((await admin('show', key)).stdout)).toMatchObject({
      type: 'trial',
      expiresAt: '2027-01-01T00:00:00.000Z',
    });
  });

  it('prints a new signing key pair and the public key line to compile in', async () => {
    const result = await admin('signing-key', 'new');

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^LICENSE_SERVER_SIGNING_KEY=[A-Za-z0-9+/=]{40,}$/m);
    expect(result.stdout).toMatch(/^ {2}\{ id: '[0-9a-f]{16}', publicKey: '[A-Za-z0-9_-]{43}' \},$/m);
  });

  it.each([
    [['issue'], /--email/],
    [['issue', '--email', 'a@b.co', '--type', 'trial'], /a trial needs --expires-at/],
    [['issue', '--email', 'a@b.co', '--expires-at', '2020-01-01T00:00:00Z'], /must be in the future/],
    [['issue', '--email', 'a@b.co', '--expires-at', 'soon'], /ISO 8601/],
    [['signing-key', 'old'], /signing-key new/],
    [['issue', '--email', 'a@b.co', '--type', 'gold'], /--type must be paid or trial/],
    [['issue', '--email', 'a@b.co', '--max-deployments', '0'], /positive whole number/],
    [['show', 'DBA-NOPE'], /existing license/],
    [['deactivate', 'DBA-NOPE'], /KEY MACHINE_ID/],
    [['deactivate'], /KEY MACHINE_ID/],
    [['frobnicate'], /unknown command frobnicate/],
  ])('refuses %j with usage help and exit 2', async (args, message) => {
    const result = await admin(...args);

    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(message);
  });
});
