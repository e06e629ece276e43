import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';

/**
 * Views and materialized views in the grid (issue 39): opened from the schema's page, their rows
 * read as a table's (filters, paging), nothing offered that would change them, and a materialized
 * view refreshed from the page, its new rows shown.
 */

const h = new ConsoleHarness();

describeInBrowser('views in the grid', () => {
  beforeAll(() => h.start(), 180_000);
  afterAll(() => h.close());

  it('opens a view from the schema page read-only, and refreshes a materialized view', async () => {
    const schema = await h.schemaWith(`CREATE TABLE people (id serial PRIMARY KEY, name text, team text);
      INSERT INTO people (name, team)
      SELECT 'person ' || g, CASE WHEN g % 3 = 0 THEN 'red' ELSE 'blue' END FROM generate_series(1, 120) g;
      CREATE VIEW reds AS SELECT id, name FROM people WHERE team = 'red';
      CREATE MATERIALIZED VIEW tally AS SELECT team, count(*)::int AS n FROM people GROUP BY team;
      CREATE UNIQUE INDEX tally_team ON tally (team);`);
    const { page, errors } = await h.signedIn(`#/s/${schema}`);

    await page.getByRole('region', { name: 'Views' }).getByRole('link', { name: 'Open reds' }).click();
    await expectText(page.getByTestId('pager'), '40 rows');
    await expectText(page.locator('section.page'), 'A view. Its rows are read here');
    expect(await page.getByRole('button', { name: 'Insert row' }).count()).toBe(0);
    expect(await page.getByLabel('Select every row of this page').count()).toBe(0);
    const filterForm = page.getByRole('form', { name: 'Add a filter' });
    await filterForm.getByLabel('Filter column').selectOption('name');
    await filterForm.getByLabel('Filter operator').selectOption({ label: 'equals' });
    await filterForm.getByLabel('Filter value').fill('person 9');
    await filterForm.getByRole('button', { name: 'Add filter' }).click();
    await expectText(page.getByTestId('pager'), '1 row');
    await page.getByRole('link', { name: 'Definition' }).click();
    await expectText(page.locator('pre.sql'), "WHERE (team = 'red'::text)");

    await page.goto(`${h.host.base}/#/s/${schema}/t/tally`);
    await expectText(page.getByTestId('pager'), '2 rows');
    await h.api('POST', 'query', { schema, sql: "INSERT INTO people (name, team) VALUES ('late', 'green')" });
    await page.getByRole('button', { name: 'Refresh' }).click();
    await expectText(page.getByRole('status'), 'Materialized view "tally" refreshed concurrently');
    await expectText(page.getByTestId('pager'), '3 rows');
    expect(errors).toEqual([]);
  }, 90_000);
});
