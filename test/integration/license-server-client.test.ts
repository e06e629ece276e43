import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  LicenseServerMisconfigured,
  LicenseServerUnreachable,
  licenseServerClient,
  singleFlight,
} from '#lib/license/server-client';
import { makeTestTls, type TestTls } from '#test/support/tls';

let tls: TestTls;
let server: Server;
let url: string;
const seen: { path: string; body: unknown }[] = [];
let answer: (path: string) => { status: number; body: string } | 'hang' = () => ({ status: 200, body: '{}' });

beforeAll(async () => {
  tls = await makeTestTls();
  server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    let text = '';
    req.on('data', (chunk) => (text += chunk));
    req.on('end', () => {
      seen.push({ path: req.url ?? '', body: JSON.parse(text) });
      const reply = answer(req.url ?? '');
      if (reply === 'hang') return;
      res.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://localhost:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  seen.length = 0;
});

describe('licenseServerClient', () => {
  it('validates over HTTPS with the extra CA and reads the answer', async () => {
    answer = () => ({
      status: 200,
      body: JSON.stringify({ valid: true, activated: true, type: 'paid', expiresAt: null }),
    });

    const reply = await licenseServerClient({ url, caFile: tls.caFile }).validate({
      licenseKey: 'K',
      machineId: 'M',
    });

    expect(reply).toEqual({ valid: true, activated: true, type: 'paid', expiresAt: null });
    expect(seen).toEqual([{ path: '/api/license/validate', body: { licenseKey: 'K', machineId: 'M' } }]);
  });

  it('accepts a server that sends only `valid`', async () => {
    answer = () => ({ status: 200, body: '{"valid":false}' });

    expect(await licenseServerClient({ url, caFile: tls.caFile }).validate({ licenseKey: 'K' })).toEqual({
      valid: false,
    });
  });

  it('activates with the SPEC body', async () => {
    answer = () => ({ status: 200, body: '{"success":true,"message":"Already activated"}' });

    const reply = await licenseServerClient({ url, caFile: tls.caFile }).activate({
      licenseKey: 'K',
      machineId: 'M',
      email: 'e@x.io',
    });

    expect(reply).toEqual({ success: true, message: 'Already activated' });
    expect(seen[0]?.path).toBe('/api/license/activate');
  });

  it('refuses a certificate it cannot verify: unreachable, never trusted', async () => {
    const attempt = licenseServerClient({ url }).validate({ licenseKey: 'K' });

    await expect(attempt).rejects.toBeInstanceOf(LicenseServerUnreachable);
    await expect(attempt).rejects.toThrow('Unable to connect to license server');
    expect(seen).toHaveLength(0);
  });

  it('refuses http:// and a missing URL with clear messages', () => {
    expect(() => licenseServerClient({ url: url.replace('https', 'http') })).toThrow(
      LicenseServerMisconfigured,
    );
    expect(() => licenseServerClient({ url: 'http://license.example' })).toThrow(/must be an https:\/\/ URL/);
    expect(() => licenseServerClient({ url: undefined })).toThrow('LICENSE_SERVER_URL not configured');
  });

  it('gives up after its timeout', async () => {
    answer = () => 'hang';

    await expect(
      licenseServerClient({ url, caFile: tls.caFile, timeoutMs: 150 }).validate({ licenseKey: 'K' }),
    ).rejects.toBeInstanceOf(LicenseServerUnreachable);
  });

  it('treats an answer it cannot read as unreachable', async () => {
    answer = () => ({ status: 502, body: '<html>bad gateway</html>' });

    await expect(
      licenseServerClient({ url, caFile: tls.caFile }).validate({ licenseKey: 'K' }),
    ).rejects.toBeInstanceOf(LicenseServerUnreachable);
  });

  it('is unreachable when nothing listens', async () => {
    const closed = licenseServerClient({ url: 'https://127.0.0.1:1', caFile: tls.caFile });

    await expect(closed.validate({ licenseKey: 'K' })).rejects.toBeInstanceOf(LicenseServerUnreachable);
  });
});

describe('singleFlight', () => {
  it('sends one request for many callers that arrive together', async () => {
    answer = () => ({ status: 200, body: '{"valid":true}' });
    const client = licenseServerClient({ url, caFile: tls.caFile });
    const validate = singleFlight(() => client.validate({ licenseKey: 'K' }));

    const replies = await Promise.all(Array.from({ length: 20 }, () => validate()));

    expect(replies.every((r) => r.valid)).toBe(true);
    expect(seen).toHaveLength(1);
    await validate();
    expect(seen).toHaveLength(2);
  });
});
