import { RateLimiter } from '../../license-server/lib/rate-limit';

describe('RateLimiter', () => {
  it('allows the limit per minute, then answers 429 with the seconds left, then a new window', () => {
    let now = 1_000_000;
    const limiter = new RateLimiter(3, () => now);

    for (let i = 0; i < 3; i++) limiter.take('203.0.113.1');
    now += 15_000;
    expect(() => limiter.take('203.0.113.1')).toThrow(
      expect.objectContaining({ status: 429, headers: { 'Retry-After': '45' } }),
    );
    expect(() => limiter.take('203.0.113.2')).not.toThrow();
    now += 45_000;
    expect(() => limiter.take('203.0.113.1')).not.toThrow();
  });
});
