import { handler as query } from '#functions/query';
import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import { loggedError, logger } from '#lib/log';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { ADMIN, call } from '#test/support/http';

afterAll(closePool);

/** The JSON lines the service writes to stdout while `work` runs. */
async function logLines(work: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const written: string[] = [];
  const spy = jest.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    written.push(String(chunk));
    return true;
  });
  logger.setLogLevel('INFO');
  try {
    await work();
  } finally {
    logger.setLogLevel('ERROR');
    spy.mockRestore();
  }
  return written
    .join('')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const lineFor = (lines: Record<string, unknown>[], requestId: string | undefined) => {
  expect(requestId).toMatch(/./);
  const found = lines.filter((line) => line.message === 'request' && line.function_request_id === requestId);
  expect(found).toHaveLength(1);
  return found[0] as Record<string, unknown>;
};

describe('the request log', () => {
  it('writes one JSON line per request, found by the x-request-id the answer carries', async () => {
    let reply: Awaited<ReturnType<typeof call>> | undefined;
    const lines = await logLines(async () => {
      reply = await call(schemas, { path: '/api/schemas' });
    });

    const line = lineFor(lines, reply?.headers['x-request-id']);
    expect(line).toMatchObject({
      level: 'INFO',
      service: 'dbadmin',
      route: 'GET /api/schemas',
      status: 200,
      principal: 'admin',
    });
    expect(line.durationMs).toEqual(expect.any(Number));
    expect(line.apigw_request_id).toEqual(expect.any(String));
    expect(JSON.stringify(line)).not.toContain(ADMIN.pass);
  });

  it('logs failures with their status and no principal', async () => {
    let reply: Awaited<ReturnType<typeof call>> | undefined;
    const lines = await logLines(async () => {
      reply = await call(schemas, {
        path: '/api/schemas',
        auth: { user: 'admin', pass: 'guessed-password' },
      });
    });

    expect(reply?.status).toBe(401);
    expect(lineFor(lines, reply?.headers['x-request-id'])).toMatchObject({
      route: 'GET /api/schemas',
      status: 401,
      principal: 'none',
    });
    expect(JSON.stringify(lines)).not.toContain('guessed-password');
  });

  it('names a key by its type, never by the key, and leaves the SQL out', async () => {
    const schema = await tenantSchema('logged');
    const { key } = await createKey(schema, 'service_role', 'log-test');
    let reply: Awaited<ReturnType<typeof call>> | undefined;
    const lines = await logLines(async () => {
      reply = await call(query, {
        method: 'POST',
        path: '/api/query',
        body: { sql: "SELECT 'marker-in-the-sql' AS value" },
        ...bearer(key),
      });
    });

    expect(reply?.status).toBe(200);
    expect(lineFor(lines, reply?.headers['x-request-id'])).toMatchObject({
      route: 'POST /api/query',
      status: 200,
      principal: 'service_role',
    });
    const everything = JSON.stringify(lines);
    expect(everything).not.toContain(key);
    expect(everything).not.toContain(key.slice(8));
    expect(everything).not.toContain('marker-in-the-sql');
  });

  it('logs an unknown path as unmatched, with its 404', async () => {
    let reply: Awaited<ReturnType<typeof call>> | undefined;
    const lines = await logLines(async () => {
      reply = await call(schemas, { path: '/api/nowhere' });
    });

    expect(lineFor(lines, reply?.headers['x-request-id'])).toMatchObject({ route: 'unmatched', status: 404 });
  });
});

describe('errors in the log', () => {
  it('keep name, message, SQLSTATE and stack, but not the fields that quote rows or SQL', () => {
    const error = Object.assign(new Error('duplicate key value violates unique constraint "t_pkey"'), {
      code: '23505',
      detail: 'Key (email)=(alice@example.com) already exists.',
      where: 'SQL statement "INSERT INTO t VALUES ($1)"',
    });

    const logged = loggedError(new Error('request failed', { cause: error }));

    expect(logged.cause).toMatchObject({ code: '23505', message: error.message });
    expect(JSON.stringify(logged)).not.toMatch(/alice@example\.com|INSERT INTO/);
  });
});
