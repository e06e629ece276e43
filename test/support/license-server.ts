import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { newSigningKey, type TrustedKey } from '#lib/license/lease';
import { httpEvent, lambdaContext } from '#test/support/http';
import { makeTestTls, type TestTls } from '#test/support/tls';
import { handler, resetLicenseServer } from '../../license-server/functions/license';
import { serverClock } from '../../license-server/lib/clock';
import { closeLicenseDatabase, licenseDatabase } from '../../license-server/lib/db';
import { issueLicense, revoke } from '../../license-server/lib/store';
import { directUrl } from './db';

// Answers are rewritten freely by attacks.
type Body = any;

/**
 * The real license server (license-server/: its handler, store and database) behind an HTTPS
 * listener with a CA made at test time, the way API Gateway or serverless-offline would serve it.
 */
export class TestLicenseServer {
  private server: Server | undefined;
  tls!: TestTls;
  url = '';
  requests = 0;
  /** This run's signing key: the service under test trusts `trustedKeys`, nothing else. */
  readonly signing = newSigningKey();
  /** Rewrites an answer before it leaves, as a man in the middle or a fake server would. */
  intercept: ((body: Body, path: string) => Body) | undefined;

  constructor(options: { clock?: () => Date } = {}) {
    // The license server is a deployable of its own: it reaches PostgreSQL directly.
    process.env.LICENSE_SERVER_DATABASE_URL ??= directUrl();
    this.sign(true);
    if (options.clock) serverClock.now = options.clock;
  }

  get trustedKeys(): readonly TrustedKey[] {
    return [this.signing.trusted];
  }

  /** Signs answers (our server) or not (a server that follows SPEC.md only). */
  sign(on: boolean): void {
    if (on) process.env.LICENSE_SERVER_SIGNING_KEY = this.signing.privateKey;
    else delete process.env.LICENSE_SERVER_SIGNING_KEY;
    resetLicenseServer();
  }

  async issue(
    email: string,
    options: { type?: 'trial' | 'paid'; maxDeployments?: number; expiresAt?: string | null } = {},
  ): Promise<string> {
    const license = await issueLicense(await licenseDatabase(), {
      email,
      type: options.type ?? 'paid',
      maxDeployments: options.maxDeployments ?? 5,
      expiresAt: options.expiresAt ? new Date(options.expiresAt) : null,
    });
    return license.licenseKey;
  }

  async revoke(key: string): Promise<void> {
    await revoke(await licenseDatabase(), key);
  }

  async start(): Promise<void> {
    this.tls ??= await makeTestTls();
    const server = createServer({ key: this.tls.key, cert: this.tls.cert }, (req, res) => {
      let text = '';
      req.on('data', (chunk) => (text += chunk));
      req.on('end', async () => {
        this.requests++;
        const event = httpEvent({
          method: req.method ?? 'GET',
          path: req.url ?? '/',
          body: text,
          auth: null,
          headers: { 'content-type': String(req.headers['content-type'] ?? 'application/json') },
        });
        const reply = (await handler(event as never, lambdaContext(), {} as never)) as {
          statusCode: number;
          headers: Record<string, string>;
          body: string;
        };
        let body = reply.body;
        if (this.intercept) {
          body = JSON.stringify(this.intercept(JSON.parse(body), req.url ?? '/'));
          delete reply.headers['Content-Length'];
          delete reply.headers['content-length'];
        }
        res.writeHead(reply.statusCode, reply.headers).end(body);
      });
    });
    const port = this.url ? Number(new URL(this.url).port) : 0;
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.url = `https://localhost:${(server.address() as AddressInfo).port}`;
    this.server = server;
  }

  /** Stops answering, as an unreachable server; start() brings it back on the same port. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    server?.closeAllConnections();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  }

  /** Stops the listener and closes the server's database pool (afterAll). */
  async close(): Promise<void> {
    await this.stop();
    resetLicenseServer();
    serverClock.now = () => new Date();
    await closeLicenseDatabase();
  }
}
