import { isIPv6 } from 'node:net';
import type pg from 'pg';
import { ApiError } from '#lib/errors';

/** An address's failed sign-ins in its current window, as `_dbadmin.sign_in_failures` holds them. */
export interface FailureCount {
  failures: number;
  windowEnds: Date;
}

/**
 * Failed sign-ins (wrong Basic credentials, unknown API keys) per client address, counted in
 * `_dbadmin.sign_in_failures` so every container and worker shares one count: an attacker cannot
 * multiply its budget by sending requests at once (each may land in a new container). Past `limit`
 * failures in a window the address gets 429 until the window ends, whatever it sends.
 *
 * The count is read with the request's key lookup, in one round trip, before its credentials are
 * acted on (the sign-in read carries a route's catalog read only for an address this lets through:
 * lib/http/authenticate); a failure costs one upsert. Guesses sent at the same moment from an address that is not yet
 * blocked are all checked before their failures are counted: a first burst gets at most as many
 * guesses as run at once, and the address is blocked for the rest of the window.
 */
export class AuthThrottle {
  private failuresSinceSweep = 0;

  constructor(
    private readonly db: pg.Pool,
    /** Failures in a window an address may have before it is refused. */
    readonly limit: number,
    private readonly windowSeconds: number,
  ) {}

  /**
   * Refuses an address that has used up its failures, before its credentials are acted on. The
   * count comes with the request's one sign-in read (lib/http/authenticate), not a read of its own,
   * which judges it the same way for the catalog read it carries.
   */
  refuseIfBlocked(count: FailureCount | undefined, now = new Date()): void {
    if (count && count.failures >= this.limit && count.windowEnds > now) throw tooMany(count.windowEnds, now);
  }

  /** Counts a failure; the one past the limit is answered 429 like every later request. */
  countFailure(address: string | undefined, now = new Date()): Promise<void> {
    return this.countFailures([clientKey(address)], now);
  }

  /**
   * Counts a failure against each of `clients` (a person's sign-in counts against the address and
   * the login both); past the limit for any of them, 429.
   */
  async countFailures(clients: readonly string[], now = new Date()): Promise<void> {
    const { rows } = await this.db.query<{ failures: number; window_ends: Date }>({
      name: 'dbadmin.sign-in-failed',
      text: `INSERT INTO _dbadmin.sign_in_failures AS f (client, failures, window_ends)
             SELECT client, 1, $2::timestamptz + $3 * interval '1 second' FROM pg_catalog.unnest($1::text[]) AS client
             ON CONFLICT (client) DO UPDATE SET
               failures    = CASE WHEN f.window_ends > $2 THEN f.failures + 1 ELSE 1 END,
               window_ends = CASE WHEN f.window_ends > $2 THEN f.window_ends ELSE excluded.window_ends END
             RETURNING failures, window_ends`,
      values: [clients, now, this.windowSeconds],
    });
    this.sweep(now);
    for (const row of rows) if (row.failures > this.limit) throw tooMany(row.window_ends, now);
  }

  /**
   * Takes back one failure of each of `clients`: an attempt reserved with countFailures before a
   * slow check (a password's scrypt) that then succeeded. Reserving first means guesses sent at
   * once are each counted before any is checked, so a burst gets no more than the limit.
   */
  async forgive(clients: readonly string[]): Promise<void> {
    await this.db.query(
      'UPDATE _dbadmin.sign_in_failures SET failures = GREATEST(failures - 1, 0) WHERE client = ANY ($1::text[])',
      [clients],
    );
  }

  /** Addresses whose window ended long ago are forgotten now and then, so the table stays small. */
  private sweep(now: Date): void {
    if (++this.failuresSinceSweep < 100) return;
    this.failuresSinceSweep = 0;
    this.db
      .query('DELETE FROM _dbadmin.sign_in_failures WHERE window_ends < $1', [
        new Date(now.getTime() - 3_600_000),
      ])
      .catch(() => undefined);
  }
}

function tooMany(windowEnds: Date, now: Date): ApiError {
  const retryAfter = Math.max(1, Math.ceil((windowEnds.getTime() - now.getTime()) / 1000));
  return new ApiError(
    429,
    'Too many requests',
    `too many failed sign-ins from this address; try again in ${retryAfter} s`,
    { headers: { 'Retry-After': String(retryAfter) } },
  );
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
