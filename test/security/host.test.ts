import { rmSync } from 'node:fs';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { type Host, startHost } from '#test/support/host';
import { ADMIN, basic } from '#test/support/http';
import { functionTimeoutSeconds } from '../../bin/offline';

/**
 * The local host (npm start, the container): what serverless-offline exposes besides the API,
 * and what answers when a function runs out of time.
 */

jest.setTimeout(120_000);

let host: Host;
beforeAll(async () => {
  host = await startHost({
    ...process.env,
    HOST: '0.0.0.0',
    // A function that runs out of time long before its statement would: the host's own timeout.
    DBADMIN_FUNCTION_TIMEOUT: '3',
    // Built apart from the packaging and host tests of test/e2e, which may run at the same time.
    DBADMIN_BUILD_DIR: '.esbuild-security',
  });
});
afterAll(async () => {
  await host?.stop();
  rmSync('.esbuild-security', { recursive: true, force: true });
});

/** An address of this machine other than loopback, if it has one. */
const outsideAddress = () =>
  Object.values(networkInterfaces())
    .flat()
    .find((address) => address && address.family === 'IPv4' && !address.internal)?.address;

const reachable = (host: string, port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, host);
    socket.on('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });

describe('the local host', () => {
  it('keeps serverless-offline’s Lambda invoke endpoint off the network', async () => {
    const line = /Offline \[http for lambda\] listening on http:\/\/(.*?):(.*)$/m.exec(host.output());
    const [, address, port] = line ?? [];

    if (port?.startsWith('/')) return; // a Unix socket in a private directory: not on the network
    expect(address).toBe('127.0.0.1');
    const outside = outsideAddress();
    if (outside) expect(await reachable(outside, Number(port))).toBe(false);
  });

  it('answers a function timeout as the JSON Query timeout error, never the host’s error page', async () => {
    const response = await fetch(`${host.base}/api/query`, {
      method: 'POST',
      headers: { authorization: basic(ADMIN), 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'SELECT pg_sleep(20)' }),
    });
    const text = await response.text();

    expect(JSON.parse(text)).toMatchObject({ error: 'Query timeout' });
    expect(text).not.toMatch(/\/node_modules\/|at .*\.js:\d+|stack/i);
  });

  it('gives each function more time than the statement timeout and the connection waits before it', () => {
    expect(functionTimeoutSeconds({}) * 1000).toBeGreaterThan(30_000 + 3 * 5_000);
    expect(functionTimeoutSeconds({ QUERY_TIMEOUT_MS: '60000' }) * 1000).toBeGreaterThan(60_000 + 3 * 5_000);
    expect(functionTimeoutSeconds({ DATABASE_POOL_MODE: 'transaction' }) * 1000).toBeGreaterThan(
      30_000 + 3 * 15_000,
    );
    expect(functionTimeoutSeconds({ DB_CONNECT_TIMEOUT_MS: '20000' }) * 1000).toBeGreaterThan(
      30_000 + 3 * 20_000,
    );
  });
});
