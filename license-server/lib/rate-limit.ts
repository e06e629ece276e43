import type pg from 'pg';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { ApiError } from '#lib/errors';

/**
 * Per-minute limits kept in the license server's database (rate-limiter-flexible's PostgreSQL
 * store, table made by the store's migration), so every container and every Lambda instance
 * counts against the same budget.
 */
export class RateLimiter {
  private readonly limiter: RateLimiterPostgres;

  constructor(db: pg.Pool, name: string, perMinute: number) {
    this.limiter = new RateLimiterPostgres({
      storeClient: db,
      storeType: 'pool',
      schemaName: 'license_server',
      tableName: 'rate_limits',
      tableCreated: true,
      keyPrefix: name,
      points: perMinute,
      duration: 60,
    });
  }

  /** Counts one request; throws 429 with Retry-After when the minute's budget is spent. */
  async take(key: string): Promise<void> {
    try {
      await this.limiter.consume(key);
    } catch (outcome) {
      if (!(outcome instanceof RateLimiterRes)) throw outcome;
      const retryAfter = Math.max(1, Math.ceil(outcome.msBeforeNext / 1000));
      throw new ApiError(429, 'Too many requests', `slow down: try again in ${retryAfter} s`, {
        headers: { 'Retry-After': String(retryAfter) },
      });
    }
  }
}
