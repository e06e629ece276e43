import { handler as health } from '#functions/health';
import { handler as query } from '#functions/query';
import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { logger } from '#lib/log';
import { call } from '#test/support/http';
import { TcpProxy } from '#test/support/tcp-proxy';

// This file's own module registry gets its own config and pool, pointed at the proxy.
const target = new URL(process.env.DATABASE_URL as string);
const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));

let warnings: jest.SpyInstance;

beforeAll(async () => {
  warnings = jest.spyOn(logger, 'warn').mockImplementation(() => undefined);
  await proxy.up();
  await proxy.down();
  const viaProxy = new URL(target);
  viaProxy.port = String(proxy.port);
  process.env.DATABASE_URL = viaProxy.toString();
});

afterAll(async () => {
  warnings.mockRestore();
  await closePool();
  await proxy.down();
  process.env.DATABASE_URL = target.toString();
});

const unavailable = {
  error: 'Database unavailable',
  message: 'the database does not answer; try again shortly',
};

describe('when the database goes away', () => {
  it('answers 503 before the database was ever reached, and recovers when it comes up', async () => {
    expect((await call(schemas, { path: '/api/schemas' })).body).toEqual(unavailable);
    expect((await call(schemas, { path: '/api/schemas' })).status).toBe(503);

    await proxy.up();

    const reply = await call(schemas, { path: '/api/schemas' });
    expect(reply.status).toBe(200);
    expect(reply.body).toContain('public');
    expect(warnings).toHaveBeenCalledWith('Database unavailable', {
      reason: expect.stringMatching(/ECONNREFUSED/),
    });
  });

  it('answers 503 while it is down and serves again once it is back, without a restart', async () => {
    expect((await call(schemas, { path: '/api/schemas' })).status).toBe(200);

    await proxy.down();
    const during = await call(schemas, { path: '/api/schemas' });
    const healthDuring = await call(health, { path: '/api/health', auth: null });

    await proxy.up();
    const after = await call(schemas, { path: '/api/schemas' });
    const healthAfter = await call(health, { path: '/api/health', auth: null });

    expect(during.status).toBe(503);
    expect(during.body).toEqual(unavailable);
    expect(healthDuring.status).toBe(503);
    expect(healthDuring.body.error).toBe('Database unavailable');
    expect(after.status).toBe(200);
    expect(healthAfter.status).toBe(200);
  });

  it('does not hand out an ad-hoc SQL connection the outage broke', async () => {
    const sql = () => call(query, { method: 'POST', path: '/api/query', body: { sql: 'SELECT 1 AS n' } });
    expect((await sql()).status).toBe(200);

    await proxy.down();
    const during = await sql();
    await proxy.up();
    const after = await sql();

    expect(during.status).toBe(503);
    expect(after.status).toBe(200);
    expect(after.body.rows).toEqual([{ n: 1 }]);
  });
});
