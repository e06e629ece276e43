import type { Page } from 'playwright-core';
import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';
import { uniqueName } from '#test/support/names';

/**
 * A team in a real Chromium, through `npm start`'s host: the owner invites an analyst scoped to
 * one schema; the analyst sets a password from the link, reads that schema, cannot see another,
 * is offered no change and cannot make one; the owner removes them and their open session stops
 * on its next request.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();

/** A change as the page's own script would send it: the session's cookie and CSRF token. */
const insertFromPage = (page: Page, schema: string) =>
  page.evaluate(async (schema) => {
    const who = (await (await fetch('api/session')).json()) as { csrfToken?: string };
    const response = await fetch('api/table/items/row', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': who.csrfToken ?? '' },
      body: JSON.stringify({ schema, data: { name: 'from the analyst' } }),
    });
    return response.status;
  }, schema);

/** Which of these buttons (their exact names, as the console words them) the page shows. */
async function buttonsShown(page: Page, names: string[]): Promise<string[]> {
  const counts = await Promise.all(
    names.map((name) => page.getByRole('button', { name, exact: true }).count()),
  );
  return names.filter((_, index) => (counts[index] ?? 0) > 0);
}

describeInBrowser('people in the console', () => {
  beforeAll(async () => {
    await h.start();
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
  }, 180_000);
  afterAll(() => h.close());

  it('an owner invites a scoped analyst, who reads and changes nothing, until removed', async () => {
    const mine = await h.schemaWith(
      "CREATE TABLE items (id serial PRIMARY KEY, name text); INSERT INTO items (name) VALUES ('visible row')",
    );
    const other = await h.schemaWith('CREATE TABLE secrets (id serial PRIMARY KEY)');
    const login = `${uniqueName('analyst')}@example.com`;

    const { page: owner, errors } = await h.signedIn('#/people');
    const form = owner.getByRole('form', { name: 'Add a person' });
    await form.getByLabel('Login').fill(login);
    await form.getByLabel('Role').selectOption('analyst');
    await form.getByLabel('Every schema').uncheck();
    await form.getByLabel('Schemas').selectOption(mine);
    await form.getByRole('button', { name: 'Add and invite' }).click();
    const link = (await owner.getByTestId('invitation-link').textContent()) ?? '';
    expect(link).toContain('#/welcome/dbi_');
    await h.screenshot(owner, 'people');

    const analyst = await h.browser.newPage({ viewport: { width: 1280, height: 760 } });
    await analyst.goto(link);
    await analyst.getByLabel('New password').fill('a long analyst password');
    await analyst.getByRole('button', { name: 'Set password and sign in' }).click();
    await analyst.getByRole('button', { name: 'Sign out' }).waitFor();

    const offered = await analyst.getByLabel('Schema', { exact: true }).locator('option').allTextContents();
    expect(offered).toEqual(['All schemas', mine]);
    await analyst.goto(`${h.host.base}/#/s/${mine}/t/items`);
    await expectText(analyst.getByRole('table').first(), 'visible row');

    // An analyst reads and exports; the console offers none of what the role may not do.
    const writes = ['Insert row', 'Paste rows', 'Edit selected (0)', 'Delete selected (0)', 'Import a file'];
    expect(await buttonsShown(analyst, writes)).toEqual([]);
    expect(await buttonsShown(analyst, ['Export CSV', 'Export JSON'])).toEqual(['Export CSV', 'Export JSON']);
    expect(await analyst.getByLabel(/^Select row/).count()).toBe(0);
    expect(await analyst.getByRole('region', { name: 'Drop a file to import into items' }).count()).toBe(0);
    await analyst.getByRole('cell', { name: 'visible row' }).dblclick();
    expect(await analyst.getByLabel('Cell value').count()).toBe(0);
    expect(await analyst.getByRole('link', { name: 'API keys' }).count()).toBe(0);
    // g k (the API keys) does nothing for someone who may not list them.
    await analyst.keyboard.press('g');
    await analyst.keyboard.press('k');
    expect(await analyst.evaluate('location.hash')).not.toContain('/keys');

    await analyst.goto(`${h.host.base}/#/s/${mine}/t/items/structure`);
    await expectText(analyst.getByRole('region', { name: 'Constraints' }), 'items_pkey');
    await analyst.getByRole('table', { name: 'Columns of items' }).waitFor();
    const alters = ['Rename table…', 'Comment…', 'Primary key…', 'Add column', 'Add a constraint'];
    expect(await buttonsShown(analyst, [...alters, 'Drop constraint items_pkey'])).toEqual([]);
    expect(await analyst.getByLabel('Change column name').count()).toBe(0);
    await analyst.goto(`${h.host.base}/#/s/${mine}/t/items/indexes`);
    await expectText(analyst.getByRole('table', { name: 'Indexes of items' }), 'items_pkey');
    expect(await buttonsShown(analyst, ['Create an index'])).toEqual([]);

    await analyst.goto(`${h.host.base}/#/s/${mine}`);
    await analyst.getByRole('link', { name: 'items', exact: true }).waitFor();
    const tables = ['Clone', 'Delete', 'New table from a file', 'Create table', 'Create an enum type'];
    expect(await buttonsShown(analyst, tables)).toEqual([]);
    await analyst.goto(`${h.host.base}/#/schemas`);
    await analyst.getByRole('link', { name: mine, exact: true }).waitFor();
    expect(await buttonsShown(analyst, ['Delete', 'Create schema'])).toEqual([]);
    await analyst.goto(`${h.host.base}/#/s/${mine}/sql`);
    await analyst.getByLabel('Run in').waitFor();
    expect(await analyst.getByLabel('Run as').count()).toBe(0);
    await analyst.goto(`${h.host.base}/#/s/${other}`);
    await expectText(analyst.locator('.error').first(), 'you may reach only');
    expect(await insertFromPage(analyst, mine)).toBe(403);

    owner.on('dialog', (dialog) => dialog.accept());
    const row = owner.getByRole('row').filter({ hasText: login });
    await row.getByRole('button', { name: 'Remove' }).click();
    await row.waitFor({ state: 'detached' });

    // The analyst's next request finds the session gone: back to the sign-in form.
    await analyst.goto(`${h.host.base}/#/s/${mine}/t/items`);
    await analyst.reload();
    await analyst.getByRole('button', { name: 'Sign in' }).waitFor();
    expect(await insertFromPage(analyst, mine)).toBe(401);
    expect(errors).toEqual([]);
    await analyst.close();
    await owner.close();
  });
});
