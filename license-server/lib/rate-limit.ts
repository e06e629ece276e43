import { ApiError } from '#lib/errors';

/** Fixed one-minute windows per key (client address, license key), kept in this container. */
export class RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    private readonly perMinute: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Counts one request; throws 429 with Retry-After when the window is full. */
  take(key: string): void {
    const now = this.clock();
    const window = this.windows.get(key);
    if (!window || now - window.start >= 60_000) {
      if (this.windows.size > 100_000) this.windows.clear();
      this.windows.set(key, { start: now, count: 1 });
      return;
    }
    window.count++;
    if (window.count > this.perMinute) {
      const retryAfter = Math.max(1, Math.ceil((window.start + 60_000 - now) / 1000));
      throw new ApiError(429, 'Too many requests', `slow down: try again in ${retryAfter} s`, {
        headers: { 'Retry-After': String(retryAfter) },
      });
    }
  }
}
