import { handler as consoleHandler } from '#functions/console';
import { handler as schemasHandler } from '#functions/schemas';
import { call, httpEvent, lambdaContext } from '#test/support/http';

/**
 * The web console's page as a browser's attacker would meet it: no script but our own files, no
 * framing, nothing cached that holds data; and the console's marker header weakens nothing.
 */
const page = async () =>
  (await consoleHandler(
    httpEvent({ method: 'GET', path: '/', auth: null }) as never,
    lambdaContext(),
    {} as never,
  )) as {
    headers: Record<string, string>;
    body: string;
  };

describe('the console page', () => {
  it('allows only this origin’s scripts, styles by nonce, no framing, no plugins, no foreign forms', async () => {
    const policy = (await page()).headers['content-security-policy'] ?? '';
    const directives = Object.fromEntries(
      policy.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)]),
    );

    expect(directives['default-src']).toEqual(["'self'"]);
    expect(directives['script-src']).toEqual(["'self'"]);
    expect(directives['style-src']?.[0]).toBe("'self'");
    expect(directives['style-src']?.[1]).toMatch(/^'nonce-[A-Za-z0-9+/=]{20,}'$/);
    expect(directives['frame-ancestors']).toEqual(["'none'"]);
    expect(directives['object-src']).toEqual(["'none'"]);
    expect(directives['form-action']).toEqual(["'self'"]);
    expect(directives['base-uri']).toEqual(["'none'"]);
    expect(policy).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  });

  it('has no inline script for the policy to have to allow', async () => {
    const { body } = await page();

    expect(body.match(/<script\b[^>]*>/g)?.every((tag) => /\bsrc="assets\//.test(tag))).toBe(true);
    expect(body).not.toMatch(/<script\b[^>]*>[^<]+<\/script>/);
  });
});

describe('a 401 to the console', () => {
  it('carries no WWW-Authenticate, so the browser shows no dialog of its own; other clients get the challenge', async () => {
    const wrong = { user: 'test-admin', pass: 'wrong' };
    const fromConsole = await call(schemasHandler, {
      path: '/api/schemas',
      auth: wrong,
      headers: { 'X-Requested-With': 'dbadmin-console' },
    });
    const fromCurl = await call(schemasHandler, { path: '/api/schemas', auth: wrong });

    expect(fromConsole.status).toBe(401);
    expect(fromConsole.body).toEqual({ error: 'Unauthorized', message: 'Invalid credentials' });
    expect(Object.keys(fromConsole.headers).map((h) => h.toLowerCase())).not.toContain('www-authenticate');
    expect(fromCurl.headers['WWW-Authenticate']).toBe('Basic realm="dbadmin"');
  });
});

describe('the console marker header', () => {
  it('grants nothing: without credentials the API still answers 401', async () => {
    const reply = await call(schemasHandler, {
      path: '/api/schemas',
      auth: null,
      headers: { 'X-Requested-With': 'dbadmin-console' },
    });

    expect(reply.status).toBe(401);
    expect(reply.body).toEqual({ error: 'Unauthorized', message: 'Authentication required' });
  });
});
