import { AuthThrottle, clientKey } from '#lib/http/auth-throttle';

describe('clientKey', () => {
  it.each([
    ['an IPv4 address', '203.0.113.9', '203.0.113.9'],
    ['an IPv4-mapped IPv6 address', '::ffff:203.0.113.9', '203.0.113.9'],
    ['a compressed IPv6 address', '2001:db8:7:7::1', '2001:db8:7:7::/64'],
    [
      'a full IPv6 address with leading zeros',
      '2001:0DB8:0007:0007:ffff:ffff:ffff:ffff',
      '2001:db8:7:7::/64',
    ],
    ['IPv6 ending in a dotted part', '64:ff9b::192.0.2.1', '64:ff9b:0:0::/64'],
    ['no address', undefined, 'unknown'],
  ])('keys %s by its client', (_, address, key) => {
    expect(clientKey(address)).toBe(key);
  });
});

describe('AuthThrottle', () => {
  beforeEach(() => {
    jest.useFakeTimers({ now: new Date('2026-03-01T12:00:00Z') });
  });
  afterEach(() => {
    jest.useRealTimers();
  });

  it('refuses an address with 429 and Retry-After once it has used up its failures', async () => {
    const throttle = new AuthThrottle(2, 60);
    await throttle.countFailure('203.0.113.9');
    await expect(throttle.refuseIfBlocked('203.0.113.9')).resolves.toBeUndefined();
    await throttle.countFailure('203.0.113.9');
    jest.advanceTimersByTime(20_000);

    await expect(throttle.refuseIfBlocked('203.0.113.9')).rejects.toMatchObject({
      status: 429,
      title: 'Too many requests',
      headers: { 'Retry-After': '40' },
    });
  });

  it('lets the address in again when the window that began with its first failure ends', async () => {
    const throttle = new AuthThrottle(1, 60);
    await throttle.countFailure('203.0.113.9');
    jest.advanceTimersByTime(60_000);

    await expect(throttle.refuseIfBlocked('203.0.113.9')).resolves.toBeUndefined();
  });
});
