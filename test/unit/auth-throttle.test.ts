// The counting itself runs against PostgreSQL: test/security/brute-force.test.ts.
import { clientKey } from '#lib/http/auth-throttle';

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
