import { isIPv6 } from 'node:net';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { ApiError } from '#lib/errors';

/**
 * Failed sign-ins (wrong Basic credentials, unknown API keys) per client address. Past `limit`
 * failures in a window the address gets 429 until the window ends, whatever it sends.
 *
 * Counted in this container's memory, not in PostgreSQL: the check runs before every
 * authenticated request, and a shared store would add a round trip to each. On Lambda each
 * warm container (under serverless-offline, each function's worker) counts apart, so an
 * attacker spread over N of them gets N times the limit: still a few hundred guesses an hour.
 */
export class AuthThrottle {
  private readonly failures: RateLimiterMemory;

  constructor(
    private readonly limit: number,
    windowSeconds: number,
  ) {
    this.failures = new RateLimiterMemory({ points: limit, duration: windowSeconds });
  }

  /** Refuses an address that has used up its failures, before its credentials are looked at. */
  async refuseIfBlocked(address: string | undefined): Promise<void> {
    const seen = await this.failures.get(clientKey(address));
    if (!seen || seen.consumedPoints < this.limit || seen.msBeforeNext <= 0) return;
    const retryAfter = Math.ceil(seen.msBeforeNext / 1000);
    throw new ApiError(
      429,
      'Too many requests',
      `too many failed sign-ins from this address; try again in ${retryAfter} s`,
      { headers: { 'Retry-After': String(retryAfter) } },
    );
  }

  async countFailure(address: string | undefined): Promise<void> {
    await this.failures.penalty(clientKey(address));
  }
}

/** IPv6 clients are handed a whole /64: its addresses count as one client. */
export function clientKey(address: string | undefined): string {
  if (!address) return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1]) return mapped[1];
  if (!isIPv6(address)) return address;
  return `${ipv6Groups(address).slice(0, 4).join(':')}::/64`;
}

/** The eight groups of an IPv6 address, `::` expanded and leading zeros dropped. */
function ipv6Groups(address: string): string[] {
  const [head = '', tail] = (address.split('%')[0] ?? '').split('::');
  const split = (part: string) => (part ? part.split(':') : []);
  const left = split(head);
  const right = split(tail ?? '');
  // A trailing dotted IPv4 part fills two groups.
  const width = left.length + right.length + (address.includes('.') ? 1 : 0);
  const groups = tail === undefined ? left : [...left, ...Array(8 - width).fill('0'), ...right];
  return groups.map((group) => group.toLowerCase().replace(/^0+(?=.)/, ''));
}
