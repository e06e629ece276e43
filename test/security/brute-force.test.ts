import { handler as schemas } from '#functions/schemas';
import { handler as tables } from '#functions/tables';
import { resetConfig } from '#lib/config';
import { closePool } from '#lib/db/pool';
import { ADMIN, call } from '#test/support/http';

/**
 * An attacker guessing AUTH_PASS (or API keys) from one address: after AUTH_MAX_FAILURES wrong
 * guesses in AUTH_FAILURE_WINDOW_S, that address gets 429 until the window passes, the right
 * password included, so a guess that happens to be right cannot be told from a wrong one.
 */
const LIMIT = 5;
const WRONG = { user: ADMIN.user, pass: 'guess' };
const saved = { ...process.env };

beforeAll(() => {
  process.env.AUTH_MAX_FAILURES = String(LIMIT);
  process.env.AUTH_FAILURE_WINDOW_S = '60';
  resetConfig();
});
afterAll(async () => {
  for (const name of ['AUTH_MAX_FAILURES', 'AUTH_FAILURE_WINDOW_S']) {
    if (saved[name] === undefined) delete process.env[name];
    else process.env[name] = saved[name];
  }
  resetConfig();
  await closePool();
});
afterEach(() => {
  jest.useRealTimers();
});

/** The limiter reads the time from Date; timers and I/O keep running for real. */
const EVERYTHING_BUT_DATE = [
  'hrtime',
  'nextTick',
  'performance',
  'queueMicrotask',
  'requestAnimationFrame',
  'cancelAnimationFrame',
  'requestIdleCallback',
  'cancelIdleCallback',
  'setImmediate',
  'clearImmediate',
  'setInterval',
  'clearInterval',
  'setTimeout',
  'clearTimeout',
] as const;

const signIn = (sourceIp: string, auth: { user: string; pass: string } | null) =>
  call(schemas, { path: '/api/schemas', auth, sourceIp });
const withKey = (sourceIp: string, key: string) =>
  call(tables, { path: '/api/tables', auth: null, headers: { authorization: `Bearer ${key}` }, sourceIp });

async function guess(sourceIp: string, times: number): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < times; i++) statuses.push((await signIn(sourceIp, WRONG)).status);
  return statuses;
}

describe('failed sign-ins are throttled per client address', () => {
  it('stops an attacker guessing passwords from one address', async () => {
    expect(await guess('198.51.100.1', LIMIT)).toEqual(Array(LIMIT).fill(401));

    const blocked = await signIn('198.51.100.1', WRONG);

    expect(blocked.status).toBe(429);
    expect(blocked.body).toEqual({ error: 'Too many requests', message: expect.any(String) });
    expect(Number(blocked.headers['Retry-After'])).toBeGreaterThanOrEqual(1);
    expect(Number(blocked.headers['Retry-After'])).toBeLessThanOrEqual(60);
  });

  it('answers the right password during the block with the same 429', async () => {
    await guess('198.51.100.2', LIMIT);

    const wrong = await signIn('198.51.100.2', WRONG);
    const right = await signIn('198.51.100.2', ADMIN);

    expect(right.status).toBe(429);
    expect(right.body.error).toBe(wrong.body.error);
    expect(right.headers['WWW-Authenticate']).toBeUndefined();
  });

  it('leaves other addresses alone', async () => {
    await guess('198.51.100.3', LIMIT + 3);

    expect((await signIn('198.51.100.4', ADMIN)).status).toBe(200);
    expect((await signIn('198.51.100.4', WRONG)).status).toBe(401);
  });

  it('counts the addresses of one IPv6 /64 as one client', async () => {
    for (let i = 1; i <= LIMIT; i++) await signIn(`2001:db8:7:7::${i}`, WRONG);

    expect((await signIn('2001:db8:7:7:ffff:ffff:ffff:ffff', ADMIN)).status).toBe(429);
    expect((await signIn('2001:db8:7:8::1', ADMIN)).status).toBe(200);
  });

  it('counts unknown API keys as failures too', async () => {
    for (let i = 0; i < LIMIT; i++) expect((await withKey('198.51.100.5', 'f'.repeat(64))).status).toBe(401);

    expect((await withKey('198.51.100.5', 'e'.repeat(64))).status).toBe(429);
    expect((await signIn('198.51.100.5', ADMIN)).status).toBe(429);
  });

  it('does not count successes, nor requests that carry no credentials', async () => {
    await guess('198.51.100.6', LIMIT - 1);
    for (let i = 0; i < 3; i++) expect((await signIn('198.51.100.6', ADMIN)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await signIn('198.51.100.6', null)).status).toBe(401);

    expect((await signIn('198.51.100.6', WRONG)).status).toBe(401);
    expect((await signIn('198.51.100.6', ADMIN)).status).toBe(429);
  });

  it('lets the address in again once the window has passed', async () => {
    jest.useFakeTimers({ doNotFake: [...EVERYTHING_BUT_DATE] });
    await guess('198.51.100.7', LIMIT);
    expect((await signIn('198.51.100.7', ADMIN)).status).toBe(429);

    jest.setSystemTime(Date.now() + 59_000);
    expect((await signIn('198.51.100.7', ADMIN)).status).toBe(429);
    jest.setSystemTime(Date.now() + 1_001);

    expect((await signIn('198.51.100.7', ADMIN)).status).toBe(200);
  });
});

describe('across containers (Lambda) and functions (the local host)', () => {
  /** Another container: the same function with module state (and pools) of its own, as on Lambda. */
  const closers: (() => Promise<void>)[] = [];
  afterAll(() => Promise.all(closers.map((close) => close())));
  const otherContainer = () => {
    let handler: typeof schemas | undefined;
    jest.isolateModules(() => {
      handler = require('#functions/schemas').handler;
      closers.push(require('#lib/db/pool').closePool);
    });
    return handler as typeof schemas;
  };

  it('failures counted in one container block the address in every other', async () => {
    const [first, second] = [otherContainer(), otherContainer()];
    for (let i = 0; i < LIMIT; i++)
      await call(first, { path: '/api/schemas', auth: WRONG, sourceIp: '198.51.100.40' });

    const right = await call(second, { path: '/api/schemas', auth: ADMIN, sourceIp: '198.51.100.40' });

    expect(right.status).toBe(429);
  });

  it('a blocked address stays blocked however many requests it sends at once', async () => {
    await guess('198.51.100.41', LIMIT);
    const containers = Array.from({ length: 8 }, otherContainer);

    const replies = await Promise.all(
      containers.map((handler) =>
        call(handler, { path: '/api/schemas', auth: ADMIN, sourceIp: '198.51.100.41' }),
      ),
    );

    expect(replies.map((reply) => reply.status)).toEqual(Array(8).fill(429));
  });
});

describe('behind a reverse proxy (the container’s Caddy)', () => {
  const PROXY = '172.31.250.250';
  const viaProxy = (client: string, auth: { user: string; pass: string } | null) =>
    call(schemas, { path: '/api/schemas', auth, sourceIp: PROXY, headers: { 'x-forwarded-for': client } });

  beforeAll(() => {
    process.env.TRUSTED_PROXIES = PROXY;
    resetConfig();
  });
  afterAll(() => {
    delete process.env.TRUSTED_PROXIES;
    resetConfig();
  });

  it('an attacker behind the proxy does not lock out everyone else behind it', async () => {
    for (let i = 0; i < LIMIT; i++) await viaProxy('203.0.113.66', WRONG);

    expect((await viaProxy('203.0.113.66', ADMIN)).status).toBe(429);
    expect((await viaProxy('198.51.100.70', ADMIN)).status).toBe(200);
  });

  it('the client is the address the proxy added, not one the client made up', async () => {
    // The proxy appends the peer it saw; whatever the attacker wrote before it is not believed.
    for (let i = 0; i < LIMIT; i++) await viaProxy(`10.9.9.${i}, 203.0.113.77`, WRONG);

    expect((await viaProxy('10.1.1.1, 203.0.113.77', ADMIN)).status).toBe(429);
  });

  it('a client that reaches the service directly cannot pose as another with X-Forwarded-For', async () => {
    const direct = (forwarded: string, auth: { user: string; pass: string }) =>
      call(schemas, {
        path: '/api/schemas',
        auth,
        sourceIp: '192.0.2.31',
        headers: { 'x-forwarded-for': forwarded },
      });
    for (let i = 0; i < LIMIT; i++) await direct(`198.18.0.${i}`, WRONG);

    expect((await direct('198.18.0.200', ADMIN)).status).toBe(429);
  });
});
