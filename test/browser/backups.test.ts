import { readFileSync } from 'node:fs';
import { brotliDecompressSync } from 'node:zlib';
import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';
import { uniqueName } from '#test/support/names';

/**
 * A tenant's backups on its page, in a real Chromium through `npm start`'s host: backed up, saved
 * as one file (its manifest line, then its parts' compressed bytes), then restored from that file over the
 * schema's rows (a row deleted since comes back) and into a new schema; and deleted.
 */
jest.setTimeout(180_000);

const h = new ConsoleHarness();
const PASSWORD = 'pw-0123456789';
/** Rows of 4.5 KB of hex each, which compresses to half: past one part of 4 MiB, so the file holds two. */
const FILLER_ROWS = 2000;

describeInBrowser('backups on the tenants page', () => {
  beforeAll(async () => {
    await h.start();
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
  }, 180_000);
  afterAll(() => h.close());

  /** Runs `sql` in `schema` as its own role; answers the rows. */
  async function sql<T = Record<string, unknown>>(schema: string, text: string): Promise<T[]> {
    const ran = await h.api<{ rows: T[] }>('POST', 'query', { schema, sql: text });
    if (ran.status !== 200) throw new Error(`${text}: ${JSON.stringify(ran.body)}`);
    return ran.body.rows;
  }

  const names = (schema: string) =>
    sql<{ name: string }>(schema, 'SELECT name FROM people ORDER BY id').then((rows) =>
      rows.map((r) => r.name),
    );

  it('backs a schema up, saves it as one file, and restores that file over its rows and into a new schema', async () => {
    const schema = uniqueName('webbk');
    expect((await h.api('POST', 'schema/create', { schemaName: schema, password: PASSWORD })).status).toBe(
      201,
    );
    await sql(
      schema,
      `CREATE TABLE people (id int PRIMARY KEY, name text NOT NULL);
       INSERT INTO people VALUES (1, 'Ann'), (2, 'Zoë 𝄞'), (3, E'tab\\tand\\nline');
       CREATE TABLE filler (id int PRIMARY KEY, body text);
       INSERT INTO filler
         SELECT i, (SELECT string_agg(md5(i || '-' || j), '') FROM generate_series(1, 140) j)
           FROM generate_series(1, ${FILLER_ROWS}) i;`,
    );
    const rows = 3 + FILLER_ROWS;

    const { page, errors } = await h.signedIn(`#/tenants/${schema}`);
    const section = page.getByRole('region', { name: 'Backups' });
    await expectText(section, 'No backups kept.');
    await section.getByRole('button', { name: 'Back up now' }).click();
    const backups = section.getByRole('table', { name: `Backups of ${schema}` });
    await expectText(backups.getByRole('row').nth(1), rows.toLocaleString('en-US'));

    const saving = page.waitForEvent('download');
    await backups.getByRole('button', { name: 'Download' }).click();
    const download = await saving;
    const path = (await download.path()) as string;
    const file = readFileSync(path);
    const newline = file.indexOf(0x0a);
    const manifest = JSON.parse(file.subarray(0, newline).toString('utf8'));
    // The console names it <schema>-<createdAt>; Chromium may write a name's `:` as `_`.
    const named = `${schema}-${manifest.createdAt}.dbadmin-bundle`;
    expect([named, named.replaceAll(':', '_')]).toContain(download.suggestedFilename());
    expect(manifest).toMatchObject({ format: 'dbadmin-bundle', schema, rows });
    expect(manifest.parts.length).toBe(2);
    const partBytes = manifest.parts.reduce((sum: number, part: { bytes: number }) => sum + part.bytes, 0);
    expect(file.length).toBe(newline + 1 + partBytes);
    expect(brotliDecompressSync(file.subarray(newline + 1)).includes(Buffer.from('Zoë 𝄞'))).toBe(true);

    // A row lost since the backup comes back when the file replaces the schema's rows.
    await sql(schema, 'DELETE FROM people WHERE id = 2');
    await section.getByRole('button', { name: 'Restore…' }).click();
    const dialog = page.getByRole('dialog', { name: `Restore a backup (${schema})` });
    const input = dialog.getByLabel('Bundle file');
    await input.setInputFiles({
      name: 'notes.dbadmin-bundle',
      mimeType: 'text/plain',
      buffer: Buffer.from('hi\n'),
    });
    await expectText(dialog.getByRole('alert'), 'notes.dbadmin-bundle is not a dbadmin bundle');
    await input.setInputFiles(path);
    await expectText(dialog.getByTestId('bundle-facts'), `Schema ${schema}`);
    await dialog.getByLabel("Replace this schema's rows").check();
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    const confirm = page.getByRole('dialog', { name: `Replace the rows of schema ${schema}` });
    await confirm.getByLabel(`Type ${schema} to confirm`).fill(schema);
    await confirm.getByRole('button', { name: 'Replace the rows of schema' }).click();
    const restored = `Restored ${rows.toLocaleString('en-US')} rows in 2 tables into ${schema}`;
    await expectText(dialog.getByRole('status'), restored);
    expect(await names(schema)).toEqual(['Ann', 'Zoë 𝄞', 'tab\tand\nline']);

    // The same file into a new schema, with its login's password: too short first, refused at
    // commit, and the restore it opened is abandoned rather than left counting against the schema.
    const copy = uniqueName('webrs');
    await dialog.getByLabel('Into a new schema').check();
    await dialog.getByLabel('New schema name').fill(copy);
    await dialog.getByLabel('Password for its database user').fill('short');
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await expectText(dialog.getByRole('alert'), 'at least 8 characters');
    const open = await h.db.query(`SELECT count(*)::int AS n FROM _dbadmin.bundles WHERE schema_name = $1`, [
      copy,
    ]);
    expect(open.rows).toEqual([{ n: 0 }]);
    await dialog.getByLabel('Password for its database user').fill(PASSWORD);
    await dialog.getByRole('button', { name: 'Restore', exact: true }).click();
    await expectText(dialog.getByRole('status'), `into ${copy} (backed up from ${schema})`);
    expect(await names(copy)).toEqual(['Ann', 'Zoë 𝄞', 'tab\tand\nline']);
    const [filler] = await sql<{ n: string; bytes: string }>(
      copy,
      'SELECT count(*) AS n, sum(octet_length(body)) AS bytes FROM filler',
    );
    expect(filler).toEqual({ n: String(FILLER_ROWS), bytes: String(FILLER_ROWS * 140 * 32) });
    await dialog.getByRole('button', { name: 'Close' }).click();

    page.once('dialog', (question) => question.accept());
    await backups.getByRole('button', { name: 'Delete' }).click();
    await expectText(section, 'No backups kept.');
    expect((await h.api<unknown[]>('GET', `backups?schema=${schema}`)).body).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });
});
