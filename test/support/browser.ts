import { existsSync, rmSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';
import { type Host, startHost } from '#test/support/host';
import { ADMIN } from '#test/support/http';
import { licenseTestDatabase } from '#test/support/license-db';
import { TestLicenseServer } from '#test/support/license-server';
import { uniqueName } from '#test/support/names';

/** Debian's chromium (or CHROMIUM_PATH): playwright-core downloads no browser of its own. */
export function findChromium(): string | undefined {
  const candidates = [
    process.env.CHROMIUM_PATH,
    '/usr/bin/chromium',
    '/usr/bin/chromium-browser',
    '/usr/bin/google-chrome',
  ];
  return candidates.find((path): path is string => !!path && existsSync(path));
}

const chromiumPath = findChromium();
if (!chromiumPath) {
  console.warn(
    '\n*** BROWSER TESTS SKIPPED: no Chromium found (apt-get install -y chromium, or set CHROMIUM_PATH) ***\n',
  );
}

/** `describe` when a Chromium is installed, else `describe.skip` (and the warning above). */
export const describeInBrowser = chromiumPath ? describe : describe.skip;

/** The grid's cell in the row of `id`: the `column`th of its cells (0 is the row's checkbox). */
export const gridCell = (page: Page, id: number | string, column = 2) =>
  page
    .getByRole('row')
    .filter({ has: page.getByLabel(`Select row ${id}`, { exact: true }) })
    .locator('td')
    .nth(column);

/** Waits for the locator to hold `text`; failing, says what it held instead. */
export async function expectText(locator: ReturnType<Page['locator']>, text: string): Promise<void> {
  try {
    await locator.filter({ hasText: text }).first().waitFor({ timeout: 10_000 });
  } catch {
    throw new Error(
      `expected ${JSON.stringify(text)}, found ${JSON.stringify(await locator.first().textContent())}`,
    );
  }
}

/**
 * `npm start`'s real host on a database of its own, the real license server over HTTPS, and a
 * browser. The host trusts only the compiled-in signing keys, so the license server answers
 * unsigned, as a SPEC-only server would (status `verified: false`).
 */
export class ConsoleHarness {
  host!: Host;
  browser!: Browser;
  readonly licenseServer = new TestLicenseServer();
  private database: Awaited<ReturnType<typeof licenseTestDatabase>> | undefined;
  private buildDir = `.esbuild-browser-${process.pid}`;

  /** `env`: settings of the host beyond the harness's own; `port`: where it serves, when chosen ahead. */
  async start(env: NodeJS.ProcessEnv = {}, port?: number): Promise<void> {
    this.licenseServer.sign(false);
    await this.licenseServer.start();
    this.database = await licenseTestDatabase();
    this.host = await startHost(
      {
        ...process.env,
        DATABASE_URL: this.database.url,
        LICENSE_SERVER_URL: this.licenseServer.url,
        LICENSE_SERVER_CA_FILE: this.licenseServer.tls.caFile,
        DBADMIN_BUILD_DIR: this.buildDir,
        ...env,
      },
      undefined,
      { port },
    );
    this.browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  }

  async close(): Promise<void> {
    await this.browser?.close();
    await this.host?.stop();
    await this.licenseServer.close();
    await this.database?.drop();
    rmSync(this.buildDir, { recursive: true, force: true });
  }

  /** The host's database, as the service's role reaches it. */
  get databaseUrl(): string {
    if (!this.database) throw new Error('ConsoleHarness.start() first');
    return this.database.url;
  }

  get db() {
    if (!this.database) throw new Error('ConsoleHarness.start() first');
    return this.database.db;
  }

  /** A new tab, signed in through the form; page errors fail the test that reads `errors`. */
  async signedIn(hash = ''): Promise<{ page: Page; errors: string[] }> {
    const page = await this.browser.newPage({ viewport: { width: 1280, height: 760 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(`${this.host.base}/${hash}`);
    await page.getByLabel('User name').fill(ADMIN.user);
    await page.getByLabel('Password').fill(ADMIN.pass);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    return { page, errors };
  }

  /**
   * With DBADMIN_SCREENSHOTS=1, saves the page as docs/console-NAME.png (the README shows them):
   * `DBADMIN_SCREENSHOTS=1 npx jest test/browser` refreshes them.
   */
  async screenshot(page: Page, name: string): Promise<void> {
    if (process.env.DBADMIN_SCREENSHOTS !== '1') return;
    await page.evaluate('document.fonts.ready');
    await page.screenshot({ path: `docs/console-${name}.png` });
  }

  /** A schema of its own for a test, with `sql` run in it (the tables and rows it starts from). */
  async schemaWith(sql: string): Promise<string> {
    const schema = uniqueName('web');
    const created = await this.api('POST', 'schema/create', {
      schemaName: schema,
      password: 'pw-0123456789',
    });
    if (created.status !== 201)
      throw new Error(`schema ${schema} not created: ${JSON.stringify(created.body)}`);
    const ran = await this.api('POST', 'query', { schema, sql });
    if (ran.status !== 200) throw new Error(`${sql}: ${JSON.stringify(ran.body)}`);
    return schema;
  }

  /** Runs `sql` in `schema` as the schema's own role (its tables are the tenant's, as a migration needs). */
  async runIn(schema: string, sql: string): Promise<void> {
    const ran = await this.api('POST', 'query', { schema, sql, runAs: 'schema' });
    if (ran.status !== 200) throw new Error(`${sql}: ${JSON.stringify(ran.body)}`);
  }

  /** Calls the API as the admin (setting up what a test needs, or checking what the console did). */
  async api<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const response = await fetch(`${this.host.base}/api/${path}`, {
      method,
      headers: {
        authorization: `Basic ${Buffer.from(`${ADMIN.user}:${ADMIN.pass}`).toString('base64')}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
  }
}
