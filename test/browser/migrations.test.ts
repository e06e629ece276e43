import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';
import { uniqueName } from '#test/support/names';

/**
 * Templates and migrations in a real Chromium through `npm start`'s host: a schema started from a
 * template in the console, then one change across the template and its copies, previewed, run
 * to the end, with the copy that lost its table failing alone and offered a retry; the tenants
 * page then shows that copy drifted from its template, and what it lacks. A person without the
 * permission is not offered the page.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();
const PASSWORD = 'pw-0123456789';

describeInBrowser('templates and migrations in the console', () => {
  beforeAll(async () => {
    await h.start();
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
  }, 180_000);
  afterAll(() => h.close());

  it('starts a schema from a template, and migrates the template and its copies', async () => {
    const base = uniqueName('base');
    const copy = uniqueName('copy');
    const broken = uniqueName('copy');
    expect((await h.api('POST', 'schema/create', { schemaName: base, password: PASSWORD })).status).toBe(201);
    await h.runIn(base, 'CREATE TABLE items (id int PRIMARY KEY, name text)');

    const { page, errors } = await h.signedIn('#/schemas');
    const create = page.getByRole('form', { name: 'Create a schema' });
    await create.getByLabel('Name').fill(copy);
    await create.getByLabel('Password for its database user').fill(PASSWORD);
    await create.getByLabel('Start from').selectOption(base);
    await create.getByLabel('Copy its rows too').waitFor();
    await create.getByRole('button', { name: 'Create schema' }).click();
    await expectText(create.getByRole('status'), `Schema ${copy} created from template ${base} with 1 table`);

    // One more copy, whose table is gone: the migration fails there, and there alone.
    const made = await h.api('POST', 'schema/create', {
      schemaName: broken,
      password: PASSWORD,
      template: base,
    });
    expect(made.status).toBe(201);
    await h.runIn(broken, 'DROP TABLE items');

    await page.getByRole('link', { name: 'Migrations', exact: true }).click();
    const form = page.getByRole('form', { name: 'New migration' });
    const name = uniqueName('2026-11-28-add-note');
    await form.getByLabel('Name').fill(name);
    await form.getByLabel('SQL').fill('ALTER TABLE items ADD COLUMN note text');
    await form.getByLabel('a template and its copies').check();
    await form.getByLabel('Template', { exact: true }).selectOption(base);
    await form.getByRole('button', { name: 'Preview' }).click();
    const preview = form.getByRole('status', { name: 'Preview' });
    await expectText(preview, 'locks items in ACCESS EXCLUSIVE mode');
    await expectText(preview, '3 schemas to change, 0 skipped (already applied)');

    await form.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('heading', { name: `Migrations / ${name}` }).waitFor();
    await page.getByRole('button', { name: 'Run', exact: true }).click();
    const progress = page.getByRole('status', { name: 'Progress' });
    await expectText(progress, 'The migration is done: 2 applied, 1 failed, 0 skipped');
    expect(await page.getByRole('button', { name: 'Run', exact: true }).count()).toBe(0);

    const failed = page
      .getByRole('table', { name: 'Failed schemas' })
      .getByRole('row')
      .filter({ hasText: broken });
    await expectText(failed, '42P01');
    await expectText(failed, 'relation "items" does not exist');
    expect(await failed.getByRole('button', { name: 'Retry', exact: true }).count()).toBe(1);
    await page.getByRole('button', { name: 'Retry all failed' }).waitFor();
    const all = page.getByRole('table', { name: 'Schemas of the migration' });
    await expectText(all.getByRole('row').filter({ hasText: copy }), 'applied');

    // The column is there in the copy made in the console.
    expect((await h.api('POST', 'query', { schema: copy, sql: 'SELECT note FROM items' })).status).toBe(200);

    // The tenants page shows at a glance which copy no longer matches its template, and why.
    await page.getByRole('link', { name: 'Tenants', exact: true }).click();
    const tenants = page.getByRole('table', { name: 'Tenants' });
    await expectText(tenants.getByRole('row').filter({ hasText: copy }), `${base}: matches`);
    await expectText(tenants.getByRole('row').filter({ hasText: broken }), `${base}: drifted`);
    await tenants.getByRole('link', { name: broken }).click();
    const drift = page.getByRole('region', { name: 'Drift' });
    await drift.getByRole('button', { name: 'Compare' }).click();
    await expectText(drift.getByRole('status'), `Differs from ${base}: 5 missing, 0 extra, 0 different.`);
    await expectText(drift, 'table items');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('leaves the Migrations link out for a person without the permission', async () => {
    const login = `${uniqueName('analyst')}@example.com`;
    const password = 'a long analyst password';
    expect((await h.api('POST', 'people', { login, role: 'analyst', password })).status).toBe(201);
    const analyst = await h.browser.newPage({ viewport: { width: 1280, height: 760 } });
    await analyst.goto(`${h.host.base}/#/schemas`);
    await analyst.getByLabel('User name').fill(login);
    await analyst.getByLabel('Password').fill(password);
    await analyst.getByRole('button', { name: 'Sign in' }).click();
    await analyst.getByRole('link', { name: 'Tenants', exact: true }).waitFor();
    expect(await analyst.getByRole('link', { name: 'Migrations', exact: true }).count()).toBe(0);
    await analyst.close();
  });
});
