import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { handler as activateFunction } from '#functions/activate-license';
import { loadConfig, resetConfig } from '#lib/config';
import { closePool, getDatabase } from '#lib/db/pool';
import { activateFromEnvironment } from '#lib/license/activation';
import { createLicensing } from '#lib/license/index';
import { logger } from '#lib/log';
import { lambdaContext } from '#test/support/http';
import { TestLicenseServer } from '#test/support/license-server';
import { licenseDatabase } from '../../license-server/lib/db';
import { findLicense } from '../../license-server/lib/store';

const server = new TestLicenseServer();
beforeAll(() => server.start());
afterAll(async () => {
  await server.close();
  await closePool();
});

const freshDir = () => mkdtempSync(join(tmpdir(), 'dbadmin-activation-'));

describe('activate-license (CLI, in a child process)', () => {
  // A child process trusts only the compiled-in keys, which this run's server does not hold: the
  // server answers as a SPEC-only server would, unsigned (the signed path is test/security's).
  beforeAll(() => server.sign(false));
  afterAll(() => server.sign(true));
  const cli = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    promisify(execFile)(process.execPath, ['bin/activate-license.cjs', ...args], {
      env: { ...process.env, LICENSE_SERVER_CA_FILE: server.tls.caFile, ...env },
    }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => error,
    );

  it('validates, activates, saves the file and prints type and expiry', async () => {
    const KEY_CLI_1 = await server.issue('owner@example.com');
    const dir = freshDir();

    const result = await cli(['-k', KEY_CLI_1, '-e', 'owner@example.com', '-s', server.url], {
      LICENSE_DATA_DIR: dir,
    });

    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe(
      'License activated (License activated): type paid, lifetime, no expiry',
    );
    expect(existsSync(join(dir, 'license.json'))).toBe(true);
  });

  it('prints the expiry of a time-limited license', async () => {
    const KEY_CLI_2 = await server.issue('owner@example.com', {
      type: 'trial',
      expiresAt: '2027-01-01T00:00:00.000Z',
    });

    const result = await cli(
      ['--key', KEY_CLI_2, '--email', 'owner@example.com', '--server-url', server.url],
      {
        LICENSE_DATA_DIR: freshDir(),
      },
    );

    expect(result.stdout).toMatch(/type trial, expires 2027-01-01T00:00:00.000Z/);
  });

  it.each([
    ['an unknown key', ['-k', 'DBA-NONE', '-e', 'a@b.co'], 1, /Invalid license/],
    ['a missing email', ['-k', 'DBA-ANY'], 2, /missing --email/],
    ['an unknown option', ['--kee', 'x'], 2, /Unknown option/],
  ])('fails with a clear message and a non-zero exit for %s', async (_, args, code, message) => {
    const result = await cli([...args, '-s', server.url], { LICENSE_DATA_DIR: freshDir() });

    expect(result.code).toBe(code);
    expect(result.stderr).toMatch(message);
  });

  it("--deactivate frees this machine's slot at the server and forgets the license here", async () => {
    const key = await server.issue('owner@example.com', { maxDeployments: 1 });
    const dir = freshDir();
    await cli(['-k', key, '-e', 'owner@example.com', '-s', server.url], { LICENSE_DATA_DIR: dir });
    const slots = async () => (await findLicense(await licenseDatabase(), key))?.machineIds;
    expect(await slots()).toHaveLength(1);

    const freed = await cli(['--deactivate', '-s', server.url], { LICENSE_DATA_DIR: dir });
    const again = await cli(['-d', '-s', server.url], { LICENSE_DATA_DIR: dir });

    expect(freed.code).toBe(0);
    expect(freed.stdout).toMatch(/License deactivated \(Deployment deactivated\)/);
    expect(await slots()).toEqual([]);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/no license is activated on this deployment/);
  });

  it('refuses a plain http:// server', async () => {
    const result = await cli(['-k', 'K', '-e', 'a@b.co', '-s', 'http://license.example'], {
      LICENSE_DATA_DIR: freshDir(),
    });

    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/https:\/\//);
  });

  it('shows help', async () => {
    const result = await cli(['--help']);

    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Usage: activate-license --key KEY --email EMAIL/);
  });
});

describe('activation from the environment', () => {
  it('activates at start, then removes LICENSE_KEY and LICENSE_EMAIL; again at the next start', async () => {
    const KEY_ENV = await server.issue('owner@example.com');
    const dir = freshDir();
    for (const expected of ['License activated', 'Already activated']) {
      const env: NodeJS.ProcessEnv = {
        ...process.env,
        LICENSE_KEY: KEY_ENV,
        LICENSE_EMAIL: 'owner@example.com',
      };
      const config = await loadConfig({
        ...env,
        LICENSE_SERVER_URL: server.url,
        LICENSE_SERVER_CA_FILE: server.tls.caFile,
        LICENSE_DATA_DIR: dir,
      });
      const licensing = createLicensing(config, await getDatabase(), { trustedKeys: server.trustedKeys });
      const log = jest.spyOn(logger, 'info').mockImplementation(() => undefined);

      await activateFromEnvironment(licensing, config, env);

      expect(log).toHaveBeenCalledWith('license activated from the environment', {
        result: expect.stringContaining(expected),
      });
      log.mockRestore();
      expect(env.LICENSE_KEY).toBeUndefined();
      expect(env.LICENSE_EMAIL).toBeUndefined();
      expect(config.LICENSE_KEY).toBeUndefined();
      expect((await licensing.state()).status).toBe('active');
    }
  });
});

describe('functions/activate-license (invoked)', () => {
  beforeAll(() => server.sign(false));
  afterAll(() => server.sign(true));
  it('activates and answers type and expiry', async () => {
    const KEY_FN = await server.issue('owner@example.com');
    process.env.LICENSE_SERVER_CA_FILE = server.tls.caFile;
    resetConfig();

    const result = await activateFunction(
      { licenseKey: KEY_FN, email: 'owner@example.com', serverUrl: server.url },
      lambdaContext(),
      {} as never,
    );

    expect(result).toEqual({ success: true, message: 'License activated', type: 'paid', expiresAt: null });
  });

  it('answers what is missing', async () => {
    const result = await activateFunction({ email: 'x' }, lambdaContext(), {} as never);

    expect(result).toMatchObject({
      success: false,
      message: expect.stringMatching(/licenseKey is required/),
    });
  });
});
