import pg from 'pg';
import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';
import { uniqueName } from '#test/support/names';

/**
 * The tenants page in a real Chromium through `npm start`'s host: the operator finds a tenant's
 * long-running statement and ends its session.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();

describeInBrowser('the tenants page', () => {
  beforeAll(async () => {
    await h.start();
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
  }, 180_000);
  afterAll(() => h.close());

  it('lists the tenants, finds a long-running statement of one, and ends its session', async () => {
    const schema = uniqueName('web');
    const password = 'pw-0123456789';
    expect((await h.api('POST', 'schema/create', { schemaName: schema, password })).status).toBe(201);
    const url = new URL(h.databaseUrl);
    url.username = `${schema}_user`;
    url.password = password;
    const tenant = new pg.Client({ connectionString: url.toString() });
    tenant.on('error', () => undefined);
    await tenant.connect();
    const sleeping = tenant.query('SELECT pg_sleep(60) AS long_report').catch((error: Error) => error);
    try {
      const { page, errors } = await h.signedIn('#/tenants');
      await page.getByLabel('Sort tenants by').selectOption('active');
      const row = page
        .getByRole('row')
        .filter({ has: page.getByRole('link', { name: schema, exact: true }) });
      await expectText(row, '1');
      await row.getByRole('link', { name: schema, exact: true }).click();

      const sessions = page.getByRole('table', { name: `Sessions of ${schema}` });
      const statement = sessions.getByRole('row').filter({ hasText: 'long_report' });
      await expectText(statement, 'Timeout: PgSleep');
      await h.screenshot(page, 'tenant');
      await statement.getByRole('button', { name: 'End' }).click();
      await page.getByRole('dialog').getByRole('button', { name: 'End session' }).click();

      expect(String(await sleeping)).toMatch(/terminating connection due to administrator command/);
      await statement.waitFor({ state: 'detached' });
      expect(errors).toEqual([]);
    } finally {
      await tenant.end().catch(() => undefined);
    }
  });
});
