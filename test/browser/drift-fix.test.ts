import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';
import { uniqueName } from '#test/support/names';

/**
 * Bringing a drifted copy back in line from its tenant page, in a real Chromium: the fix's SQL is
 * shown with its locks and a warning that it drops a column, made a migration over the copy alone,
 * run from the migration's page, and the copy then matches its template again. A person without
 * the migrations permission reads the fix but is not offered the migration.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();
const PASSWORD = 'pw-0123456789';

describeInBrowser('bringing a drifted schema back in line in the console', () => {
  const base = uniqueName('base');
  const copy = uniqueName('copy');

  beforeAll(async () => {
    await h.start();
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
    expect((await h.api('POST', 'schema/create', { schemaName: base, password: PASSWORD })).status).toBe(201);
    await h.runIn(
      base,
      'CREATE TABLE items (id int PRIMARY KEY, name text); CREATE INDEX items_name ON items (name)',
    );
    const made = await h.api('POST', 'schema/create', {
      schemaName: copy,
      password: PASSWORD,
      template: base,
    });
    expect(made.status).toBe(201);
    await h.runIn(copy, 'DROP INDEX items_name; ALTER TABLE items ADD COLUMN extra text');
  }, 180_000);
  afterAll(() => h.close());

  it('shows a person without the migrations permission the fix, without Create migration', async () => {
    const login = `${uniqueName('analyst')}@example.com`;
    const password = 'a long analyst password';
    expect((await h.api('POST', 'people', { login, role: 'analyst', password })).status).toBe(201);
    const analyst = await h.browser.newPage({ viewport: { width: 1280, height: 760 } });
    await analyst.goto(`${h.host.base}/#/tenants/${copy}`);
    await analyst.getByLabel('User name').fill(login);
    await analyst.getByLabel('Password').fill(password);
    await analyst.getByRole('button', { name: 'Sign in' }).click();
    const drift = analyst.getByRole('region', { name: 'Drift' });
    await drift.getByRole('button', { name: 'Compare' }).click();
    await drift.getByRole('button', { name: 'Bring back in line' }).click();
    await expectText(drift.locator('pre'), 'CREATE INDEX items_name');
    expect(await drift.getByRole('button', { name: 'Create migration' }).count()).toBe(0);
    await analyst.close();
  });

  it('writes the fix as a migration over the copy, which runs and leaves no drift', async () => {
    const { page, errors } = await h.signedIn(`#/tenants/${copy}`);
    const drift = page.getByRole('region', { name: 'Drift' });
    await drift.getByRole('button', { name: 'Compare' }).click();
    await expectText(drift.getByRole('status'), `Differs from ${base}:`);

    await drift.getByRole('button', { name: 'Bring back in line' }).click();
    const fix = drift.getByRole('region', { name: 'Bring back in line' });
    await expectText(fix.locator('pre'), 'ALTER TABLE "items" DROP COLUMN "extra"');
    await expectText(fix.locator('pre'), 'CREATE INDEX items_name ON items');
    await expectText(fix, 'items in ACCESS EXCLUSIVE mode');
    await expectText(fix, 'drops tables, columns, functions, types or sequences: their rows are gone');

    await fix.getByRole('button', { name: 'Create migration' }).click();
    await page
      .getByRole('heading', { name: new RegExp(`^Migrations / fix-${copy}-\\d{8}T\\d{6}$`) })
      .waitFor();
    await expectText(page.locator('pre.migration-sql'), 'DROP COLUMN "extra"');
    await expectText(page.locator('dl.facts'), copy);
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    await expectText(
      page.getByRole('status', { name: 'Progress' }),
      'The migration is done: 1 applied, 0 failed',
    );

    const after = await h.api<{ same: boolean }>('GET', `drift/${copy}`);
    expect(after.status).toBe(200);
    expect(after.body.same).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  });
});
