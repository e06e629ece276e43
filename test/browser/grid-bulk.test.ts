import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';

/**
 * The grid's "select all rows matching this filter" (issue 39): past the page's own rows, a bulk
 * edit or delete of every row the filter finds, sent as the filtered PATCH / delete with
 * maxAffected the count shown, so a row added in between refuses the change rather than being
 * touched unseen.
 */

const h = new ConsoleHarness();

describeInBrowser('selecting every row a filter finds', () => {
  beforeAll(() => h.start(), 180_000);
  afterAll(() => h.close());

  /** 240 rows; `team` is 'red' for ids divisible by 3 (80 of them, more than a page of 50). */
  const schemaWithPeople = () =>
    h.schemaWith(`CREATE TABLE people (id serial PRIMARY KEY, name text, team text);
      INSERT INTO people (name, team)
      SELECT 'person ' || g, CASE WHEN g % 3 = 0 THEN 'red' ELSE 'blue' END FROM generate_series(1, 240) g;`);

  const teams = async (schema: string) => {
    const answer = await h.api<{ rows: Array<{ team: string; n: number }> }>('POST', 'query', {
      schema,
      sql: 'SELECT team, count(*)::int AS n FROM people GROUP BY team ORDER BY team',
    });
    return Object.fromEntries(answer.body.rows.map((r) => [r.team, r.n]));
  };

  it('updates exactly the rows the filter finds, and refuses when a row was added in between', async () => {
    const schema = await schemaWithPeople();
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/people`);
    const filterForm = page.getByRole('form', { name: 'Add a filter' });
    await filterForm.getByLabel('Filter column').selectOption('team');
    await filterForm.getByLabel('Filter operator').selectOption({ label: 'equals' });
    await filterForm.getByLabel('Filter value').fill('red');
    await filterForm.getByRole('button', { name: 'Add filter' }).click();
    await expectText(page.getByTestId('pager'), '80 rows');

    await page.getByLabel('Select every row of this page').check();
    const offer = page.getByTestId('select-all-matching');
    await page.getByRole('button', { name: 'Select all 80 rows matching this filter' }).click();
    await expectText(offer, 'All 80 rows matching this filter are selected');
    await page.getByRole('button', { name: 'Edit selected (80)' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Column to set').selectOption('name');
    await dialog.getByLabel('New value').fill('on the red team');
    await expectText(dialog.getByTestId('bulk-edit-summary'), 'on the 80 rows matching the filter in people');
    const patched = page.waitForResponse((r) => r.request().method() === 'PATCH');
    await dialog.getByRole('button', { name: 'Update 80 rows' }).click();
    expect((await patched).status()).toBe(200);
    const sent = decodeURIComponent((await patched).url());
    expect(sent).toContain('filter=team.eq.red');
    expect(sent).toContain('maxAffected=80');
    await dialog.waitFor({ state: 'detached' });
    const renamed = await h.api<{ rows: Array<{ n: number; red: number }> }>('POST', 'query', {
      schema,
      sql: "SELECT count(*)::int AS n, count(*) FILTER (WHERE team = 'red')::int AS red FROM people WHERE name = 'on the red team'",
    });
    expect(renamed.body.rows[0]).toEqual({ n: 80, red: 80 });

    // Selected again, then a red row arrives before the delete: refused, nothing deleted.
    await page.getByLabel('Select every row of this page').check();
    await page.getByRole('button', { name: 'Select all 80 rows matching this filter' }).click();
    await page.getByRole('button', { name: 'Delete selected (80)' }).click();
    await expectText(
      dialog.getByTestId('delete-summary'),
      'Delete the 80 rows matching the filter in people?',
    );
    await h.api('POST', 'query', { schema, sql: "INSERT INTO people (name, team) VALUES ('late', 'red')" });
    await dialog.getByRole('button', { name: 'Delete 80 rows' }).click();
    await dialog.getByRole('alert').waitFor();
    expect(await teams(schema)).toEqual({ blue: 160, red: 81 });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(errors.filter((e) => !e.includes('409'))).toEqual([]);
  });

  it('deletes every row of the table when no filter is set, named as such', async () => {
    const schema = await schemaWithPeople();
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/people`);
    await expectText(page.getByTestId('pager'), '240 rows');
    await page.getByLabel('Select every row of this page').check();
    await page.getByRole('button', { name: /Select all 240 rows in the table/ }).click();
    await page.getByRole('button', { name: 'Delete selected (240)' }).click();
    const dialog = page.getByRole('dialog');
    await expectText(dialog.getByTestId('delete-summary'), 'Delete the 240 rows in the table in people?');
    const deleted = page.waitForResponse((r) => r.url().includes('/rows/delete'));
    await dialog.getByRole('button', { name: 'Delete 240 rows' }).click();
    const answer = await deleted;
    expect(answer.status()).toBe(200);
    const sent = decodeURIComponent(answer.url());
    expect(sent).toContain('all=true');
    expect(sent).toContain('maxAffected=240');
    await page.getByText('No rows.').waitFor();
    expect(await teams(schema)).toEqual({});
    expect(errors).toEqual([]);
  });

  it('opens the last page of a 1M-row table from the end, and jumps to a page by its number', async () => {
    const schema = await h.schemaWith(`CREATE TABLE big (id bigint PRIMARY KEY, name text);
      INSERT INTO big SELECT g, 'row ' || g FROM generate_series(1, 1000000) g; ANALYZE big;`);
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/big`);
    const pager = page.getByTestId('pager');
    await expectText(pager, 'Page 1 of about');
    const lastRead = page.waitForRequest((r) => decodeURIComponent(r.url()).includes('order=id.desc'));
    await page.getByRole('button', { name: 'Last page' }).click();
    await lastRead;
    await expectText(pager, 'Last page · about');
    const ids = page.getByRole('table', { name: 'Rows of big' }).locator('tbody tr td:nth-child(2)');
    await expectText(ids.last(), '1000000');
    await expectText(ids.first(), '999951');
    expect(page.url()).toContain('last=1');

    await page.getByLabel('Page number').fill('3');
    await page.getByRole('button', { name: 'Go' }).click();
    await expectText(pager, 'Page 3 of about');
    await expectText(ids.first(), '101');
    expect(errors).toEqual([]);
  }, 120_000);
});
