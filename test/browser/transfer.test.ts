import { readFileSync } from 'node:fs';
import type { Page } from 'playwright-core';
import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';

/**
 * Files in and out of the console, in a real Chromium through `npm start`'s host: a CSV dropped on
 * a table is imported (in parts, with its progress), a whole table is exported page after page into
 * one file, and a file dropped on a schema becomes a new table.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();

describeInBrowser('files in and out of the console', () => {
  beforeAll(async () => {
    await h.start();
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
  }, 180_000);
  afterAll(() => h.close());

  /** Drops a file with `text` on the element the locator names, as a person dragging it there would. */
  async function drop(page: Page, target: string, name: string, text: string, type: string) {
    // In the page: DataTransfer and File are the browser's.
    const transfer = await page.evaluateHandle(`(() => {
      const data = new DataTransfer();
      data.items.add(new File([${JSON.stringify(text)}], ${JSON.stringify(name)}, { type: ${JSON.stringify(type)} }));
      return data;
    })()`);
    const zone = page.getByRole('region', { name: target });
    await zone.dispatchEvent('dragover', { dataTransfer: transfer });
    await zone.dispatchEvent('drop', { dataTransfer: transfer });
  }

  const peopleCsv = (rows: number, bad?: number) => {
    const lines = ['Name,AGE,id'];
    for (let i = 1; i <= rows; i++)
      lines.push(`"Person ${i}, the ${i}th",${i === bad ? 'old' : i % 90},${i}`);
    return `${lines.join('\n')}\n`;
  };

  it('imports a CSV dropped on a table, saying where a bad one fails, and exports the whole table into one file', async () => {
    const schema = await h.schemaWith('CREATE TABLE people (id int PRIMARY KEY, name text, age int)');
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/people`);
    await page.getByText('0 rows').first().waitFor();
    const target = 'Drop a file to import into people';

    await drop(page, target, 'people.csv', peopleCsv(30, 30), 'text/csv');
    const dialog = page.getByRole('dialog', { name: 'Import people.csv into people' });
    const firstRows = dialog.getByRole('table', { name: 'The file’s first rows' });
    await expectText(firstRows, 'Person 1, the 1th');
    expect(await dialog.getByLabel('Column for Name').inputValue()).toBe('name');
    expect(await dialog.getByLabel('Column for AGE').inputValue()).toBe('age');
    await dialog.getByRole('button', { name: 'Import' }).click();
    await expectText(
      dialog.getByRole('alert'),
      'line 31, column age: invalid input syntax for type integer: "old"; nothing was imported',
    );
    await dialog.getByRole('button', { name: 'Cancel' }).click();

    const rows = 25_000;
    await drop(page, target, 'people.csv', peopleCsv(rows), 'text/csv');
    await dialog.getByRole('button', { name: 'Import' }).click();
    await expectText(dialog.getByRole('status').last(), `${rows} rows imported into "people"`);
    await h.screenshot(page, 'import');
    await dialog.getByRole('button', { name: 'Close' }).click();
    await page.getByText(`${rows} rows`).first().waitFor();

    const saved = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export CSV' }).click();
    const file = await saved;
    expect(file.suggestedFilename()).toBe('people.csv');
    const lines = readFileSync((await file.path()) as string, 'utf8')
      .trim()
      .split('\n');
    expect(lines).toHaveLength(rows + 1);
    expect(lines[0]).toBe('id,name,age');
    expect(lines[1]).toBe('1,"Person 1, the 1th",1');
    expect(lines.at(-1)).toBe(`${rows},"Person ${rows}, the ${rows}th",${rows % 90}`);
    expect(new Set(lines).size).toBe(rows + 1);
    expect(errors).toEqual([]);
  });

  it('exports a CSV safe to open in a spreadsheet while ticked, and exact for re-import when not', async () => {
    const schema = await h.schemaWith(
      `CREATE TABLE cells (id int PRIMARY KEY, v text);
       INSERT INTO cells VALUES (1, '=HYPERLINK("http://evil/","x")'), (2, '-5'), (3, 'plain')`,
    );
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/cells`);
    await page.getByText('3 rows').first().waitFor();
    const exported = async () => {
      const saved = page.waitForEvent('download');
      await page.getByRole('button', { name: 'Export CSV' }).click();
      return readFileSync((await (await saved).path()) as string, 'utf8');
    };
    const forSpreadsheets = page.getByRole('checkbox', { name: 'for spreadsheets' });

    expect(await forSpreadsheets.isChecked()).toBe(true);
    expect(await exported()).toBe(`id,v\n1,"'=HYPERLINK(""http://evil/"",""x"")"\n2,'-5\n3,plain\n`);
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await forSpreadsheets.uncheck();
    expect(await exported()).toBe('id,v\n1,"=HYPERLINK(""http://evil/"",""x"")"\n2,-5\n3,plain\n');
    await page.reload();
    await page.getByText('3 rows').first().waitFor();
    expect(await forSpreadsheets.isChecked()).toBe(false);
    expect(errors).toEqual([]);
  });

  it('makes a new table of a JSON file dropped on a schema, with the types it suggests, and imports it', async () => {
    const schema = await h.schemaWith('SELECT 1');
    const { page, errors } = await h.signedIn(`#/s/${schema}`);
    const json = JSON.stringify([
      { id: 1, 'Full Name': 'Ann', joined: '2024-01-02', score: 1.5, tags: ['a'] },
      { id: 2, 'Full Name': 'Bo', joined: '2024-02-03', score: null, tags: [] },
    ]);

    await drop(page, 'Drop a file to make a new table of it', 'Club Members.json', json, 'application/json');
    const dialog = page.getByRole('dialog', { name: 'New table from Club Members.json' });
    await dialog.getByLabel('Name for Full Name').waitFor();
    expect(await dialog.getByLabel('Table name').inputValue()).toBe('club_members');
    expect(await dialog.getByLabel('Name for Full Name').inputValue()).toBe('full_name');
    expect(await dialog.getByLabel('Type for joined').inputValue()).toBe('DATE');
    expect(await dialog.getByLabel('id is the primary key').isChecked()).toBe(true);
    await dialog.getByLabel('Type for score').selectOption('REAL');
    await h.screenshot(page, 'new-table-from-file');
    await dialog.getByRole('button', { name: 'Create table and import' }).click();

    await page.getByRole('heading', { name: `${schema} / club_members` }).waitFor();
    await page.getByText('2 rows').first().waitFor();
    const { body } = await h.api<{ rows: unknown[] }>('POST', 'query', {
      schema,
      sql: 'SELECT id, full_name, joined::text, score, tags FROM club_members ORDER BY id',
    });
    expect(body.rows).toEqual([
      { id: 1, full_name: 'Ann', joined: '2024-01-02', score: '1.5', tags: '["a"]' },
      { id: 2, full_name: 'Bo', joined: '2024-02-03', score: null, tags: '[]' },
    ]);
    expect(errors).toEqual([]);
  });
});
