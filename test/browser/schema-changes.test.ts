import type { Page } from 'playwright-core';
import { ConsoleHarness, describeInBrowser, expectText } from '#test/support/browser';
import { uniqueName } from '#test/support/names';

/**
 * Changing a table's structure from the console, in a real Chromium through `npm start`'s host:
 * every change opens its preview (the SQL, its locks, a rewrite in plain words) and runs only
 * after Run. The host's lock timeout is 30 s here, so a test can hold a change behind its own
 * transaction and let it go.
 */
jest.setTimeout(120_000);

const h = new ConsoleHarness();

describeInBrowser('schema changes in the console', () => {
  beforeAll(async () => {
    // Long enough that a test can watch a change wait for its lock, and then let it go.
    await h.start({ SCHEMA_LOCK_TIMEOUT_MS: '30000' });
    // The screenshots show the product as a new user sees it: a running trial.
    expect((await h.api('POST', 'trial/start', { email: 'owner@example.com' })).status).toBe(200);
  }, 180_000);
  afterAll(() => h.close());

  /** A schema holding `prices (id serial primary key, label text, amount text)` and `owners`. */
  async function schemaWithPrices(): Promise<string> {
    const schema = uniqueName('web');
    expect(
      (await h.api('POST', 'schema/create', { schemaName: schema, password: 'pw-0123456789' })).status,
    ).toBe(201);
    const made = await h.api('POST', 'query', {
      schema,
      sql: `CREATE TABLE owners (id serial PRIMARY KEY, name text);
            INSERT INTO owners (name) VALUES ('ann'), ('bo');
            CREATE TABLE prices (id serial PRIMARY KEY, label text, amount text, owner integer);
            INSERT INTO prices (label, amount, owner)
              VALUES ('a', '10', 1), ('b', '12.5', 2), ('c', 'n/a', 1), ('d', 'free', NULL);`,
    });
    expect(made.status).toBe(200);
    return schema;
  }

  const columnMenu = async (page: Page, column: string, item: string) => {
    await page.getByLabel(`Change column ${column}`, { exact: true }).click();
    const entry = page.getByRole('button', { name: item, exact: true });
    // The menu shows above the table: its entry is what a click at its middle reaches.
    expect(
      await entry.evaluate((element) => {
        const box = element.getBoundingClientRect();
        return (
          element.ownerDocument.elementFromPoint(box.x + box.width / 2, box.y + box.height / 2) === element
        );
      }),
    ).toBe(true);
    await entry.click();
  };

  /** The columns of a table as the API reads them: name to type. */
  async function columnTypes(schema: string, table: string): Promise<Record<string, string>> {
    const { body } = await h.api<{ schema: { table: string; columns: { name: string; type: string }[] }[] }>(
      'GET',
      `schema?schema=${schema}`,
    );
    const entry = body.schema.find((t) => t.table === table);
    return Object.fromEntries((entry?.columns ?? []).map((c) => [c.name, c.type]));
  }

  it('renames a column after showing its SQL and lock, and explains a type change that some rows fail', async () => {
    const schema = await schemaWithPrices();
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/prices/structure`);

    // The dry run answers late: meanwhile the inputs cannot change under it.
    const sent: string[] = [];
    await page.route('**/api/table/prices/column/label', async (route) => {
      sent.push(route.request().postData() ?? '');
      if (JSON.parse(route.request().postData() ?? '{}').dryRun) await new Promise((r) => setTimeout(r, 500));
      await route.continue();
    });
    await columnMenu(page, 'label', 'Rename…');
    const rename = page.getByRole('dialog', { name: 'Rename column label' });
    await rename.getByLabel('New name').fill('title');
    await rename.getByRole('button', { name: 'Review change' }).click();
    expect(await rename.getByLabel('New name').isDisabled()).toBe(true);
    await expectText(
      rename.getByTestId('change-sql'),
      `ALTER TABLE "${schema}"."prices" RENAME COLUMN "label" TO "title";`,
    );
    await expectText(rename.getByTestId('change-preview'), 'ACCESS EXCLUSIVE');
    await expectText(rename.getByTestId('change-preview'), 'Changes only the catalog');
    expect(Object.keys(await columnTypes(schema, 'prices'))).toContain('label');
    await h.screenshot(page, 'schema-change-preview');
    await rename.getByRole('button', { name: 'Run change' }).click();
    await page.getByRole('cell', { name: 'title', exact: true }).waitFor();
    expect(sent.map((body) => JSON.parse(body))).toEqual([
      { schema, rename: 'title', dryRun: true },
      { schema, rename: 'title', dryRun: false },
    ]);
    expect(Object.keys(await columnTypes(schema, 'prices'))).toEqual(['id', 'title', 'amount', 'owner']);

    await columnMenu(page, 'amount', 'Change type…');
    const retype = page.getByRole('dialog', { name: 'Change the type of column amount' });
    await retype.getByLabel('New type').fill('NUMERIC(8,2)');
    await retype.getByRole('button', { name: 'Review change' }).click();
    await expectText(retype.getByTestId('change-preview'), 'Rewrites the table');
    // PostgreSQL cannot cast text to numeric without USING: the preview says so, not the run.
    await expectText(retype.getByTestId('change-needs-using'), 'a USING expression');
    expect(await retype.getByRole('button', { name: 'Run change' }).isDisabled()).toBe(true);
    await retype.getByRole('button', { name: 'Back' }).click();
    await retype.getByLabel('Using (optional)').fill('amount::numeric');
    await retype.getByRole('button', { name: 'Review change' }).click();
    await expectText(retype.getByTestId('change-sql'), 'USING amount::numeric');
    expect(await retype.getByTestId('change-needs-using').count()).toBe(0);
    await retype.getByRole('button', { name: 'Run change' }).click();
    await expectText(
      retype.getByRole('alert'),
      'Rows do not fit the type: 2 rows of "prices" (id "3", "4") cannot be made NUMERIC(8,2) in (amount); nothing was changed',
    );
    await h.screenshot(page, 'schema-change-refused');
    expect((await columnTypes(schema, 'prices')).amount).toBe('text');
    expect(errors).toEqual([]);
  });

  it('previews a text to integer change as needing USING, offers one, and runs it', async () => {
    const schema = await schemaWithPrices();
    await h.api('POST', 'query', {
      schema,
      sql: `CREATE TABLE stock (id serial PRIMARY KEY, qty text);
            INSERT INTO stock (qty) VALUES ('3'), (' 12'), (NULL);`,
    });
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/stock/structure`);
    const sent: unknown[] = [];
    page.on('request', (request) => {
      if (request.method() === 'PATCH') sent.push(JSON.parse(request.postData() ?? '{}'));
    });

    await columnMenu(page, 'qty', 'Change type…');
    const retype = page.getByRole('dialog', { name: 'Change the type of column qty' });
    await retype.getByLabel('New type').fill('INTEGER');
    await retype.getByRole('button', { name: 'Review change' }).click();
    const needs = retype.getByTestId('change-needs-using');
    await expectText(needs, 'PostgreSQL does not convert text to integer by itself');
    expect(await retype.getByRole('button', { name: 'Run change' }).isDisabled()).toBe(true);
    await h.screenshot(page, 'schema-change-needs-using');

    await needs.getByRole('button', { name: 'Use "qty"::integer' }).click();
    await expectText(
      retype.getByTestId('change-sql'),
      `ALTER TABLE "${schema}"."stock" ALTER COLUMN "qty" TYPE integer USING "qty"::integer;`,
    );
    await needs.waitFor({ state: 'detached' });
    await retype.getByRole('button', { name: 'Run change' }).click();
    await retype.waitFor({ state: 'detached' });
    expect((await columnTypes(schema, 'stock')).qty).toBe('integer');
    const rows = await h.api<{ rows: unknown[] }>('POST', 'query', {
      schema,
      sql: 'SELECT qty FROM stock ORDER BY id',
    });
    expect(rows.body.rows).toEqual([{ qty: 3 }, { qty: 12 }, { qty: null }]);
    // What ran is what the second preview showed: the offered expression, nothing else.
    expect(sent).toEqual([
      { schema, type: 'INTEGER', dryRun: true },
      { schema, type: 'INTEGER', using: '"qty"::integer', dryRun: true },
      { schema, type: 'INTEGER', using: '"qty"::integer', dryRun: false },
    ]);
    expect(errors).toEqual([]);
  });

  it('builds an index concurrently, showing its progress while it waits out an older transaction', async () => {
    const schema = await schemaWithPrices();
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/prices/indexes`);
    await page.getByRole('cell', { name: 'prices_pkey (primary key)' }).waitFor();

    await page.getByRole('button', { name: 'Create an index' }).click();
    const create = page.getByRole('dialog', { name: 'Create an index on prices' });
    await create.getByRole('group', { name: 'Columns, in key order' }).getByLabel('label').check();
    await create.getByLabel('Name (optional)').fill('prices_label_idx');
    await create.getByRole('button', { name: 'Review change' }).click();
    await expectText(create.getByTestId('change-sql'), 'CREATE INDEX CONCURRENTLY "prices_label_idx"');
    await expectText(create.getByTestId('change-preview'), 'SHARE UPDATE EXCLUSIVE');

    // A transaction whose snapshot is older than the build's: the build's last phase waits for it.
    const old = await h.db.connect();
    try {
      await old.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await old.query('SELECT 1');
      await create.getByRole('button', { name: 'Run change' }).click();
      await expectText(
        create.getByRole('status', { name: 'Index build progress' }),
        'waiting for old snapshots',
      );
      await h.screenshot(page, 'index-build-progress');
      expect(await page.getByRole('cell', { name: 'prices_label_idx', exact: true }).count()).toBe(0);
    } finally {
      await old.query('ROLLBACK');
      old.release();
    }
    await page.getByRole('cell', { name: 'prices_label_idx', exact: true }).waitFor();
    await expect(create.count()).resolves.toBe(0);
    const row = page
      .getByRole('row')
      .filter({ has: page.getByRole('cell', { name: 'prices_label_idx', exact: true }) });
    await expectText(row, 'btree');
    expect(await row.textContent()).not.toContain('invalid');

    await page.getByRole('button', { name: 'Drop index prices_label_idx' }).click();
    const drop = page.getByRole('dialog', { name: 'Drop index prices_label_idx' });
    expect(await drop.getByLabel('Concurrently: reads and writes go on meanwhile').isChecked()).toBe(true);
    await drop.getByRole('button', { name: 'Review change' }).click();
    await expectText(drop.getByTestId('change-sql'), 'DROP INDEX CONCURRENTLY');
    await drop.getByRole('button', { name: 'Run change' }).click();
    await page.getByRole('cell', { name: 'prices_label_idx', exact: true }).waitFor({ state: 'detached' });
    expect(errors).toEqual([]);
  });

  it('adds a foreign key to another table, locking both, and links the column to it', async () => {
    const schema = await schemaWithPrices();
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/prices/structure`);

    await page.getByRole('button', { name: 'Add a constraint' }).click();
    const add = page.getByRole('dialog', { name: 'Add a constraint to prices' });
    await add.getByRole('group', { name: 'Columns' }).getByLabel('owner').check();
    await add.getByLabel('References table').selectOption('owners');
    await add.getByLabel('On delete').selectOption('set null');
    await add.getByRole('button', { name: 'Review change' }).click();
    const preview = add.getByTestId('change-preview');
    await expectText(
      add.getByTestId('change-sql'),
      `ADD FOREIGN KEY ("owner") REFERENCES "${schema}"."owners" ON DELETE SET NULL`,
    );
    await expectText(preview, `Locks ${schema}.prices in SHARE ROW EXCLUSIVE mode`);
    await expectText(preview, `Locks ${schema}.owners in SHARE ROW EXCLUSIVE mode`);
    await expectText(preview, 'Reads every row');
    await add.getByRole('button', { name: 'Run change' }).click();

    const constraints = page.getByRole('region', { name: 'Constraints' });
    await expectText(constraints, 'ON DELETE SET NULL');
    await page.getByRole('link', { name: '→ owners.id' }).click();
    await page.getByRole('heading', { name: `${schema} / owners` }).waitFor();

    // The key holds: a price of an owner that does not exist is refused.
    const refused = await h.api('POST', 'table/prices/row', { schema, data: { label: 'x', owner: 99 } });
    expect(refused.status).toBe(400);

    await page.goto(`${h.host.base}/#/s/${schema}/t/prices/structure`);
    const listed = await h.api<{ constraints: { name: string; type: string }[] }>(
      'GET',
      `table/prices/constraints?schema=${schema}`,
    );
    const key = listed.body.constraints.find((c) => c.type === 'foreign key')?.name as string;
    await page.getByRole('button', { name: `Drop constraint ${key}` }).click();
    const drop = page.getByRole('dialog', { name: `Drop constraint ${key}` });
    expect(await drop.getByLabel('Also drop the foreign keys that depend on it (cascade)').isChecked()).toBe(
      false,
    );
    await drop.getByRole('button', { name: 'Review change' }).click();
    await expectText(drop.getByTestId('change-sql'), `DROP CONSTRAINT "${key}"`);
    await drop.getByRole('button', { name: 'Run change' }).click();
    await drop.waitFor({ state: 'detached' });
    const allowed = await h.api('POST', 'table/prices/row', { schema, data: { label: 'x', owner: 99 } });
    expect(allowed.status).toBe(201);
    expect(errors).toEqual([]);
  });
  it('names the session a change would wait for, checks again once it is gone, and renames the table', async () => {
    const schema = await schemaWithPrices();
    const { page, errors } = await h.signedIn(`#/s/${schema}/t/prices/structure`);
    await page.getByRole('cell', { name: 'amount', exact: true }).waitFor();

    const reader = await h.db.connect();
    try {
      await reader.query('BEGIN');
      await reader.query(`SELECT count(*) FROM "${schema}".prices`);
      await columnMenu(page, 'amount', 'Drop…');
      const drop = page.getByRole('dialog', { name: 'Drop column amount' });
      await drop.getByRole('button', { name: 'Review change' }).click();
      const blockers = drop.getByRole('region', { name: 'Blocking sessions' });
      await expectText(blockers, 'A session holds a lock this change needs');
      await expectText(blockers, 'idle in transaction');
      await expectText(blockers, `SELECT count(*) FROM "${schema}".prices`);
      await reader.query('COMMIT');
      await drop.getByRole('button', { name: 'Check again' }).click();
      await blockers.waitFor({ state: 'detached' });
      await drop.getByRole('button', { name: 'Run change' }).click();
      await drop.waitFor({ state: 'detached' });
    } finally {
      await reader.query('ROLLBACK').catch(() => undefined);
      reader.release();
    }
    expect(Object.keys(await columnTypes(schema, 'prices'))).toEqual(['id', 'label', 'owner']);

    await page.getByRole('button', { name: 'Rename table…' }).click();
    const rename = page.getByRole('dialog', { name: 'Rename table prices' });
    await rename.getByLabel('New name').fill('tariffs');
    await rename.getByRole('button', { name: 'Review change' }).click();
    await rename.getByRole('button', { name: 'Run change' }).click();
    await page.getByRole('heading', { name: `${schema} / tariffs` }).waitFor();
    await page.getByRole('cell', { name: 'label', exact: true }).waitFor();
    expect(page.url()).toMatch(/#\/s\/[^/]+\/t\/tariffs\/structure$/);
    expect(errors).toEqual([]);
  });
  it('creates an enum type and adds a value in its place, and shows the schema’s views with their definitions', async () => {
    const schema = await schemaWithPrices();
    await h.api('POST', 'query', {
      schema,
      sql: 'CREATE VIEW cheap AS SELECT label FROM prices WHERE owner = 1',
    });
    const { page, errors } = await h.signedIn(`#/s/${schema}`);

    await page.getByRole('button', { name: 'Create an enum type' }).click();
    const create = page.getByRole('dialog', { name: 'Create an enum type' });
    await create.getByLabel('Name').fill('mood');
    await create.getByLabel('Values, one a line, in their order').fill('sad\nhappy, very');
    await create.getByRole('button', { name: 'Review change' }).click();
    await expectText(
      create.getByTestId('change-sql'),
      `CREATE TYPE "${schema}"."mood" AS ENUM ('sad', 'happy, very');`,
    );
    await create.getByRole('button', { name: 'Run change' }).click();
    const types = page.getByRole('region', { name: 'Enum types' });
    await expectText(types, '"sad", "happy, very"');

    await types.getByRole('button', { name: 'Add a value to mood' }).click();
    const add = page.getByRole('dialog', { name: 'Add a value to mood' });
    await add.getByLabel('Value').fill('ok');
    await add.getByLabel('Sorts after').selectOption('sad');
    await add.getByRole('button', { name: 'Review change' }).click();
    await add.getByRole('button', { name: 'Run change' }).click();
    await expectText(types, '"sad", "ok", "happy, very"');

    const views = page.getByRole('region', { name: 'Views' });
    await views.getByText('cheap').click();
    await expectText(views, 'WHERE (owner = 1)');

    // The type is a column type at once: the add-column form offers it.
    await page.goto(`${h.host.base}/#/s/${schema}/t/prices/structure`);
    const form = page.getByRole('form', { name: 'Add a column' });
    await form.getByLabel('Column name').fill('feeling');
    await form.getByLabel('Column type').selectOption('mood');
    await form.getByRole('button', { name: 'Add column' }).click();
    await expectText(page.getByRole('row').filter({ hasText: 'feeling' }), `${schema}.mood`);
    expect(errors).toEqual([]);
  });
});
