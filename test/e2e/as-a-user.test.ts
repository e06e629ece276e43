import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { readServiceConfig } from '../../bin/build';
import { freePort } from '../../bin/free-port';
import { serverDataDir } from '../../bin/postgres-reach';

/**
 * Each deployable started exactly as the README tells a user to, with only the settings it names:
 * `npm run license-server`, `npx license-admin`, `npm start`, and `npx activate-license` beside
 * it. Nothing of the test's own environment (test/support/env.ts sets AUTH_USER, DATABASE_URL,
 * DBADMIN_SECRET, ...) reaches them: a setting a user does not give must not be needed.
 */
jest.setTimeout(300_000);

const repository = resolve(__dirname, '..', '..');
const dataRoot = mkdtempSync(join(tmpdir(), 'dbadmin-as-a-user-'));
// As root the embedded PostgreSQL runs as another user, which must reach its data directory.
chmodSync(dataRoot, 0o755);

/** What a user's shell has, and the settings the README names for the step at hand. */
function userEnvironment(settings: Record<string, string>): NodeJS.ProcessEnv {
  const { PATH, HOME, TMPDIR } = process.env;
  return { PATH, HOME, ...(TMPDIR ? { TMPDIR } : {}), ...settings };
}

interface Started {
  output: () => string;
  stop: () => Promise<void>;
}

/** A long-running command, started in the repository, ready once it prints `ready`. */
async function startCommand(command: string, args: string[], env: NodeJS.ProcessEnv, ready: RegExp) {
  const child: ChildProcess = spawn(command, args, {
    cwd: repository,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  // Every process of it has ended, not npm alone: npm ends before the host it runs, which may
  // still be stopping its PostgreSQL. They all hold its output until they end.
  const ended = new Promise<void>((done) => child.on('close', () => done()));
  await new Promise<void>((done, fail) => {
    const watch = (chunk: Buffer) => {
      output += chunk.toString();
      if (ready.test(output)) done();
    };
    child.stdout?.on('data', watch);
    child.stderr?.on('data', watch);
    child.on('exit', (code) =>
      fail(new Error(`${command} ${args.join(' ')} exited with ${code}:\n${output}`)),
    );
  });
  const started: Started = {
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // The whole group: npm, the supervisor and the host it runs.
      process.kill(-(child.pid as number), 'SIGTERM');
      await ended;
    },
  };
  return started;
}

/** A command that runs to its end, as a user types it. */
function run(command: string, args: string[], env: NodeJS.ProcessEnv) {
  return promisify(execFile)(command, args, { cwd: repository, env }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (error: { code: number; stdout: string; stderr: string }) => error,
  );
}

const printed = (output: string, pattern: RegExp) => {
  const match = pattern.exec(output);
  if (!match?.[1]) throw new Error(`expected ${pattern} in:\n${output}`);
  return match[1];
};

describe('a license bought, activated beside npm start, revoked, and remembered across a restart', () => {
  const dataDir = join(dataRoot, '.data');
  const licenseDataDir = join(dataRoot, 'license-data');
  let licenseServer: Started | undefined;
  let host: Started | undefined;
  let serverUrl = '';
  let caFile = '';
  let serverDatabase = '';
  let base = '';
  let admin = '';
  let hostPort = '';
  let key = '';

  const serviceSettings = () => ({
    DBADMIN_DATA_DIR: dataDir,
    LICENSE_DATA_DIR: licenseDataDir,
    LICENSE_SERVER_URL: serverUrl,
    LICENSE_SERVER_CA_FILE: caFile,
  });
  const startService = async () => {
    host = await startCommand(
      'npm',
      ['start'],
      userEnvironment({ ...serviceSettings(), PORT: hostPort }),
      /Server ready/,
    );
    const user = printed(host.output(), /user (\S+) {2}password/);
    const pass = printed(host.output(), /password (\S+)/);
    admin = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
  };
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${base}${path}`, { ...init, headers: { authorization: admin, ...init.headers } });
  const licenseStatus = async () => (await api('/api/license/status')).json();

  beforeAll(async () => {
    const port = String(await freePort());
    licenseServer = await startCommand(
      'npm',
      ['run', 'license-server'],
      userEnvironment({ DBADMIN_DATA_DIR: dataDir, LICENSE_SERVER_PORT: port }),
      /Server ready/,
    );
    serverUrl = printed(licenseServer.output(), /license-server: (https:\/\/localhost:\d+)/);
    caFile = printed(licenseServer.output(), /LICENSE_SERVER_CA_FILE=(\S+)/);
    serverDatabase = printed(licenseServer.output(), /LICENSE_SERVER_DATABASE_URL='([^']+)'/);
    hostPort = String(await freePort());
    base = `http://127.0.0.1:${hostPort}`;
  });
  afterAll(async () => {
    await host?.stop();
    await licenseServer?.stop();
  });

  it('issues a key with license-admin, as the license server printed how', async () => {
    const issued = await run(
      'npx',
      ['license-admin', 'issue', '--email', 'buyer@example.com'],
      userEnvironment({ LICENSE_SERVER_DATABASE_URL: serverDatabase }),
    );

    expect(issued.stderr).toBe('');
    key = printed(issued.stdout, /(DBA-[A-Z0-9-]+)/);
  });

  it('answers validation at the license server with its documented settings alone', async () => {
    const answer = await postOverTls(`${serverUrl}/api/license/validate`, caFile, {
      licenseKey: key,
      machineId: 'a'.repeat(32),
    });

    expect(answer).toMatchObject({ status: 200, body: { valid: true } });
  });

  it('activates with npx activate-license beside npm start', async () => {
    await startService();
    const activated = await run(
      'npx',
      ['activate-license', '--key', key, '--email', 'buyer@example.com'],
      userEnvironment(serviceSettings()),
    );

    expect(activated.stderr).toBe('');
    expect(activated.stdout).toMatch(/License activated/);
    expect(await licenseStatus()).toMatchObject({ status: 'active', type: 'paid' });
  });

  it('counts a route of every function the host serves in its one metrics', async () => {
    // The first route of each function in serverless.yml: each function is a bundle of its own.
    const { functions } = readServiceConfig() as unknown as {
      functions: Record<string, { events?: { httpApi: string }[] }>;
    };
    // Functions with no route (activate-license, rotate-secret) are invoked, never served.
    const served = Object.values(functions).flatMap(({ events }) => (events?.[0] ? [events[0].httpApi] : []));
    for (const route of served) {
      const [method, path] = route.split(' ') as [string, string];
      const body = method === 'GET' ? undefined : '{}';
      await api(path.replace(/\{[^}]+\}/g, 'nothing_here'), {
        method,
        ...(body ? { body, headers: { 'content-type': 'application/json' } } : {}),
      });
    }

    const metrics = await (await api('/api/metrics')).text();

    const counted = served.filter((route) =>
      metrics.includes(`dbadmin_http_requests_total{route="${route}"`),
    );
    expect(counted).toEqual(served);
  });

  it('grants another origin’s page nothing, as npm start serves the built functions', async () => {
    const preflight = await fetch(`${base}/api/schemas`, {
      method: 'OPTIONS',
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
    });
    const read = await api('/api/schemas', { headers: { origin: 'http://evil.example' } });

    expect(preflight.status).toBe(403);
    for (const answer of [preflight, read])
      expect([...answer.headers.keys()].filter((name) => name.startsWith('access-control-'))).toEqual([]);
  });

  it('keeps the license server’s refusal across a restart with the server gone', async () => {
    const revoked = await run(
      'npx',
      ['license-admin', 'revoke', key],
      userEnvironment({ LICENSE_SERVER_DATABASE_URL: serverDatabase }),
    );
    expect(revoked.code).toBe(0);
    const refreshed = await (await api('/api/license/refresh', { method: 'POST' })).json();
    expect(refreshed).toMatchObject({ status: 'invalid' });

    await host?.stop();
    await licenseServer?.stop();
    await startService();

    expect(await licenseStatus()).toMatchObject({ status: 'invalid' });
    expect((await api('/api/schemas')).headers.get('x-license-status')).toBe('invalid');
  });

  it('starts its embedded PostgreSQL again when it is killed, and stops it for good with the host', async () => {
    const lockFile = join(
      serverDataDir(join(dataDir, 'postgres'), () => undefined),
      'postmaster.pid',
    );
    const killed = postmasterOf(lockFile);
    const said = () => host?.output() ?? '';
    process.kill(killed, 'SIGKILL');

    // The old server's backends may answer for a moment: served again means by the new one.
    const deadline = performance.now() + 120_000;
    while (!(/PostgreSQL is back/.test(said()) && (await api('/api/schemas')).status === 200)) {
      if (performance.now() > deadline) throw new Error(`not served again:\n${said().slice(-3000)}`);
      await new Promise((pause) => setTimeout(pause, 100));
    }
    expect(said()).toMatch(/dbadmin: embedded PostgreSQL exited \(signal SIGKILL\); restarting/);
    expect(said()).toMatch(/dbadmin: embedded PostgreSQL is back \(after \d+ ms\)/);
    expect(postmasterOf(lockFile)).not.toBe(killed);

    await host?.stop();

    expect(existsSync(lockFile)).toBe(false);
    expect(said().match(/; restarting/g)).toHaveLength(1);
  });
});

/** The pid postmaster.pid names: the embedded PostgreSQL serving that directory. */
const postmasterOf = (lockFile: string) => Number(readFileSync(lockFile, 'utf8').split('\n')[0]);

/** A JSON POST to the license server, trusting the CA it printed (as LICENSE_SERVER_CA_FILE does). */
function postOverTls(url: string, caFile: string, body: unknown): Promise<{ status: number; body: unknown }> {
  return new Promise((done, fail) => {
    const sent = request(
      url,
      { method: 'POST', ca: readFileSync(caFile), headers: { 'content-type': 'application/json' } },
      (answer) => {
        let text = '';
        answer.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        answer.on('end', () => done({ status: answer.statusCode ?? 0, body: JSON.parse(text) }));
      },
    );
    sent.on('error', fail);
    sent.end(JSON.stringify(body));
  });
}
