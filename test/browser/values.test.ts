import { ConsoleHarness, describeInBrowser, expectText, gridCell } from '#test/support/browser';

/**
 * Issue 35 in the console: cells show values exactly as PostgreSQL stores them (README: Values in
 * JSON), and an edit sends back exactly what was read, changed only where the person changed it.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();

describeInBrowser('values in the console', () => {
  beforeAll(() => h.start(), 180_000);
  afterAll(() => h.close());

  it('shows microseconds, NaN, 64-bit keys and big JSON numbers as stored, and edits them without loss', async () => {
    const schema =
      await h.schemaWith(`CREATE TABLE readings (id bigint PRIMARY KEY, at timestamptz, ratio double precision, doc jsonb);
            INSERT INTO readings VALUES
              (9007199254740993, '2024-05-05 10:11:12.123456+00', 'NaN', '{"id": 12345678901234567890, "n": 1}')`);
    const stored = async () =>
      (
        await h.api<{ rows: Record<string, string>[] }>('POST', 'query', {
          schema,
          sql: `SET TimeZone = 'UTC'; SELECT at::text, ratio::text, doc::text FROM readings WHERE id = 9007199254740993`,
        })
      ).body.rows[0];
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/readings`);
    const key = '9007199254740993';
    // Columns: select, id, at, ratio, doc.
    await expectText(gridCell(page, key, 1), key);
    const at = (await gridCell(page, key, 2).textContent()) ?? '';
    expect(at).toMatch(/^2024-05-0[45] \d\d:\d\d:12\.123456[+-]\d\d/);
    await expectText(gridCell(page, key, 3), 'NaN');
    await expectText(gridCell(page, key, 4), '{"n": 1, "id": 12345678901234567890}');

    // A float set to -0, which a JavaScript number would send as 0.
    await gridCell(page, key, 3).dblclick();
    const inPlace = page.getByLabel('Cell value');
    expect(await inPlace.inputValue()).toBe('NaN');
    await inPlace.fill('-0');
    await inPlace.press('Enter');
    await expectText(gridCell(page, key, 3), '-0');

    // The instant one microsecond on, in the row the 64-bit key names.
    await gridCell(page, key, 2).dblclick();
    expect(await inPlace.inputValue()).toBe(at);
    await inPlace.fill(at.replace('.123456', '.123457'));
    await inPlace.press('Enter');
    await expectText(gridCell(page, key, 2), at.replace('.123456', '.123457'));

    // Another key of the document changed: the number past 2^53 stays as it was.
    await gridCell(page, key, 4).dblclick();
    const dialog = page.getByRole('dialog');
    const editor = dialog.getByLabel('Cell value');
    expect(await editor.inputValue()).toBe('{\n  "n": 1,\n  "id": 12345678901234567890\n}');
    await editor.fill((await editor.inputValue()).replace('"n": 1', '"n": 2'));
    await editor.press('Control+Enter');
    await dialog.waitFor({ state: 'detached' });
    await expectText(gridCell(page, key, 4), '{"n": 2, "id": 12345678901234567890}');

    expect(await stored()).toEqual({
      at: '2024-05-05 10:11:12.123457+00',
      ratio: '-0',
      doc: '{"n": 2, "id": 12345678901234567890}',
    });
    expect(errors).toEqual([]);
  });

  it('shows timestamps in UTC or as stored, with every microsecond, in the grid and the SQL results', async () => {
    const schema = await h.schemaWith(`CREATE TABLE events (id int PRIMARY KEY, at timestamptz);
      INSERT INTO events VALUES (1, '2024-03-01 09:30:00.123456+01');`);
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/events`);
    const stored = (await gridCell(page, 1, 2).textContent()) ?? '';
    expect(stored).toMatch(/\.123456/);
    await page.getByLabel('Times shown in').selectOption('utc');
    await expectText(gridCell(page, 1, 2), '2024-03-01 08:30:00.123456+00');
    // The choice holds across pages and a reload, and in the SQL editor's results.
    await page.reload();
    await expectText(gridCell(page, 1, 2), '2024-03-01 08:30:00.123456+00');
    await page.goto(`${h.host.base}/#/s/${schema}/sql`);
    await page.locator('.cm-content').click();
    await page.keyboard.type('SELECT at FROM events');
    await page.keyboard.press('Control+Enter');
    await page.getByRole('cell', { name: '2024-03-01 08:30:00.123456+00' }).waitFor();
    await page.getByLabel('Times shown in').selectOption('stored');
    await page.getByRole('cell', { name: stored }).waitFor();
    expect(errors).toEqual([]);
  });
});
