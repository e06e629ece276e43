import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { makeTestTls, type TestTls } from '#test/support/tls';

interface License {
  email: string;
  status: 'active' | 'revoked';
  type: 'trial' | 'paid';
  expiresAt: string | null;
  maxDeployments: number;
  machines: Set<string>;
}

/**
 * A small HTTPS license server with SPEC.md's validate/activate answers, for the service's tests
 * until the real one (license-server/) exists. Its CA is made at test time.
 */
export class FakeLicenseServer {
  readonly licenses = new Map<string, License>();
  requests = 0;
  private server: Server | undefined;
  tls!: TestTls;
  url = '';

  issue(key: string, email: string, options: Partial<Omit<License, 'machines'>> = {}): void {
    this.licenses.set(key, {
      email,
      status: 'active',
      type: 'paid',
      expiresAt: null,
      maxDeployments: 5,
      ...options,
      machines: new Set(),
    });
  }

  revoke(key: string): void {
    const license = this.licenses.get(key);
    if (license) license.status = 'revoked';
  }

  private validate(license: License, machineId?: string) {
    return {
      valid: true,
      activated: machineId ? license.machines.has(machineId) : undefined,
      message: 'License is valid',
      type: license.type,
      expiresAt: license.expiresAt,
    };
  }

  private activate(license: License, machineId: string) {
    if (license.machines.has(machineId)) return { success: true, message: 'Already activated' };
    if (license.machines.size >= license.maxDeployments) {
      return {
        success: false,
        message: 'Deployment limit reached. Deactivate an existing deployment first.',
      };
    }
    license.machines.add(machineId);
    return { success: true, message: 'License activated' };
  }

  private answer(path: string, body: { licenseKey?: string; machineId?: string; email?: string }) {
    const license = body.licenseKey ? this.licenses.get(body.licenseKey) : undefined;
    const validating = path === '/api/license/validate';
    if (license?.status !== 'active') {
      return validating
        ? { valid: false, message: 'License key not found or inactive' }
        : { success: false, message: 'Invalid license' };
    }
    if (body.email && body.email.trim().toLowerCase() !== license.email.toLowerCase()) {
      return validating
        ? { valid: false, message: 'Email mismatch' }
        : { success: false, message: 'Email mismatch' };
    }
    return validating ? this.validate(license, body.machineId) : this.activate(license, body.machineId ?? '');
  }

  async start(): Promise<void> {
    this.tls ??= await makeTestTls();
    const server = createServer({ key: this.tls.key, cert: this.tls.cert }, (req, res) => {
      let text = '';
      req.on('data', (chunk) => (text += chunk));
      req.on('end', () => {
        this.requests++;
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify(this.answer(req.url ?? '', JSON.parse(text))));
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
}
