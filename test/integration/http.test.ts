import { handler as health } from '#functions/health';
import { handler as meta, routes as metaRoutes } from '#functions/meta';
import { routes as queryRoutes } from '#functions/query';
import { routes as rowRoutes } from '#functions/rows';
import { routes as schemaRoutes, handler as schemas } from '#functions/schemas';
import { routes as tableRoutes } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { call } from '#test/support/http';

afterAll(closePool);

describe('GET /api/health', () => {
  it('answers without authentication and reports the database', async () => {
    const reply = await call(health, { path: '/api/health', auth: null });

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({ status: 'ok', database: 'up', timestamp: expect.any(String) });
    expect(new Date(reply.body.timestamp).toISOString()).toBe(reply.body.timestamp);
  });
});

describe('authentication', () => {
  it('asks for credentials when none are sent', async () => {
    const reply = await call(schemas, { path: '/api/schemas', auth: null });

    expect(reply.status).toBe(401);
    expect(reply.body).toEqual({ error: 'Unauthorized', message: 'Authentication required' });
    expect(reply.headers['WWW-Authenticate']).toMatch(/^Basic realm=/);
  });

  it('refuses wrong credentials', async () => {
    const reply = await call(schemas, { path: '/api/schemas', auth: { user: 'test-admin', pass: 'nope' } });

    expect(reply.status).toBe(401);
    expect(reply.body).toEqual({ error: 'Unauthorized', message: 'Invalid credentials' });
  });

  it('refuses bearer tokens with Invalid API key', async () => {
    const reply = await call(schemas, {
      path: '/api/schemas',
      headers: { Authorization: `Bearer ${'0'.repeat(64)}` },
    });

    expect(reply.status).toBe(401);
    expect(reply.body).toEqual({ error: 'Unauthorized', message: 'Invalid API key' });
  });

  it('checks credentials before it reads the body', async () => {
    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      auth: null,
      body: '{not json',
    });

    expect(reply.status).toBe(401);
  });
});

describe('request bodies', () => {
  it('answers 400 for malformed JSON', async () => {
    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      headers: { 'content-type': 'application/json' },
      body: '{"schemaName": "a",',
    });

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Invalid JSON');
  });

  it('answers 413 for a body over 1 MiB', async () => {
    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: 'big', password: 'x'.repeat(1024 * 1024) },
    });

    expect(reply.status).toBe(413);
    expect(reply.body).toEqual({
      error: 'Payload too large',
      message: 'request body must be at most 1048576 bytes',
    });
  });

  it('answers 400 when the body is missing', async () => {
    const reply = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      headers: { 'content-type': 'application/json' },
    });

    expect(reply.status).toBe(400);
    expect(reply.body.message).toBe('request body is required');
  });
});

describe('unknown routes and methods', () => {
  it('answers 404 in the error format for a path no function serves', async () => {
    const reply = await call(meta, { path: '/api/nothing-here' });

    expect(reply.status).toBe(404);
    expect(reply.body).toEqual({
      error: 'Not found',
      message: 'no endpoint at /api/nothing-here; see /api/openapi.json',
    });
  });

  it('answers 405 with Allow for a known path and another method, in the fallback', async () => {
    const reply = await call(meta, { method: 'PUT', path: '/api/schema/shop' });

    expect(reply.status).toBe(405);
    expect(reply.headers.Allow).toBe('DELETE');
    expect(reply.body.error).toBe('Method not allowed');
  });

  it('answers 405 inside a function too', async () => {
    const reply = await call(schemas, { method: 'PATCH', path: '/api/schemas' });

    expect(reply.status).toBe(405);
    expect(reply.headers.Allow).toBe('GET');
  });
});

describe('GET /api/openapi.json', () => {
  it('documents every route with the schemas the handlers validate with', async () => {
    const reply = await call(meta, { path: '/api/openapi.json', auth: null });

    expect(reply.status).toBe(200);
    expect(reply.body.openapi).toBe('3.1.0');
    for (const route of [...schemaRoutes, ...tableRoutes, ...rowRoutes, ...queryRoutes, ...metaRoutes]) {
      expect(reply.body.paths[route.path]?.[route.method.toLowerCase()]).toBeDefined();
    }
    const create = reply.body.paths['/api/schema/create'].post;
    const body = create.requestBody.content['application/json'].schema;
    expect(body.required).toEqual(['schemaName', 'password']);
    expect(body.properties.password.minLength).toBe(8);
    expect(body.properties.schemaName.maxLength).toBe(57);
    expect(create.responses['201']).toBeDefined();
    const remove = reply.body.paths['/api/schema/{schemaName}'].delete;
    expect(remove.parameters.map((p: { name: string; in: string }) => `${p.in}:${p.name}`)).toEqual([
      'path:schemaName',
      'query:cascade',
    ]);
  });
});

describe('a missing setting', () => {
  it('answers 500 Service misconfigured naming it, and logs one line', async () => {
    const { resetConfig } = await import('#lib/config');
    const saved = process.env.AUTH_PASS;
    const { logger } = await import('#lib/log');
    const errors = jest.spyOn(logger, 'error').mockImplementation(() => undefined);
    delete process.env.AUTH_PASS;
    resetConfig();
    try {
      const reply = await call(schemas, { path: '/api/schemas' });

      expect(reply.status).toBe(500);
      expect(reply.body).toEqual({ error: 'Service misconfigured', message: 'missing settings: AUTH_PASS' });
      expect(errors).toHaveBeenCalledWith('missing settings: AUTH_PASS');
    } finally {
      process.env.AUTH_PASS = saved;
      resetConfig();
      errors.mockRestore();
    }
  });
});
