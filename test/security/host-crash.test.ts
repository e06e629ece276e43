import { performance } from 'node:perf_hooks';
import { supervisedHost } from '#test/support/host';
import { ADMIN, basic } from '#test/support/http';
import { gone } from '../../bin/processes';

/**
 * The local host runs every function in one process (serverless-offline --useInProcess): one
 * function's failure outside a request's own await must not take the others' requests down. A
 * rejection nobody waits for is logged and contained; an uncaught exception ends the process,
 * and npm start's supervisor (bin/supervise.sh) starts the host again at once, as it does for a
 * host killed outright. Run as `npm start` runs it: built, supervised, its own embedded PostgreSQL.
 */

jest.setTimeout(240_000);

const CRASH = { crash: { handler: 'test/support/crash.handler', events: [{ httpApi: 'GET /test/crash' }] } };
const supervised = supervisedHost('host-crash', CRASH);

const pause = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** The status of one request, or 0 when nothing answered (the host is down). */
async function status(path: string): Promise<number> {
  try {
    const response = await fetch(`${supervised.host.base}${path}`, {
      headers: { authorization: basic(ADMIN) },
    });
    await response.arrayBuffer();
    return response.status;
  } catch {
    return 0;
  }
}

/** Waits until the host answers again, up to `ms`; how long it took. */
async function servedAgain(ms: number): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < ms) {
    if ((await status('/api/schemas')) === 200) return performance.now() - started;
    await pause(100);
  }
  throw new Error(`not served again within ${ms} ms:\n${supervised.host.output().slice(-3000)}`);
}

describe('the local host, when a function fails outside a request', () => {
  it('contains a rejection nobody waits for: logged, and the same process serves on', async () => {
    const before = supervised.hostPid();

    expect(await status('/test/crash?how=rejection')).toBe(200);
    await pause(200);

    expect(await status('/api/schemas')).toBe(200);
    expect(supervised.hostPid()).toBe(before);
    expect(supervised.host.output()).toMatch(
      /a rejected promise nobody waited for \(the host keeps serving\): Error: planted/,
    );
  });

  it('ends on an uncaught exception, says why, and is started again at once', async () => {
    const before = supervised.hostPid();

    expect(await status('/test/crash?how=exception')).toBe(200);
    await gone([before]);
    await servedAgain(60_000);

    expect(supervised.hostPid()).not.toBe(before);
    expect(supervised.host.output()).toMatch(
      /an uncaught error; the host exits to be started again: Error: planted/,
    );
    expect(supervised.host.output()).toMatch(
      /the host ended \(exit 70: an uncaught error, logged above\); starting it again/,
    );
  });

  it('is started again when killed in the middle of load, and the next requests are served', async () => {
    const before = supervised.hostPid();
    // fetch keeps connections open: those to the host ended above fail once each, then are dropped.
    for (let round = 0; round < 3; round++)
      await Promise.all(Array.from({ length: 8 }, () => status('/api/health')));
    // Times from the monotonic clock: this machine's wall clock has been seen to step.
    const answers: { at: number; status: number }[] = [];
    let loading = true;
    const load = Promise.all(
      Array.from({ length: 8 }, async () => {
        while (loading) answers.push({ status: await status('/api/schemas'), at: performance.now() });
      }),
    );
    await pause(1000);
    const killedAt = performance.now();
    process.kill(before, 'SIGKILL');
    const took = await servedAgain(60_000);
    await pause(1000);
    loading = false;
    await load;

    expect([...new Set(answers.filter((a) => a.at < killedAt).map((a) => a.status))]).toEqual([200]);
    expect(answers.some((a) => a.at > killedAt && a.status !== 200)).toBe(true); // it was down
    const last = answers.filter((a) => a.at > killedAt + took);
    expect(last.length).toBeGreaterThan(10);
    expect(last.every((a) => a.status === 200)).toBe(true);
    expect(supervised.hostPid()).not.toBe(before);
    expect(supervised.host.output()).toMatch(
      /the host ended \(exit 137: killed by SIGKILL\); starting it again/,
    );
    // Its embedded PostgreSQL, left running by the killed host, was stopped so a new one could start.
    expect(supervised.host.output()).toMatch(
      /stopping the embedded PostgreSQL \(pid \d+\) a stopped host left running/,
    );
  });
});
