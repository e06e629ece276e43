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

  it('shows the service’s pooled session at rest as the pool’s, not its reset as a statement', async () => {
    const schema = uniqueName('webp');
    expect(
      (await h.api('POST', 'schema/create', { schemaName: schema, password: 'pw-0123456789' })).status,
    ).toBe(201);
    // Run as the schema's role on the host's pool: the session goes back to it reset, and idle.
    expect((await h.api('POST', 'query', { schema, sql: 'SELECT 1 AS one' })).status).toBe(200);

    const { page, errors } = await h.signedIn(`#/tenants/${schema}`);
    const sessions = page.getByRole('table', { name: `Sessions of ${schema}` });
    const pooled = sessions.getByRole('row').filter({ hasText: `${schema}_exec` });
    await expectText(pooled, 'in the service’s pool, reset for its next request');
    await expectText(pooled, 'idle');
    expect(await sessions.getByText('CLOSE ALL').count()).toBe(0);
    expect(errors).toEqual([]);
  });

  it('sets a storage quota that refuses writes, and finds the changes in the audit log', async () => {
    const schema = uniqueName('webq');
    expect(
      (await h.api('POST', 'schema/create', { schemaName: schema, password: 'pw-0123456789' })).status,
    ).toBe(201);
    const sql = `CREATE TABLE ${schema}.notes (id serial PRIMARY KEY, body text);
      INSERT INTO ${schema}.notes (body) SELECT repeat('n', 400) FROM generate_series(1, 300)`;
    expect((await h.api('POST', 'query', { sql, schema, runAs: 'schema' })).status).toBe(200);

    const { page, errors } = await h.signedIn(`#/tenants/${schema}`);
    await page.getByLabel('Storage quota (MiB)').fill('0.05');
    await page.getByLabel('Statement timeout (ms)').fill('5000');
    await page.getByRole('button', { name: 'Save quotas' }).click();
    await expectText(page.getByTestId('storage-use'), 'over it, writes that add data answer 507');
    const refused = await h.api('POST', 'table/notes/row', { schema, data: { body: 'more' } });
    expect(refused.status).toBe(507);

    await page.getByRole('link', { name: 'Its audit log' }).click();
    const log = page.getByRole('table', { name: 'Audit log' });
    await expectText(log.getByRole('row').filter({ hasText: 'tenant.quota' }), `schema ${schema}`);
    await expectText(log.getByRole('row').filter({ hasText: 'sql.run' }), 'CREATE TABLE, INSERT');
    await page.getByLabel('Action').fill('schema');
    await page.getByRole('button', { name: 'Show' }).click();
    await expectText(log.getByRole('row').filter({ hasText: 'schema.create' }), 'admin');
    await log.getByRole('row').filter({ hasText: 'sql.run' }).waitFor({ state: 'detached' });
    await h.screenshot(page, 'audit');
    expect(errors).toEqual([]);
  });
});
