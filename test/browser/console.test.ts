import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { ConsoleHarness, describeInBrowser, expectText, gridCell } from '#test/support/browser';
import { uniqueName } from '#test/support/names';

/**
 * The web console in a real Chromium, through `npm start`'s host: what a person does with it,
 * click by click. Skipped, loudly, where no Chromium is installed (CI installs one).
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();

describeInBrowser('the web console', () => {
  beforeAll(() => h.start(), 180_000);
  afterAll(() => h.close());

  /** A schema with a table `items (id serial primary key, name text)` of `rows` rows. */
  async function schemaWithItems(rows: number): Promise<string> {
    const schema = await h.schemaWith(`CREATE TABLE items (id serial PRIMARY KEY, name text);
            INSERT INTO items (name) SELECT 'row ' || g FROM generate_series(1, ${rows}) g;`);
    return schema;
  }

  it('signs in with a form (no browser dialog), stays signed in across a reload, and starts a trial', async () => {
    const page = await h.browser.newPage({ viewport: { width: 1280, height: 760 } });
    await page.goto(`${h.host.base}/`);
    await h.screenshot(page, 'sign-in');
    await page.getByLabel('User name').fill('test-admin');
    await page.getByLabel('Password').fill('not the password');
    const refused = page.waitForResponse((r) => r.url().includes('/api/session') && r.status() === 401);
    await page.getByRole('button', { name: 'Sign in' }).click();

    expect((await refused).headers()['www-authenticate']).toBeUndefined();
    await page.getByText('Wrong user name or password').waitFor();

    await page.getByLabel('Password').fill('test-admin-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();
    await page.reload();
    await page.getByRole('button', { name: 'Sign out' }).waitFor();

    const badge = page.getByTestId('license-badge');
    await expectText(badge, 'No license');
    await badge.click();
    await page.getByRole('form', { name: 'Start a trial' }).getByLabel('Email').fill('owner@example.com');
    await page.getByRole('button', { name: 'Start trial' }).click();
    await expectText(badge, 'Trial: 14 days left');
    // The screens after this one show the product as a new user sees it: a running trial.
    await h.screenshot(page, 'license');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.reload();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
    await page.close();
  });

  it('creates a schema and a table through the forms, adds a column, clones and deletes them', async () => {
    const { page, errors } = await h.signedIn('#/schemas');
    const schema = uniqueName('web');
    const form = page.getByRole('form', { name: 'Create a schema' });
    await form.getByLabel('Name').fill(schema);
    await form.getByLabel('Password for its database user').fill('pw-0123456789');
    await form.getByRole('button', { name: 'Create schema' }).click();
    await page.getByText(`Its database user is ${schema}_user`).waitFor();
    await h.screenshot(page, 'schemas');

    await page.getByRole('link', { name: schema, exact: true }).click();
    const create = page.getByRole('form', { name: 'Create a table' });
    await create.getByLabel('Table name').fill('people');
    await create.getByRole('button', { name: 'Add a column' }).click();
    const second = create.getByRole('group', { name: 'Column 2' });
    await second.getByLabel('Column name').fill('email');
    await second.getByLabel('Column type').selectOption('VARCHAR');
    await second.getByLabel('Length').fill('120');
    await create.getByRole('button', { name: 'Create table' }).click();
    await page.getByRole('link', { name: 'people', exact: true }).waitFor();

    await page.getByRole('link', { name: 'Structure' }).click();
    const add = page.getByRole('form', { name: 'Add a column' });
    await add.getByLabel('Column name').fill('age');
    await add.getByLabel('Column type').selectOption('INTEGER');
    await add.getByRole('button', { name: 'Add column' }).click();
    await page.getByRole('cell', { name: 'age', exact: true }).waitFor();
    await expectText(page.getByRole('row').filter({ hasText: 'email' }), 'character varying(120)');
    await h.screenshot(page, 'structure');
    await h.api('POST', 'query', {
      schema,
      sql: 'CREATE TABLE visits (id serial PRIMARY KEY, person integer REFERENCES people (id))',
    });
    await page.goto(`${h.host.base}/#/s/${schema}/t/visits/structure`);
    await page.getByRole('link', { name: '→ people.id' }).click();
    await page.getByRole('heading', { name: `${schema} / people` }).waitFor();

    await page.getByRole('link', { name: schema }).first().click();
    await page
      .getByRole('listitem')
      .filter({ hasText: /^people/ })
      .getByRole('button', { name: 'Clone' })
      .click();
    await page.getByRole('dialog').getByRole('button', { name: 'Clone', exact: true }).click();
    await page.getByRole('link', { name: 'people_copy', exact: true }).waitFor();
    await h.screenshot(page, 'tables');
    await page
      .getByRole('listitem')
      .filter({ hasText: 'people_copy' })
      .getByRole('button', { name: 'Delete' })
      .click();
    const confirm = page.getByRole('dialog');
    await expect(await confirm.getByRole('button', { name: 'Delete table' }).isDisabled()).toBe(true);
    await confirm.getByLabel('Type people_copy to confirm').fill('people_copy');
    await confirm.getByRole('button', { name: 'Delete table' }).click();
    await page.getByRole('link', { name: 'people_copy', exact: true }).waitFor({ state: 'detached' });

    await page.goto(`${h.host.base}/#/schemas`);
    await page
      .getByRole('listitem')
      .filter({ hasText: schema })
      .getByRole('button', { name: 'Delete' })
      .click();
    await page.getByLabel(`Type ${schema} to confirm`).fill(schema);
    await page.getByRole('button', { name: 'Delete schema' }).click();
    await page.getByRole('link', { name: schema, exact: true }).waitFor({ state: 'detached' });
    expect((await h.api<string[]>('GET', 'schemas')).body).not.toContain(schema);
    expect(errors).toEqual([]);
  });

  it('edits safely: Enter saves one cell (kept after a reload), Esc sends nothing, a failure stays on the cell', async () => {
    const schema = await schemaWithItems(120);
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/items`);
    await expectText(page.getByTestId('pager'), 'Page 1 of 3 · 120 rows');
    const patches: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'PATCH') patches.push(request.url());
    });

    await gridCell(page, 1).dblclick();
    await page.getByLabel('Cell value').fill('edited');
    await page.getByLabel('Cell value').press('Enter');
    await expectText(gridCell(page, 1), 'edited');
    await page.reload();
    await expectText(gridCell(page, 1), 'edited');
    await h.screenshot(page, 'grid');

    await gridCell(page, 2).dblclick();
    await page.getByLabel('Cell value').fill('never saved');
    await page.getByLabel('Cell value').press('Escape');
    await expectText(gridCell(page, 2), 'row 2');
    await gridCell(page, 2).dblclick();
    await page.getByLabel('Cell value').press('Enter'); // unchanged: nothing to save
    await page.getByLabel('Cell value').waitFor({ state: 'detached' });
    expect(patches).toHaveLength(1);

    await h.api('POST', 'query', {
      schema,
      sql: 'ALTER TABLE items ADD CONSTRAINT short CHECK (length(name) < 20)',
    });
    await gridCell(page, 3).dblclick();
    await page.getByLabel('Cell value').fill('a value far too long for the check');
    await page.getByLabel('Cell value').press('Enter');
    await page.getByRole('alert').filter({ hasText: 'short' }).waitFor();
    await h.screenshot(page, 'cell-error');
    expect(await page.getByLabel('Cell value').inputValue()).toBe('a value far too long for the check');

    await page.getByLabel('Cell value').press('Escape');
    await page.getByLabel('Select row 4', { exact: true }).check();
    await page.getByLabel('Select row 5', { exact: true }).check();
    await page.getByRole('button', { name: 'Delete selected (2)' }).click();
    await page.getByRole('button', { name: 'Delete 2 rows' }).click();
    await expectText(page.getByTestId('pager'), 'Page 1 of 3 · 118 rows');

    await page.getByRole('button', { name: 'Insert row' }).click();
    await page.getByRole('dialog').getByLabel('name (text)').fill('inserted here');
    await page.getByRole('dialog').getByRole('button', { name: 'Insert' }).click();
    await expectText(page.getByTestId('pager'), 'Page 1 of 3 · 119 rows');

    const turned = page.waitForRequest((request) => request.url().includes('/api/table/items?'));
    await page.getByRole('button', { name: 'Next page' }).click();
    await expectText(page.getByTestId('pager'), 'Page 2 of 3 · 119 rows');
    // A page turn does not count every row again.
    expect((await turned).url()).toMatch(/[?&]count=false(&|$)/);
    await page.getByLabel('Rows per page').selectOption('250');
    await expectText(page.getByTestId('pager'), 'Page 1 of 1 · 119 rows');
    // The pager's count can land before the rows render: wait for the last row, then count them all.
    await page.getByRole('row').nth(119).waitFor({ timeout: 10_000 });
    expect(await page.getByRole('row').count()).toBe(120);
    await page.getByRole('cell', { name: 'inserted here' }).waitFor();
    expect(errors).toEqual([]);
  });

  it('gives every cell edit the keyboard, the second and a failed one too, then hands it back to the cell', async () => {
    const schema = await schemaWithItems(3);
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/items`);
    await expectText(page.getByTestId('pager'), '3 rows');
    const editor = page.getByLabel('Cell value');
    const isFocused = (locator: ReturnType<Page['locator']>) =>
      locator.evaluate((element) => element === element.ownerDocument.activeElement);
    const stored = async () =>
      (
        await h.api<{ rows: { name: string }[] }>('POST', 'query', {
          schema,
          sql: 'SELECT name FROM items ORDER BY id',
        })
      ).body.rows.map((row) => row.name);

    // The editor opens after the double click is handled: typing waits until it has the keyboard.
    const editorFocused = async () =>
      page.waitForFunction(
        (element) => element === element?.ownerDocument.activeElement,
        await editor.elementHandle(),
      );

    // Only the keyboard: what is typed goes where the focus is, not where a test fills it in.
    await gridCell(page, 1).dblclick();
    await editorFocused();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('first');
    await page.keyboard.press('Enter');
    await expectText(gridCell(page, 1), 'first');
    expect(await isFocused(gridCell(page, 1))).toBe(true);

    // The second edit: `g s` is text in the editor, not the page's jump to Schemas.
    await gridCell(page, 2).dblclick();
    await editorFocused();
    expect(await isFocused(editor)).toBe(true);
    await page.keyboard.press('Control+A');
    await page.keyboard.type('g s second');
    await page.keyboard.press('Enter');
    await expectText(gridCell(page, 2), 'g s second');
    expect(page.url()).toContain(`#/s/${schema}/t/items`);

    await h.api('POST', 'query', {
      schema,
      sql: 'ALTER TABLE items ADD CONSTRAINT short CHECK (length(name) < 12)',
    });
    await gridCell(page, 3).dblclick();
    await editorFocused();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('far too long for it');
    await page.keyboard.press('Enter');
    await page.getByRole('alert').filter({ hasText: 'short' }).waitFor();
    // After the refusal the editor has the keyboard again: the text is corrected in place.
    expect(await isFocused(editor)).toBe(true);
    await page.keyboard.press('Control+A');
    await page.keyboard.type('third');
    await page.keyboard.press('Enter');
    await expectText(gridCell(page, 3), 'third');
    expect(await stored()).toEqual(['first', 'g s second', 'third']);
    expect(page.url()).toContain(`#/s/${schema}/t/items`);
    expect(errors).toEqual([]);
  });

  it('shows a picked foreign key saving on its cell, and the old value with the error when the save fails', async () => {
    const schema = await h.schemaWith(`CREATE TABLE cities (id serial PRIMARY KEY, name text NOT NULL);
            INSERT INTO cities (name) VALUES ('Berlin'), ('Lisbon'), ('Osaka');
            CREATE TABLE people (id serial PRIMARY KEY, name text, city integer REFERENCES cities (id));
            INSERT INTO people (name, city) VALUES ('person 1', 1);`);
    const storedCity = async () =>
      (
        await h.api<{ rows: { city: number }[] }>('POST', 'query', {
          schema,
          sql: 'SELECT city FROM people WHERE id = 1',
        })
      ).body.rows[0]?.city;
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/people`);
    await expectText(page.getByTestId('pager'), '1 row');
    const city = gridCell(page, 1, 3);
    const dialog = page.getByRole('dialog');
    // The cell's own value: the picker's rows, which the cell holds while it is open, are not it.
    const shownValue = () => city.evaluate((td) => td.firstChild?.textContent ?? '');

    // The save is held until the test lets it go: meanwhile the cell says it is saving.
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    await page.route(
      (url) => url.pathname.endsWith('/api/table/people/1'),
      async (route) => {
        if (route.request().method() === 'PATCH') await held;
        await route.continue();
      },
    );
    await city.dblclick();
    await dialog.getByRole('button', { name: /Lisbon/ }).click();
    await city.and(page.locator('[aria-busy="true"]')).waitFor();
    expect(await shownValue()).toBe('1');
    expect(await storedCity()).toBe(1);
    release();
    await dialog.waitFor({ state: 'detached' });
    expect(await city.textContent()).toBe('2');
    expect(await city.getAttribute('aria-busy')).toBeNull();
    expect(await storedCity()).toBe(2);

    // A save that fails: the row picked is gone by the time it is sent.
    await city.dblclick();
    await dialog.getByRole('button', { name: /Osaka/ }).waitFor();
    await h.api('POST', 'query', { schema, sql: 'DELETE FROM cities WHERE id = 3' });
    await dialog.getByRole('button', { name: /Osaka/ }).click();
    await dialog.getByRole('alert').filter({ hasText: 'cities' }).waitFor();
    expect(await city.getAttribute('aria-busy')).toBeNull();
    expect(await shownValue()).toBe('2');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect(await city.textContent()).toBe('2');
    expect(await storedCity()).toBe(2);
    expect(errors).toEqual([]);
  });

  it('finds rows: filters, sorts by headers, searches, hides columns, keeps the view in the URL, pages under a sort, and pastes rows', async () => {
    // age is 20 + g % 7: "age ≥ 25" holds for g % 7 in (5, 6), 16 of the 60 rows.
    const schema =
      await h.schemaWith(`CREATE TABLE people (id serial PRIMARY KEY, name text, age integer, active boolean, joined date);
            INSERT INTO people (name, age, active, joined)
            SELECT 'person ' || g, 20 + g % 7, g % 2 = 0, date '2024-01-01' + g FROM generate_series(1, 60) g;`);
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/people`);
    const reads: string[] = [];
    page.on('request', (request) => {
      if (request.url().includes('/api/table/people?')) reads.push(decodeURIComponent(request.url()));
    });
    const pager = page.getByTestId('pager');
    await expectText(pager, 'Page 1 of 2 · 60 rows');
    await expectText(page.locator('th').filter({ hasText: 'age' }), 'integer');

    const filterForm = page.getByRole('form', { name: 'Add a filter' });
    await filterForm.getByLabel('Filter column').selectOption('age');
    await filterForm.getByLabel('Filter operator').selectOption({ label: '≥' });
    await filterForm.getByLabel('Filter value').fill('25');
    await filterForm.getByRole('button', { name: 'Add filter' }).click();
    await expectText(pager, 'Page 1 of 1 · 16 rows');
    expect(reads.at(-1)).toContain('filter=age.gte.25');

    const sorted = page.waitForRequest((r) => decodeURIComponent(r.url()).includes('order=age,name.desc'));
    await page.getByRole('button', { name: 'Sort by age' }).click();
    await page.getByRole('button', { name: 'Sort by name' }).click({ modifiers: ['Shift'] });
    await page.getByRole('button', { name: 'Sort by name' }).click({ modifiers: ['Shift'] });
    await expectText(page.getByTestId('sort-age'), '▲1');
    await expectText(page.getByTestId('sort-name'), '▼2');
    expect(await header(page, 'age').getAttribute('aria-sort')).toBe('ascending');
    await sorted;
    // By age, then by name descending (as text): "person 6" comes before "person 55".
    await expectColumn(page, 'age', [...Array(8).fill('25'), ...Array(8).fill('26')]);
    await expectColumn(page, 'name', [
      ...[54, 5, 47, 40, 33, 26, 19, 12].map((n) => `person ${n}`),
      ...[6, 55, 48, 41, 34, 27, 20, 13].map((n) => `person ${n}`),
    ]);
    await h.screenshot(page, 'grid-filter');

    await filterForm.getByLabel('Filter column').selectOption('name');
    await filterForm.getByLabel('Filter operator').selectOption({ label: 'contains' });
    await filterForm.getByLabel('Filter value').fill('1');
    await filterForm.getByRole('button', { name: 'Add filter' }).click();
    await expectText(pager, '4 rows');
    await expectColumn(page, 'name', ['person 19', 'person 12', 'person 41', 'person 13']);
    expect(reads.at(-1)).toContain('filter=name.ilike.*1*');

    const exportRead = page.waitForRequest((r) => r.url().includes('/api/table/people/export?'));
    const exported = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const exportUrl = decodeURIComponent((await exportRead).url());
    await exported;
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    for (const parameter of ['filter=age.gte.25', 'filter=name.ilike.*1*', 'order=age,name.desc'])
      expect(exportUrl).toContain(parameter);

    await page.getByLabel('Search rows').fill('person 4');
    await expectText(pager, 'Page 1 of 1 · 1 row');
    expect(reads.at(-1)).toContain('q=person+4');
    await page.getByText('Columns', { exact: true }).click();
    const shownColumns = page.getByRole('group', { name: 'Shown columns' });
    const narrowed = page.waitForRequest(
      (r) => r.url().includes('/api/table/people?') && r.url().includes('select='),
    );
    await shownColumns.getByLabel('active', { exact: true }).uncheck();
    await shownColumns.getByLabel('id', { exact: true }).uncheck();
    await page.getByRole('button', { name: 'Sort by active' }).waitFor({ state: 'detached' });
    expect(decodeURIComponent((await narrowed).url())).toContain('select=id,name,age,joined');
    // The key stays asked for while hidden: the row can still be selected and edited.
    await page.getByLabel('Select row 41', { exact: true }).waitFor();

    await page.reload();
    await expectText(pager, 'Page 1 of 1 · 1 row');
    expect(await page.locator('.chip').count()).toBe(2);
    expect(await page.getByLabel('Search rows').inputValue()).toBe('person 4');
    await expectText(page.getByTestId('sort-name'), '▼2');
    expect(await page.getByRole('button', { name: 'Sort by active' }).count()).toBe(0);
    await expectColumn(page, 'name', ['person 41']);

    await page.getByRole('button', { name: 'Remove filter name contains "1"' }).click();
    await page.getByRole('button', { name: 'Remove filter age ≥ 25' }).click();
    await page.getByLabel('Search rows').fill('');
    await expectText(pager, '60 rows');
    await page.getByLabel('Rows per page').selectOption('25');
    await expectText(pager, 'Page 1 of 3 · 60 rows');
    await page.getByRole('button', { name: 'Next page' }).click();
    await expectText(pager, 'Page 2 of 3 · 60 rows');
    expect(reads.at(-1)).toMatch(/[?&]after=[^&]+/);
    const byNumber = await h.api<{ data: { name: string }[] }>(
      'GET',
      `table/people?schema=${schema}&order=age,name.desc&page=2&limit=25`,
    );
    const secondPage = byNumber.body.data.map((row) => row.name);
    await expectColumn(page, 'name', secondPage);
    await page.reload();
    await expectText(pager, 'Page 2 of 3 · 60 rows');
    await expectColumn(page, 'name', secondPage);
    await page.getByRole('button', { name: 'Next page' }).click();
    await expectText(pager, 'Page 3 of 3 · 60 rows');
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await expectColumn(page, 'name', secondPage);

    await page.getByRole('button', { name: 'Paste rows' }).click();
    const paste = page.getByRole('dialog');
    await paste
      .getByLabel('Rows to paste (tab-separated)')
      .fill('name\tage\tactive\nnew one\t30\ttrue\nnew two\t\tfalse\n');
    await expectText(paste.getByTestId('paste-summary'), '2 rows will be inserted into people');
    await paste.getByRole('button', { name: 'Insert 2 rows' }).click();
    await expectText(pager, '62 rows');
    await page.getByRole('button', { name: 'Paste rows' }).click();
    await paste.getByLabel('Rows to paste (tab-separated)').fill('500\tin order\t41\tfalse\t2024-02-03');
    await expectText(paste.getByTestId('paste-summary'), 'in the table’s column order');
    await paste.getByRole('button', { name: 'Insert 1 row' }).click();
    await expectText(pager, '63 rows');
    const stored = await h.api<{ rows: unknown[] }>('POST', 'query', {
      schema,
      sql: "SELECT name, age, active, joined::text FROM people WHERE id = 500 OR name LIKE 'new %' ORDER BY name",
    });
    expect(stored.body.rows).toEqual([
      { name: 'in order', age: 41, active: false, joined: '2024-02-03' },
      { name: 'new one', age: 30, active: true, joined: null },
      { name: 'new two', age: null, active: false, joined: null },
    ]);
    expect(errors).toEqual([]);
  });

  it('edits jsonb and arrays in a checked editor, picks a foreign key, and bulk-edits and bulk-deletes selected rows saying how many', async () => {
    const schema =
      await h.schemaWith(`CREATE TABLE cities (id serial PRIMARY KEY, name text NOT NULL, country text);
            INSERT INTO cities (name, country) VALUES ('Berlin', 'DE'), ('Lisbon', 'PT'), ('Osaka', 'JP');
            CREATE TABLE people (id serial PRIMARY KEY, name text, city integer REFERENCES cities (id),
                                 data jsonb, tags text[]);
            INSERT INTO people (name, city, data, tags)
            SELECT 'person ' || g, 1, jsonb_build_object('n', g), ARRAY['a', 'b c'] FROM generate_series(1, 5) g;`);
    const stored = async (id: number) =>
      (
        await h.api<{ rows: Record<string, unknown>[] }>('POST', 'query', {
          schema,
          sql: `SELECT name, city, data::text, tags::text FROM people WHERE id = ${id}`,
        })
      ).body.rows[0];
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/people`);
    const writes: string[] = [];
    page.on('request', (request) => {
      if (request.method() !== 'GET') writes.push(`${request.method()} ${decodeURIComponent(request.url())}`);
    });
    await expectText(page.getByTestId('pager'), '5 rows');
    // Columns: select, id, name, city, data, tags.
    const dialog = page.getByRole('dialog');

    await gridCell(page, 1, 4).dblclick();
    const editor = dialog.getByLabel('Cell value');
    expect(await editor.inputValue()).toBe('{\n  "n": 1\n}');
    await editor.fill('{\n  "n": 10,\n  tags: ["x"]\n}');
    await dialog.getByRole('button', { name: 'Save', exact: true }).click();
    await dialog.getByRole('alert').filter({ hasText: 'not valid JSON at line 3, column 3' }).waitFor();
    expect(writes).toEqual([]);
    await editor.fill('{\n  "n": 10,\n  "tags": ["x"]\n}');
    await h.screenshot(page, 'cell-json');
    await editor.press('Control+Enter');
    await dialog.waitFor({ state: 'detached' });
    await expectText(gridCell(page, 1, 4), '{"n": 10, "tags": ["x"]}');
    expect(writes).toHaveLength(1);
    expect((await stored(1))?.data).toBe('{"n": 10, "tags": ["x"]}');

    await gridCell(page, 1, 5).dblclick();
    expect(await editor.inputValue()).toBe('{a,"b c"}');
    await editor.fill('{x,"y, z",NULL');
    await editor.press('Control+Enter');
    await dialog.getByRole('alert').filter({ hasText: 'not an array' }).waitFor();
    await editor.fill('{x,"y, z",NULL}');
    await editor.press('Control+Enter');
    await expectText(gridCell(page, 1, 5), '["x","y, z",null]');
    expect((await stored(1))?.tags).toBe('{x,"y, z",NULL}');
    expect(writes).toHaveLength(2);

    const search = page.waitForRequest(
      (r) => r.url().includes('/api/table/cities?') && r.url().includes('q=lis'),
    );
    await gridCell(page, 1, 3).dblclick();
    await dialog.getByRole('button', { name: /Osaka/ }).waitFor();
    await dialog.getByLabel('Search cities').fill('lis');
    const searched = new URL((await search).url()).searchParams;
    expect([searched.get('limit'), searched.get('select')]).toEqual(['20', 'id,name,country']);
    await dialog.getByRole('button', { name: /Osaka/ }).waitFor({ state: 'detached' });
    await h.screenshot(page, 'fk-picker');
    await dialog.getByRole('button', { name: /Lisbon/ }).click();
    // The picker closes once the save is answered; until then the cell holds the picker's rows
    // ("2 Lisbon PT" among them), so its text is read only after.
    await dialog.waitFor({ state: 'detached' });
    expect(await gridCell(page, 1, 3).textContent()).toBe('2');
    expect((await stored(1))?.city).toBe(2);

    await page.getByLabel('Select row 2', { exact: true }).check();
    await page.getByLabel('Select row 3', { exact: true }).check();
    await page.getByRole('button', { name: 'Edit selected (2)' }).click();
    await dialog.getByLabel('Column to set').selectOption('name');
    await dialog.getByLabel('New value').fill('moved, twice');
    await expectText(dialog.getByTestId('bulk-edit-summary'), 'on the 2 rows selected in people');
    await h.screenshot(page, 'bulk-edit');
    await dialog.getByRole('button', { name: 'Update 2 rows' }).click();
    await expectText(gridCell(page, 2, 2), 'moved, twice');
    await expectText(gridCell(page, 3, 2), 'moved, twice');
    await expectText(gridCell(page, 4, 2), 'person 4');
    expect(writes.at(-1)).toMatch(/^PATCH .*\/api\/table\/people\/rows\?/);
    expect(writes.at(-1)).toContain('filter=id.in.(2,3)');
    expect(writes.at(-1)).toContain('maxAffected=2');

    await page.getByLabel('Select row 4', { exact: true }).check();
    await page.getByLabel('Select row 5', { exact: true }).check();
    await page.getByRole('button', { name: 'Delete selected (2)' }).click();
    await expectText(dialog.getByTestId('delete-summary'), 'Delete the 2 rows selected in people?');
    await dialog.getByRole('button', { name: 'Delete 2 rows' }).click();
    await expectText(page.getByTestId('pager'), '3 rows');
    expect(writes.at(-1)).toMatch(/^POST .*\/rows\/delete\?filter=id\.in\.\(4,5\)&maxAffected=2$/);
    expect(writes).toHaveLength(5);
    expect(errors).toEqual([]);
  });

  it('inserts a row through the form without asking for what PostgreSQL fills in itself', async () => {
    const schema = await schemaWithItems(1);
    await h.api('POST', 'query', {
      schema,
      sql: `CREATE TABLE gadgets (
              id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
              serial_no integer GENERATED BY DEFAULT AS IDENTITY,
              price numeric NOT NULL, qty integer NOT NULL,
              total numeric GENERATED ALWAYS AS (price * qty) STORED)`,
    });
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/gadgets`);

    await page.getByRole('button', { name: 'Insert row' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('price (numeric)').fill('2.5');
    await dialog.getByLabel('qty (integer)').fill('4');
    expect(await dialog.getByLabel('id (integer)').count()).toBe(0);
    expect(await dialog.getByLabel('total (numeric)').count()).toBe(0);
    await expectText(
      dialog.getByTestId('filled-by-postgres'),
      'Filled in by PostgreSQL: id (identity), total (generated)',
    );
    await dialog.getByLabel('serial_no (integer)').waitFor(); // by default: a value may be given
    await dialog.getByRole('button', { name: 'Insert' }).click();

    await page.getByRole('cell', { name: '10.0', exact: true }).waitFor();
    expect(errors).toEqual([]);
  });

  it('shows a table without a primary key read-only, with the reason', async () => {
    const schema = await schemaWithItems(1);
    await h.api('POST', 'query', {
      schema,
      sql: 'CREATE TABLE logbook (line text); INSERT INTO logbook VALUES ($$hello$$)',
    });
    const { page } = await h.signedIn(`#/s/${schema}/t/logbook`);

    await page.getByText('Read-only: this table has no primary key').waitFor();
    await page.getByRole('cell', { name: 'hello' }).dblclick();
    expect(await page.getByLabel('Cell value').count()).toBe(0);
  });

  it('runs SQL with completion of the schema’s tables, keeps the text on an error, and keeps drafts, history and snippets', async () => {
    const schema = await schemaWithItems(3);
    const { page, errors } = await h.signedIn(`#/s/${schema}/sql`);
    const editor = page.locator('.cm-content');
    await editor.click();
    await page.keyboard.type('SELECT name FROM ite');
    // Enter takes the option only once the list is current (while CodeMirror still completes the
    // last letters it shows the old list, disabled) and has been open its interactionDelay (75 ms):
    // before either, Enter is a new line. Both are waited for, whatever the machine's speed.
    await page
      .locator('.cm-tooltip-autocomplete:not(.cm-tooltip-autocomplete-disabled) li[aria-selected="true"]')
      .filter({ hasText: 'items' })
      .waitFor();
    await page.waitForTimeout(100);
    await page.keyboard.press('Enter');
    await page.keyboard.type(' ORDER BY id');
    await page.keyboard.press('Control+Enter');
    await expectText(page.getByTestId('statement-summary'), 'SELECT · 3 rows');
    await page.getByRole('cell', { name: 'row 2' }).waitFor();
    await h.screenshot(page, 'sql');
    await page.emulateMedia({ colorScheme: 'dark' });
    await h.screenshot(page, 'sql-dark');

    await page.keyboard.press('Control+a');
    await page.keyboard.type('SELECT nme FROM items');
    await page.keyboard.press('Control+Enter');
    await page.getByRole('alert').filter({ hasText: 'nme' }).waitFor();
    await page.getByText('at line 1, column 8').waitFor();
    await expectText(editor, 'SELECT nme FROM items');

    // A snippet saved, then the page reloaded: the draft, the history (the failed run too) and
    // the snippet are still there, the history searched, and a snippet loads into the editor.
    await page.getByText('Snippets (').click();
    const save = page.getByRole('form', { name: 'Save as snippet' });
    const snippet = `misspelt ${schema}`;
    await save.getByLabel('Snippet name').fill(snippet);
    await save.getByRole('button', { name: 'Save the editor’s SQL' }).click();
    await page.getByRole('list', { name: 'Snippets' }).getByRole('button', { name: snippet }).waitFor();
    await page.reload();
    await expectText(page.locator('.cm-content'), 'SELECT nme FROM items');
    await page.getByText('History', { exact: true }).click();
    const history = page.getByRole('list', { name: 'History' });
    await expectText(history.locator('li').first(), 'SELECT nme FROM items');
    await expectText(history.locator('li').first(), '✗');
    await page.getByLabel('Search history').fill('ORDER BY ID');
    await page.getByLabel('Search history').press('Enter');
    await history.getByRole('button', { name: 'SELECT name FROM items ORDER BY id' }).first().click();
    await expectText(page.locator('.cm-content'), 'SELECT name FROM items ORDER BY id');
    await page.getByText('Snippets (').click();
    await page.getByRole('list', { name: 'Snippets' }).getByRole('button', { name: snippet }).click();
    await expectText(page.locator('.cm-content'), 'SELECT nme FROM items');

    // Left to the service: it runs in the one schema the SQL names, and says so.
    await page.getByLabel('Run in').selectOption('named');
    await page.locator('.cm-content').click();
    await page.keyboard.press('Control+a');
    await page.keyboard.type(`SELECT count(*) AS n FROM ${schema}.items`);
    await page.keyboard.press('Control+Enter');
    await expectText(page.getByTestId('statement-summary'), 'SELECT · 1 row · ');
    await expectText(page.getByTestId('result-summary'), `in ${schema} as the schema's role`);
    expect(errors).toEqual([]);
  });

  it('shows each statement of a script in its own tab, and the first rows of a big result with a notice', async () => {
    const schema = await schemaWithItems(3);
    const { page, errors } = await h.signedIn(`#/s/${schema}/sql`);
    await page.locator('.cm-content').click();
    await page.keyboard.type(
      "SELECT 1 AS one; INSERT INTO items (name) VALUES ('four'), ('five'); UPDATE items SET name = name || '!' WHERE id = 1; CREATE TABLE scratch (x int); SELECT name FROM items ORDER BY id",
    );
    await page.keyboard.press('Control+Enter');
    const tabs = page.getByRole('tablist', { name: 'Statements' }).getByRole('tab');
    await expectText(tabs.nth(4), '5. SELECT · 5 rows');
    expect(await tabs.allTextContents()).toEqual([
      '1. SELECT · 1 row',
      '2. INSERT · 2 rows',
      '3. UPDATE · 1 row',
      '4. CREATE',
      '5. SELECT · 5 rows',
    ]);
    await page.getByRole('cell', { name: 'five' }).waitFor();
    await tabs.nth(1).click();
    await expectText(page.getByTestId('statement-summary'), 'INSERT · 2 rows');
    await tabs.nth(0).click();
    await page.getByRole('cell', { name: '1', exact: true }).waitFor();
    await h.screenshot(page, 'sql-statements');

    // 50,000 rows: the first ones shown (the setting, kept across a reload), the rest not read.
    await page.getByLabel('Rows shown').selectOption('100');
    await page.reload();
    expect(await page.getByLabel('Rows shown').inputValue()).toBe('100');
    await page.locator('.cm-content').click();
    await page.keyboard.press('Control+a');
    await page.keyboard.type('SELECT i FROM generate_series(1, 50000) i');
    await page.keyboard.press('Control+Enter');
    await expectText(page.getByTestId('statement-summary'), 'SELECT · 100 rows+');
    await expectText(page.getByTestId('rows-truncated'), 'The first 100 rows are shown');
    expect(await page.getByRole('table', { name: 'Result' }).locator('tbody tr').count()).toBe(100);
    // The rest through the export, page after page (QUERY_MAX_ROWS each) joined into one file.
    const saving = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export every row as CSV' }).click();
    const lines = readFileSync((await (await saving).path()) as string, 'utf8')
      .trim()
      .split('\n');
    expect(lines).toHaveLength(50_001);
    expect([lines[0], lines[1], lines.at(-1)]).toEqual(['i', '1', '50000']);
    expect(errors).toEqual([]);
  });

  it('cancels a running statement from the console moments after the click, and runs the next one', async () => {
    const schema = await schemaWithItems(1);
    const { page, errors } = await h.signedIn(`#/s/${schema}/sql`);
    await page.locator('.cm-content').click();
    await page.keyboard.type('SELECT pg_sleep(60)');
    await page.keyboard.press('Control+Enter');
    await expectText(page.getByTestId('running-time'), 'Running…');
    // Clicked once PostgreSQL runs it: before, there is nothing yet to cancel.
    const sleeping = async () => {
      const seen = await h.api<{ rows: Array<{ n: number }> }>('POST', 'query', {
        sql: "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query = 'SELECT pg_sleep(60)'",
        runAs: 'admin',
      });
      return seen.body.rows[0]?.n ?? 0;
    };
    for (let i = 0; i < 200 && (await sleeping()) === 0; i++) await page.waitForTimeout(50);
    const clicked = Date.now();
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('alert').filter({ hasText: 'cancelled' }).waitFor({ timeout: 20_000 });
    const tookMs = Date.now() - clicked;
    // Issue 39's target is 1 s; held loosely here (a loaded machine), the figure printed.
    console.log(`the cancel ended pg_sleep(60) ${tookMs} ms after the click`);
    expect(tookMs).toBeLessThan(20_000);
    expect(await sleeping()).toBe(0);
    expect(await page.getByTestId('running-time').count()).toBe(0);

    await page.locator('.cm-content').click();
    await page.keyboard.press('Control+a');
    await page.keyboard.type('SELECT count(*)::int AS n FROM items');
    await page.keyboard.press('Control+Enter');
    await expectText(page.getByTestId('statement-summary'), 'SELECT · 1 row');
    expect(errors).toEqual([]);
  });

  it('shows EXPLAIN ANALYZE of a DELETE as a plan tree, its costliest node marked, and deletes nothing', async () => {
    const schema = await schemaWithItems(2000);
    const { page, errors } = await h.signedIn(`#/s/${schema}/sql`);
    await page.locator('.cm-content').click();
    await page.keyboard.type("DELETE FROM items WHERE name LIKE 'row 1%'");
    await page.getByRole('button', { name: 'Explain analyze' }).click();
    const plan = page.getByRole('region', { name: 'Plan' });
    await expectText(plan.getByTestId('plan-summary'), 'rolled back');
    await expectText(plan.locator('.plan-title').first(), 'Delete');
    await expectText(plan, 'Seq Scan on items');
    await expectText(plan, 'actual 1,111');
    await expectText(plan, "Filter: (name ~~ 'row 1%'::text)");
    expect(await plan.locator('.costly').count()).toBeGreaterThan(0);
    await h.screenshot(page, 'sql-plan');

    const left = await h.api<{ rows: Array<{ n: number }> }>('POST', 'query', {
      sql: 'SELECT count(*)::int AS n FROM items',
      schema,
    });
    expect(left.body.rows[0]?.n).toBe(2000);

    await page.getByRole('button', { name: 'Explain', exact: true }).click();
    await expectText(page.getByRole('region', { name: 'Plan' }).getByTestId('plan-summary'), 'not run');
    expect(errors).toEqual([]);
  });

  it('shows EXPLAIN’s plan as a tree: the result keeps each line’s leading spaces', async () => {
    const schema = await schemaWithItems(3);
    const { page, errors } = await h.signedIn(`#/s/${schema}/sql`);
    await page.locator('.cm-content').click();
    await page.keyboard.type('EXPLAIN SELECT * FROM items a, items b WHERE a.id = b.id');
    await page.keyboard.press('Control+Enter');
    await expectText(page.getByTestId('statement-summary'), 'rows');
    const lines = await page
      .getByRole('table', { name: 'Result' })
      .locator('tbody td')
      .evaluateAll((cells) =>
        cells.map((td) => [td.textContent ?? '', 'innerText' in td ? String(td.innerText) : '']),
      );
    // A join's inputs are indented under it: `  ->  Seq Scan on items a ...`.
    const nested = lines.filter(([text]) => text?.startsWith('  ->'));
    expect(nested.length).toBeGreaterThan(0);
    // As rendered (innerText follows the CSS), not only as held in the DOM.
    for (const [text, rendered] of nested) expect(rendered).toBe(text);
    expect(errors).toEqual([]);
  });

  it('creates an API key shown once that works against the API, and exports JSON that matches the grid', async () => {
    const schema = await schemaWithItems(4);
    const { page, errors } = await h.signedIn(`#/s/${schema}/keys`);
    const form = page.getByRole('form', { name: 'Create an API key' });
    await form.getByLabel('Name').fill('reader');
    await form.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.getByTestId('new-key').textContent()) ?? '';
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    await page.getByRole('cell', { name: 'reader' }).waitFor();
    // How to connect as the schema's own login, the password a placeholder.
    await expectText(page.getByTestId('connection-psql'), `psql 'postgresql://${schema}_user@`);
    await expectText(page.getByTestId('connection-url'), `postgresql://${schema}_user:<password>@`);
    await h.screenshot(page, 'keys');

    const viaKey = await fetch(`${h.host.base}/api/tables?schema=${schema}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(await viaKey.json()).toEqual(['items']);
    await page.reload();
    expect(await page.getByTestId('new-key').count()).toBe(0);
    page.once('dialog', (dialog) => dialog.accept());
    await page.getByRole('row').filter({ hasText: 'reader' }).getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('cell', { name: 'reader' }).waitFor({ state: 'detached' });
    const revoked = await fetch(`${h.host.base}/api/tables?schema=${schema}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(revoked.status).toBe(401);

    await page.goto(`${h.host.base}/#/s/${schema}/t/items`);
    await expectText(page.getByTestId('pager'), '4 rows');
    const csv = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const csvFile = await csv;
    expect(csvFile.suggestedFilename()).toBe('items.csv');
    const csvLines = readFileSync((await csvFile.path()) as string, 'utf8').split(/\r?\n/);
    expect(csvLines.slice(0, 2)).toEqual(['id,name', '1,row 1']);
    const grid = await page.getByRole('row').allTextContents();
    const saving = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export JSON' }).click();
    const file = await saving;
    const exported = JSON.parse(readFileSync((await file.path()) as string, 'utf8'));

    // The console's file is every row as one JSON array, the shape an import takes back.
    expect(file.suggestedFilename()).toBe('items.json');
    expect(exported).toHaveLength(4);
    expect(exported.map((row: { id: number; name: string }) => `${row.id}${row.name}`)).toEqual(
      grid.slice(1).map((line) => line.trim()),
    );
    expect(errors).toEqual([]);
  });

  it('activates a license over the trial, and shows a revocation at once, with the way back on every page', async () => {
    const { page, errors } = await h.signedIn('#/license');
    const badge = page.getByTestId('license-badge');
    await expectText(badge, 'Trial: 14 days left');

    const key = await h.licenseServer.issue('owner@example.com');
    const activation = page.getByRole('form', { name: 'Activate a license' });
    await activation.getByLabel('Email').fill('owner@example.com');
    await activation.getByLabel('License key').fill(key);
    await page.getByRole('button', { name: 'Activate' }).click();
    await page.getByText('License activated').waitFor();
    await expectText(badge, 'Licensed');
    await expectText(page.getByTestId('license-status'), 'active');

    // Refresh asks the server now: a revocation shows at once, with the way back on every page.
    await h.licenseServer.revoke(key);
    await page.getByRole('button', { name: 'Refresh now' }).click();
    await expectText(page.getByTestId('license-status'), 'invalid');
    await page.getByRole('link', { name: 'dbadmin' }).click();
    await page.getByRole('alert').getByRole('link', { name: 'Open the license page' }).waitFor();
    expect(errors).toEqual([]);
  });
});

/** A header cell of the grid, by its column's name. */
const header = (page: Page, column: string) =>
  page.locator('th').filter({ has: page.getByRole('button', { name: `Sort by ${column}`, exact: true }) });

/** Waits until the grid's column holds `values`, top to bottom. */
async function expectColumn(page: Page, column: string, values: string[]): Promise<void> {
  const read = () =>
    page.getByRole('table', { name: /^Rows of / }).evaluate((table, name) => {
      const headers = [...table.querySelectorAll('thead th')];
      const index = headers.findIndex((th) => th.querySelector(`button[aria-label="Sort by ${name}"]`));
      return [...table.querySelectorAll('tbody tr')].map((tr) => tr.children[index]?.textContent ?? '');
    }, column);
  const deadline = Date.now() + 10_000;
  let found = await read();
  while (JSON.stringify(found) !== JSON.stringify(values) && Date.now() < deadline) {
    await page.waitForTimeout(100);
    found = await read();
  }
  expect(found).toEqual(values);
}
