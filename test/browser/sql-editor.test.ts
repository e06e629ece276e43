import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';

/**
 * The SQL editor's completion of the catalog's names beyond the page's tables (the schema's
 * functions, the other schemas), its Format button, and one transaction per statement (issue 39).
 */

const h = new ConsoleHarness();

describeInBrowser('the SQL editor', () => {
  beforeAll(() => h.start(), 180_000);
  afterAll(() => h.close());

  it('completes the schema’s function names and other schemas, and formats the script', async () => {
    const schema = await h.schemaWith(`CREATE TABLE items (id serial PRIMARY KEY, price numeric);
      CREATE FUNCTION with_tax(p numeric, rate numeric DEFAULT 0.2) RETURNS numeric LANGUAGE sql AS 'SELECT p * (1 + rate)';`);
    const other = await h.schemaWith('CREATE TABLE elsewhere (id int)');
    const { page, errors } = await h.signedIn(`#/s/${schema}/sql`);
    const editor = page.locator('.cm-content');
    const option = (label: string) =>
      page
        .locator('.cm-tooltip-autocomplete:not(.cm-tooltip-autocomplete-disabled) li[aria-selected="true"]')
        .filter({ hasText: label });

    await editor.click();
    await page.keyboard.type('select with_t');
    await option('with_tax').waitFor();
    await expectText(
      page.locator('.cm-tooltip-autocomplete'),
      '(p numeric, rate numeric DEFAULT 0.2) → numeric',
    );
    // Enter takes the option once it has been open its interactionDelay (75 ms).
    await page.waitForTimeout(100);
    await page.keyboard.press('Enter');
    await page.keyboard.type('price) from items; select * from ');
    await page.keyboard.type(other.slice(0, -2));
    await option(other).waitFor();
    await page.waitForTimeout(100);
    await page.keyboard.press('Enter');
    await page.keyboard.type('.elsewhere');
    await page.keyboard.press('Escape');
    await expectText(editor, `select with_tax(price) from items; select * from ${other}.elsewhere`);

    await page.getByRole('button', { name: 'Format' }).click();
    // Formatted: the one line is nine.
    await editor.locator('.cm-line').nth(8).waitFor();
    expect(await editor.locator('.cm-line').allTextContents()).toEqual([
      'SELECT',
      '  with_tax (price)',
      'FROM',
      '  items;',
      '',
      'SELECT',
      '  *',
      'FROM',
      `  ${other}.elsewhere`,
    ]);
    expect(errors).toEqual([]);
  }, 90_000);

  it('commits each statement on its own and stops at the first that fails, showing what ran', async () => {
    const schema = await h.schemaWith('CREATE TABLE kept (x int)');
    const { page, errors } = await h.signedIn(`#/s/${schema}/sql`);
    await page.getByLabel('One transaction per statement').check();
    await page.locator('.cm-content').click();
    await page.keyboard.type(
      'INSERT INTO kept VALUES (1); INSERT INTO kept VALUES (2);\nSELECT nope FROM kept; INSERT INTO kept VALUES (3)',
    );
    await page.keyboard.press('Control+Enter');

    await page.getByRole('alert').filter({ hasText: 'nope' }).waitFor();
    await page.getByText('at line 2, column 8').waitFor();
    const tabs = page.getByRole('tablist', { name: 'Statements' }).getByRole('tab');
    expect(await tabs.allTextContents()).toEqual(['1. INSERT · 1 row', '2. INSERT · 1 row']);
    await expectText(page.getByTestId('result-summary'), 'one transaction per statement');
    const kept = await h.api<{ rows: { x: number }[] }>('POST', 'query', {
      schema,
      sql: 'SELECT x FROM kept ORDER BY x',
    });
    expect(kept.body.rows).toEqual([{ x: 1 }, { x: 2 }]);

    // Unticked (kept in the browser), the same script is one transaction again: nothing kept.
    await page.getByLabel('One transaction per statement').uncheck();
    await page.reload();
    expect(await page.getByLabel('One transaction per statement').isChecked()).toBe(false);
    await page.locator('.cm-content').click();
    await page.keyboard.press('Control+Enter');
    await page.getByRole('alert').filter({ hasText: 'nope' }).waitFor();
    expect(
      (await h.api<{ rows: unknown[] }>('POST', 'query', { schema, sql: 'SELECT x FROM kept' })).body.rows,
    ).toHaveLength(2);
    expect(errors.filter((e) => !e.includes('400'))).toEqual([]);
  }, 90_000);
});
