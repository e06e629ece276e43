import { gunzipSync } from 'node:zlib';
import { handler as consoleHandler } from '#functions/console';
import { call, httpEvent, lambdaContext } from '#test/support/http';
import bundle from '../../console/dist/bundle.json';

const raw = async (path: string, headers: Record<string, string> = {}) =>
  (await consoleHandler(
    httpEvent({ method: 'GET', path, auth: null, headers }) as never,
    lambdaContext(),
    {} as never,
  )) as {
    statusCode: number;
    headers: Record<string, string>;
    body: string;
    isBase64Encoded?: boolean;
  };

describe('the console function', () => {
  it('serves the page uncached, with a same-origin policy and a fresh style nonce each time', async () => {
    const first = await raw('/');
    const second = await raw('/');

    expect(first.statusCode).toBe(200);
    expect(first.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(first.headers['cache-control']).toBe('no-cache');
    const policy = first.headers['content-security-policy'] ?? '';
    expect(policy).toMatch(/default-src 'self'; script-src 'self';/);
    expect(policy).not.toMatch(/unsafe-inline|unsafe-eval/);
    const nonce = /'nonce-([^']+)'/.exec(policy)?.[1];
    expect(first.body).toContain(`content="${nonce}"`);
    expect(second.headers['content-security-policy']).not.toBe(policy);
    // Relative URLs: the page works under an API Gateway stage prefix.
    expect(first.body).toContain(`src="assets/${bundle.script}"`);
    expect(first.body).toContain(`href="assets/${bundle.style}"`);
  });

  it('serves hashed assets for a year, gzipped when the client accepts it', async () => {
    const plain = await raw(`/assets/${bundle.script}`);
    const zipped = await raw(`/assets/${bundle.script}`, { 'accept-encoding': 'gzip, br' });

    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(zipped.isBase64Encoded).toBe(true);
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(Buffer.from(zipped.body, 'base64')).toString()).toBe(plain.body);
    expect(zipped.body.length).toBeLessThan(plain.body.length);
  });

  it('answers an unknown asset (an old page after a release) with 404 and what to do', async () => {
    const reply = await call(consoleHandler, { path: '/assets/main-OLD.js', auth: null });

    expect(reply.status).toBe(404);
    expect(reply.body).toMatchObject({
      error: 'Not found',
      message: expect.stringMatching(/reload the page/),
    });
  });
});
