import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../bin/free-port';
import { makeTestTls, type TestTls } from './tls';

/** Claims of an account at the test provider, by its login there. */
export type Accounts = Record<string, Record<string, unknown>>;

/**
 * The real OpenID Provider (oidc-provider) in its own process over HTTPS, with a CA made for the
 * run (test/support/oidc-provider-server.mjs), and one client registered for dbadmin.
 */
export class TestOidcProvider {
  readonly clientId = 'dbadmin';

  private constructor(
    readonly issuer: string,
    readonly clientSecret: string,
    readonly tls: TestTls,
    private readonly child: ChildProcess,
    private readonly accountsFile: string,
  ) {}

  /** Changes the accounts' claims (their groups) for the next sign-in. */
  setAccounts(accounts: Accounts): void {
    writeFileSync(this.accountsFile, JSON.stringify(accounts));
  }

  static async start(redirectUris: string[], accounts: Accounts = {}): Promise<TestOidcProvider> {
    const tls = await makeTestTls();
    const dir = mkdtempSync(join(tmpdir(), 'dbadmin-oidc-'));
    writeFileSync(join(dir, 'cert.pem'), tls.cert);
    writeFileSync(join(dir, 'key.pem'), tls.key);
    writeFileSync(join(dir, 'accounts.json'), JSON.stringify(accounts));
    const port = await freePort();
    const issuer = `https://127.0.0.1:${port}`;
    const secret = randomBytes(16).toString('hex');
    const child = spawn(process.execPath, [join(__dirname, 'oidc-provider-server.mjs')], {
      env: {
        PATH: process.env.PATH,
        OIDC_TEST_ISSUER: issuer,
        OIDC_TEST_PORT: String(port),
        OIDC_TEST_CERT_FILE: join(dir, 'cert.pem'),
        OIDC_TEST_KEY_FILE: join(dir, 'key.pem'),
        OIDC_TEST_CLIENT_ID: 'dbadmin',
        OIDC_TEST_CLIENT_SECRET: secret,
        OIDC_TEST_REDIRECT_URIS: JSON.stringify(redirectUris),
        OIDC_TEST_ACCOUNTS_FILE: join(dir, 'accounts.json'),
        OIDC_TEST_COOKIE_KEY: randomBytes(16).toString('hex'),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let said = '';
    await new Promise<void>((resolve, reject) => {
      const listen = (chunk: Buffer) => {
        said += chunk.toString();
        if (said.includes('oidc-provider listening')) resolve();
      };
      child.stdout?.on('data', listen);
      child.stderr?.on('data', (chunk: Buffer) => {
        said += chunk.toString();
      });
      child.once('exit', (code) => reject(new Error(`the OpenID provider exited (${code}): ${said}`)));
    });
    return new TestOidcProvider(issuer, secret, tls, child, join(dir, 'accounts.json'));
  }

  /** The service's settings for this provider, as an operator would write them. */
  settings(redirectUri: string, extra: Record<string, string> = {}): Record<string, string> {
    return {
      OIDC_ISSUER: this.issuer,
      OIDC_CLIENT_ID: this.clientId,
      OIDC_CLIENT_SECRET: this.clientSecret,
      OIDC_REDIRECT_URI: redirectUri,
      OIDC_SCOPES: 'openid email profile groups',
      OIDC_CA_FILE: this.tls.caFile,
      ...extra,
    };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGTERM');
    await exited;
  }

  /**
   * Signs in at the provider as `login`, as a browser would (its cookies, its forms: the login,
   * then the consent), from the authorization URL dbadmin sent the browser to; answers the URL the
   * provider then sends the browser back to, unvisited.
   */
  async signIn(authorizationUrl: string, login: string): Promise<URL> {
    const jar = new Map<string, string>();
    let next: { url: URL; method: string; form?: URLSearchParams } = {
      url: new URL(authorizationUrl),
      method: 'GET',
    };
    for (let step = 0; step < 20; step++) {
      if (next.url.origin !== this.issuer) return next.url;
      const answer = await this.fetch(next.url, next.method, jar, next.form);
      const location = answer.headers.location;
      if (answer.status >= 300 && answer.status < 400 && typeof location === 'string') {
        next = { url: new URL(location, next.url), method: 'GET' };
        continue;
      }
      const action = /<form[^>]*action="([^"]+)"/.exec(answer.body)?.[1];
      const prompt = /name="prompt" value="([a-z]+)"/.exec(answer.body)?.[1];
      if (answer.status !== 200 || !action || !prompt)
        throw new Error(`the provider answered ${answer.status}: ${answer.body.slice(0, 500)}`);
      const form = new URLSearchParams(prompt === 'login' ? { prompt, login, password: 'any' } : { prompt });
      next = { url: new URL(action.replaceAll('&amp;', '&'), next.url), method: 'POST', form };
    }
    throw new Error('the provider kept the browser going round');
  }

  private fetch(
    url: URL,
    method: string,
    jar: Map<string, string>,
    form: URLSearchParams | undefined,
  ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
    const body = form?.toString();
    const headers: Record<string, string> = {
      cookie: [...jar].map(([name, value]) => `${name}=${value}`).join('; '),
      ...(body ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
    };
    return new Promise((resolve, reject) => {
      const req = request(url, { method, headers, ca: this.tls.ca }, (res) => {
        for (const cookie of res.headers['set-cookie'] ?? []) {
          const [pair] = cookie.split(';');
          const at = pair?.indexOf('=') ?? -1;
          if (pair && at > 0) jar.set(pair.slice(0, at), pair.slice(at + 1));
        }
        let text = '';
        res.on('data', (chunk: Buffer) => {
          text += chunk.toString();
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      });
      req.on('error', reject);
      req.end(body);
    });
  }
}
