import pg from 'pg';
import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { runQuery } from '#lib/admin/query';
import { adminAccess, type SchemaAccess, schemaAccess } from '#lib/db/executor';
import { closePool } from '#lib/db/pool';
import { asTenant, loginAs } from '#test/security/tenant';
import { withAdminClient, withOwnerClient } from '#test/support/db';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';
import { TcpProxy } from '#test/support/tcp-proxy';

afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('qes');
  await withOwnerClient(schema, (c) =>
    c.query(`
      CREATE TABLE "${schema}".authors (id serial PRIMARY KEY, name varchar(80) NOT NULL, born date);
      CREATE TABLE "${schema}".books (
        id bigint PRIMARY KEY, title text NOT NULL DEFAULT 'untitled',
        author_id int CONSTRAINT books_author_fk REFERENCES "${schema}".authors (id),
        published timestamp, price numeric(8,2), data bytea);
      INSERT INTO "${schema}".authors (name, born) VALUES ('Ann "the" Writer', '1970-05-01'), ('Bob, Jr.', NULL);
      INSERT INTO "${schema}".books VALUES
        (1, E'Line one\\nline two', 1, '2020-01-02 03:04:05', 12.5, '\\xdeadbeef'),
        (2, 'Plain', 2, NULL, NULL, NULL);
      CREATE TABLE "${schema}".empty (id int PRIMARY KEY);`),
  );
});

const sql = (text: string, inSchema = schema) =>
  call(query, { method: 'POST', path: '/api/query', body: { sql: text, schema: inSchema } });

/** runQuery's input for the admin's own rights in public. */
const asAdmin = {
  schema: 'public',
  asKey: false,
  adminRights: true,
  limits: { maxRows: 10_000, maxBytes: 3_000_000 },
};

describe('POST /api/query', () => {
  it.each([
    ['a statement that fails', 'SELECT 1/0'],
    ['a script whose second statement fails', 'SELECT 1; SELECT 1/0'],
    ['a key violation', "INSERT INTO authors (id, name) VALUES (1, 'again')"],
  ])('keeps its session after %s: rolled back, not thrown away', async (_, failing) => {
    const pid = async () => (await sql('SELECT pg_backend_pid() AS pid')).body.rows[0].pid as number;
    const before = await pid();
    for (let i = 0; i < 3; i++) expect((await sql(failing)).status).toBe(400);
    expect(await pid()).toBe(before);
  });

  it('answers rows, fields, rowCount and an integer duration, with the schema on the search path', async () => {
    const reply = await sql('SELECT id, name FROM authors ORDER BY id');

    expect(reply.status).toBe(200);
    expect(reply.body.rows).toEqual([
      { id: 1, name: 'Ann "the" Writer' },
      { id: 2, name: 'Bob, Jr.' },
    ]);
    expect(reply.body.fields).toEqual([
      { name: 'id', dataTypeID: 23 },
      { name: 'name', dataTypeID: 1043 },
    ]);
    expect(reply.body.rowCount).toBe(2);
    expect(Number.isInteger(reply.body.duration)).toBe(true);
  });

  it('runs a script in one transaction and describes the last result', async () => {
    const reply = await sql(
      'CREATE TEMP TABLE scratch (a int); INSERT INTO scratch VALUES (1), (2); SELECT count(*) AS n FROM scratch',
    );

    // count(*) is a bigint: its digits, as every bigint (README: Values in JSON).
    expect(reply.body.rows).toEqual([{ n: '2' }]);
  });

  it.each([
    ['a trailing semicolon', 'SELECT 7 AS n;', [{ n: 7 }]],
    ['a trailing line comment', 'SELECT 7 AS n -- the answer', [{ n: 7 }]],
    ['a statement without rows', 'CREATE TEMP TABLE t_no_rows (a int)', []],
    ['blank lines and comments around it', '\n/* lead */\nSELECT 7 AS n\n\n', [{ n: 7 }]],
  ])('answers SQL with %s', async (_, text, expected) => {
    const reply = await sql(text);

    expect(reply.status).toBe(200);
    expect(reply.body.rows).toEqual(expected);
  });

  it('rolls the whole script back when a statement fails', async () => {
    const reply = await sql('CREATE TABLE half_done (a int); SELECT nope FROM half_done');

    expect(reply.status).toBe(400);
    const exists = await withAdminClient((c) =>
      c.query('SELECT to_regclass($1) AS t', [`"${schema}".half_done`]),
    );
    expect(exists.rows[0].t).toBeNull();
  });

  /** Our BEGIN and COMMIT travel with the script, in one string: what the script commits, or not. */
  describe('around a script', () => {
    let scratch: string;
    beforeAll(async () => {
      scratch = await freshSchema('qes');
    });

    it('keeps what a script committed itself, and describes its last result', async () => {
      const reply = await sql(
        'CREATE TABLE self_committed (a int); INSERT INTO self_committed VALUES (1); COMMIT',
        scratch,
      );

      expect(reply.status).toBe(200);
      expect(reply.body.rows).toEqual([]);
      const kept = await withAdminClient((c) => c.query(`SELECT a FROM "${scratch}".self_committed`));
      expect(kept.rows).toEqual([{ a: 1 }]);
    });

    it.each([
      ['rows', 'SELECT pg_catalog.generate_series(1, 10001)'],
      ['bytes', "SELECT pg_catalog.repeat('x', 3100000)"],
    ])('commits nothing of a script whose answer is over the %s limit (413)', async (_, over) => {
      await withOwnerClient(scratch, (c) => c.query(`CREATE TABLE IF NOT EXISTS "${scratch}".kept (a int)`));
      for (let i = 0; i < 5; i++) {
        const reply = await sql(`INSERT INTO kept VALUES (${i}); ${over}`, scratch);
        expect(reply.status).toBe(413);
      }

      const kept = await withAdminClient((c) => c.query(`SELECT count(*)::int AS n FROM "${scratch}".kept`));
      expect(kept.rows[0].n).toBe(0);
    });

    it('rolls the script back when our COMMIT fails (a deferred constraint)', async () => {
      const reply = await sql(
        `
        CREATE TABLE deferred_parent (id int PRIMARY KEY);
        CREATE TABLE deferred_child (parent int REFERENCES deferred_parent DEFERRABLE INITIALLY DEFERRED);
        INSERT INTO deferred_child VALUES (1)`,
        scratch,
      );

      expect(reply.status).toBe(400);
      const exists = await withAdminClient((c) =>
        c.query('SELECT to_regclass($1) AS t', [`"${scratch}".deferred_parent`]),
      );
      expect(exists.rows[0].t).toBeNull();
    });

    it.each([
      ['a quote', "CREATE TABLE left_open (a int); SELECT '"],
      ['a quoted name', 'CREATE TABLE left_open (a int); SELECT "'],
      ['a block comment', 'CREATE TABLE left_open (a int); SELECT 1 /*'],
      ['a dollar quote', 'CREATE TABLE left_open (a int); SELECT $q$'],
    ])('runs nothing of a script that leaves %s open', async (_, text) => {
      const reply = await sql(text, scratch);

      expect(reply.status).toBe(400);
      const exists = await withAdminClient((c) =>
        c.query('SELECT to_regclass($1) AS t', [`"${scratch}".left_open`]),
      );
      expect(exists.rows[0].t).toBeNull();
    });
  });

  it('answers a SQL error with 400, the database message and the position', async () => {
    const reply = await sql('SELECT * FROM authors WHERE idd = 1');

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'Unknown column',
      message: 'column "idd" does not exist',
      position: 29,
    });
  });

  it('counts a syntax error’s position in characters of the SQL as sent, whatever runs before it', async () => {
    const reply = await sql("SELECT 'é✓'; SELEC 2");

    expect(reply.status).toBe(400);
    expect(reply.body).toMatchObject({ error: 'Invalid SQL', position: 14 });
  });

  it('answers a missing table inside SQL with 400, not 404', async () => {
    const reply = await sql('SELECT 1 FROM ghosts');

    expect(reply.status).toBe(400);
    expect(reply.body.message).toBe('relation "ghosts" does not exist');
  });

  it('keeps the search path to this request only', async () => {
    await sql("SET search_path TO pg_catalog; SELECT set_config('statement_timeout', '1', false)");

    const reply = await sql(
      'SELECT current_setting($$search_path$$) AS path, current_setting($$statement_timeout$$) AS timeout',
      'public',
    );

    expect(reply.body.rows[0].path).toBe('public');
    expect(reply.body.rows[0].timeout).not.toBe('1ms');
  });

  it('releases what the SQL took for its session: advisory locks, roles, temporary tables', async () => {
    await sql('SELECT pg_advisory_lock(424242); CREATE TEMP TABLE mine (a int); SET ROLE pg_monitor');

    const locks = await withAdminClient((c) =>
      c.query(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = 424242`),
    );
    const temps = await withAdminClient((c) =>
      c.query(`SELECT count(*)::int AS n FROM pg_class WHERE relname = 'mine' AND relpersistence = 't'`),
    );
    expect(locks.rows[0].n).toBe(0);
    expect(temps.rows[0].n).toBe(0);
  });

  it('cancels at the statement timeout, in PostgreSQL, and the connection serves the next query', async () => {
    const access = await adminAccess('public');
    const started = Date.now();

    await expect(
      runQuery(access, { ...asAdmin, sql: 'SELECT pg_sleep(5)', timeoutMs: 200 }),
    ).rejects.toMatchObject({ status: 400, title: 'Query timeout' });

    expect(Date.now() - started).toBeLessThan(3000);
    const after = await runQuery(access, { ...asAdmin, sql: 'SELECT 41 + 1 AS n', timeoutMs: 1000 });
    expect(after.rows).toEqual([{ n: 42 }]);
  });

  it('cancels the running statement when the request is aborted', async () => {
    const abort = new AbortController();
    const started = Date.now();
    const running = runQuery(await schemaAccess(undefined, schema, abort.signal), {
      ...asAdmin,
      schema,
      adminRights: false,
      sql: 'SELECT pg_sleep(4.321)',
      timeoutMs: 10_000,
    });
    const sleepers = (c: { query: (sql: string) => Promise<{ rows: { n: number }[] }> }) =>
      c
        .query(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE '%pg_sleep(4.321)%' AND state = 'active' AND pid <> pg_backend_pid()`,
        )
        .then((r) => r.rows[0]?.n ?? 0);

    // Abort once the statement is really running in PostgreSQL (bounded: each try is a round trip).
    await withAdminClient(async (c) => {
      for (let tries = 0; tries < 5000 && (await sleepers(c)) === 0; tries++);
    });
    abort.abort();

    await expect(running).rejects.toMatchObject({ status: 400, title: 'Query timeout' });
    expect(Date.now() - started).toBeLessThan(4000);
    expect(await withAdminClient(sleepers)).toBe(0);
  });

  it('refuses an empty statement with 400', async () => {
    const reply = await sql('');

    expect(reply.status).toBe(400);
    expect(reply.body.message).toBe('sql must not be empty');
  });
});

/** The admin's SQL without `schema`: run in the one schema it names (lib/admin/query-schema). */
describe('POST /api/query without schema, for the admin', () => {
  const unplaced = (text: string, extra: Record<string, unknown> = {}) =>
    call(query, { method: 'POST', path: '/api/query', body: { sql: text, ...extra } });

  it('answers the schema it ran in, the one sent', async () => {
    const reply = await sql('SELECT 1 AS one');

    expect(reply.body).toMatchObject({ rows: [{ one: 1 }], schema });
  });

  it("runs a statement about one schema's tables as that schema's role: adds a foreign key", async () => {
    const shop = await freshSchema('qsh');
    const made = await unplaced(
      `CREATE TABLE ${shop}.people (id int PRIMARY KEY); CREATE TABLE ${shop}.orders (id int PRIMARY KEY, person_id int)`,
    );
    expect(made.status).toBe(200);

    const reply = await unplaced(
      `ALTER TABLE ${shop}.orders ADD CONSTRAINT orders_person_fk FOREIGN KEY (person_id) REFERENCES ${shop}.people (id)`,
    );

    expect(reply.status).toBe(200);
    expect(reply.body.schema).toBe(shop);
    const constraints = await withAdminClient((c) =>
      c.query('SELECT conname FROM pg_constraint WHERE conrelid = to_regclass($1)', [`"${shop}".orders`]),
    );
    expect(constraints.rows.map((r) => r.conname).sort()).toEqual(['orders_person_fk', 'orders_pkey']);
  });

  it('runs a script that names one schema with it first on the search path, as its role', async () => {
    const scripted = await freshSchema('qsc');

    const reply = await unplaced(
      `CREATE TABLE "${scripted}".made (a int); INSERT INTO made VALUES (1), (2);
       SELECT session_user AS who, current_setting('search_path') AS path, count(*)::int AS n FROM made`,
    );

    expect(reply.status).toBe(200);
    expect(reply.body.rows).toEqual([{ who: `${scripted}_exec`, path: scripted, n: 2 }]);
    expect(reply.body.schema).toBe(scripted);
  });

  it('runs SQL that names no schema in public', async () => {
    const reply = await unplaced("SELECT current_setting('search_path') AS path");

    expect(reply.body).toMatchObject({ rows: [{ path: 'public' }], schema: 'public' });
  });

  it('answers 400 for SQL that names two schemas, naming them', async () => {
    const reply = await unplaced(`SELECT * FROM "${schema}".authors, public.nothing_here`);

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'Several schemas',
      message: `the SQL names the schemas "public", "${schema}"; send "schema" to run it in one of them as that schema's role, or "runAs": "admin" to run it with the admin's rights`,
    });
  });

  it('keeps to the schema sent, whatever the SQL names', async () => {
    const elsewhere = await freshSchema('qse');

    const reply = await sql(`SELECT * FROM "${schema}".authors`, elsewhere);

    expect(reply.status).toBe(403);
    expect(reply.body.message).toBe(`permission denied for schema ${schema}`);
  });

  it('answers a syntax error as PostgreSQL does, with its position, as with a schema', async () => {
    const text = `SELECT * FROM "${schema}".authors WHERE`;

    const without = await unplaced(text);

    expect(without.status).toBe(400);
    expect(without.body).toEqual((await sql(text)).body);
    expect(without.body.position).toBe(text.length + 1);
  });

  it('runs runAs admin without schema in public, unread', async () => {
    // The admin's own rights reach a tenant's table only where the tenant shared it.
    await withOwnerClient(schema, (c) =>
      c.query(`GRANT USAGE ON SCHEMA "${schema}" TO PUBLIC; GRANT SELECT ON "${schema}".authors TO PUBLIC`),
    );
    const reply = await unplaced(
      `SELECT current_setting('search_path') AS path, count(*)::int AS n FROM "${schema}".authors`,
      { runAs: 'admin' },
    );

    expect(reply.body).toMatchObject({ rows: [{ path: 'public', n: 2 }], schema: 'public' });
  });
});

describe('GET /api/table/:tableName/export', () => {
  const exportTable = (table: string, extra: Record<string, string> = {}) =>
    call(tables, { path: `/api/table/${table}/export`, query: { schema, ...extra } });

  it('exports JSON as {table, count, data} in key order', async () => {
    const reply = await exportTable('books');

    expect(reply.status).toBe(200);
    expect(reply.body.table).toBe('books');
    expect(reply.body.count).toBe(2);
    expect(reply.body.data[0]).toEqual({
      id: '1',
      title: 'Line one\nline two',
      author_id: 1,
      published: '2020-01-02 03:04:05',
      price: '12.50',
      data: '\\xdeadbeef',
    });
  });

  it('exports CSV with a header, RFC 4180 quoting and a download name', async () => {
    const reply = await exportTable('authors', { format: 'csv' });

    expect(reply.status).toBe(200);
    expect(reply.headers['content-type']).toBe('text/csv; charset=utf-8');
    expect(reply.headers['content-disposition']).toBe('attachment; filename="authors.csv"');
    expect(reply.text).toBe('id,name,born\n1,"Ann ""the"" Writer",1970-05-01\n2,"Bob, Jr.",\n');
  });

  it('keeps line breaks inside quoted CSV fields', async () => {
    const reply = await exportTable('books', { format: 'csv', limit: '1' });

    expect(reply.text).toBe(
      'id,title,author_id,published,price,data\n1,"Line one\nline two",1,2020-01-02 03:04:05,12.50,\\xdeadbeef\n',
    );
  });

  it('answers 404 when there is nothing to export, in either format', async () => {
    expect((await exportTable('empty')).status).toBe(404);
    expect((await exportTable('empty', { format: 'csv' })).body.error).toBe('No data to export');
  });

  it.each([
    [{ format: 'xml' }, /format must be json or csv/],
    [{ limit: '10001' }, /limit must be between 1 and 10000/],
    [{ limit: '0' }, /limit must be between 1 and 10000/],
  ])('refuses %o with 400', async (extra, message) => {
    const reply = await exportTable('books', extra);

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
  });
});

describe('GET /api/schema', () => {
  it('says which columns PostgreSQL fills in itself: identity (always, by default) and generated', async () => {
    const own = await freshSchema('gen');
    await withAdminClient((c) =>
      c.query(`CREATE TABLE "${own}".gadgets (
                 id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                 serial_no integer GENERATED BY DEFAULT AS IDENTITY,
                 price numeric NOT NULL DEFAULT 1,
                 total numeric GENERATED ALWAYS AS (price * 2) STORED)`),
    );
    const reply = await call(tables, { path: '/api/schema', query: { schema: own } });

    expect(reply.status).toBe(200);
    const columns = reply.body.schema[0].columns.map(
      ({ name, identity, generated, defaultValue }: Record<string, unknown>) => ({
        name,
        identity,
        generated,
        defaultValue,
      }),
    );
    expect(columns).toEqual([
      { name: 'id', identity: 'always', generated: false, defaultValue: null },
      { name: 'serial_no', identity: 'by default', generated: false, defaultValue: null },
      { name: 'price', identity: null, generated: false, defaultValue: '1' },
      { name: 'total', identity: null, generated: true, defaultValue: null },
    ]);
  });

  it('still describes a schema where PostgreSQL cannot print a default (a row constant gone stale)', async () => {
    const own = await freshSchema('stale');
    await withAdminClient((c) =>
      c.query(`CREATE TABLE "${own}".pairs (x integer, y integer);
               CREATE TABLE "${own}".uses (id integer PRIMARY KEY, label text DEFAULT ('(1,2)'::"${own}".pairs)::text,
                                           note text DEFAULT 'kept');
               ALTER TABLE "${own}".pairs ALTER COLUMN y TYPE text`),
    );
    const reply = await call(tables, { path: '/api/schema', query: { schema: own } });

    expect(reply.status).toBe(200);
    const uses = reply.body.schema.find((e: { table: string }) => e.table === 'uses');
    expect(
      uses.columns.map((c: { name: string; defaultValue: unknown }) => [c.name, c.defaultValue]),
    ).toEqual([
      ['id', null],
      ['label', null],
      ['note', "'kept'::text"],
    ]);
  });

  it('describes tables, columns with PostgreSQL type names, and foreign keys by constraint name', async () => {
    const reply = await call(tables, { path: '/api/schema', query: { schema } });

    expect(reply.status).toBe(200);
    const books = reply.body.schema.find((e: { table: string }) => e.table === 'books');
    expect(reply.body.schema.map((e: { table: string }) => e.table)).toEqual(['authors', 'books', 'empty']);
    expect(books.columns).toEqual([
      {
        name: 'id',
        type: 'bigint',
        maxLength: null,
        nullable: false,
        defaultValue: null,
        identity: null,
        generated: false,
        primaryKey: true,
        comment: null,
      },
      {
        name: 'title',
        type: 'text',
        maxLength: null,
        nullable: false,
        defaultValue: "'untitled'::text",
        identity: null,
        generated: false,
        primaryKey: false,
        comment: null,
      },
      {
        name: 'author_id',
        type: 'integer',
        maxLength: null,
        nullable: true,
        defaultValue: null,
        identity: null,
        generated: false,
        primaryKey: false,
        comment: null,
      },
      {
        name: 'published',
        type: 'timestamp without time zone',
        maxLength: null,
        nullable: true,
        defaultValue: null,
        identity: null,
        generated: false,
        primaryKey: false,
        comment: null,
      },
      {
        name: 'price',
        type: 'numeric',
        maxLength: null,
        nullable: true,
        defaultValue: null,
        identity: null,
        generated: false,
        primaryKey: false,
        comment: null,
      },
      {
        name: 'data',
        type: 'bytea',
        maxLength: null,
        nullable: true,
        defaultValue: null,
        identity: null,
        generated: false,
        primaryKey: false,
        comment: null,
      },
    ]);
    expect(books.foreignKeys).toEqual([
      {
        column: 'author_id',
        referencedTable: 'authors',
        referencedColumn: 'id',
        constraintName: 'books_author_fk',
        referencedSchema: schema,
      },
    ]);
    const authors = reply.body.schema.find((e: { table: string }) => e.table === 'authors');
    expect(authors.columns[1]).toMatchObject({ name: 'name', type: 'character varying', maxLength: 80 });
    expect(authors.columns[0].defaultValue).toMatch(/^nextval\(/);
  });

  it('gives a generated column no default, as information_schema does, and a default its expression', async () => {
    const generated = await freshSchema('gen');
    await withAdminClient((c) =>
      c.query(`CREATE TABLE "${generated}".prices (
                 net numeric DEFAULT 1.5 * 2, gross numeric GENERATED ALWAYS AS (net * 1.2) STORED,
                 at timestamptz DEFAULT pg_catalog.now())`),
    );

    const reply = await call(tables, { path: '/api/schema', query: { schema: generated } });

    expect(reply.body.schema[0].columns.map((c: { defaultValue: string | null }) => c.defaultValue)).toEqual([
      '(1.5 * (2)::numeric)',
      null,
      'now()',
    ]);
  });

  it('adds indexes, unique and check constraints, comments, size and row estimate to each table', async () => {
    const rich = await freshSchema('rich');
    await withAdminClient((c) =>
      c.query(`
        CREATE TABLE "${rich}".things (
          id int PRIMARY KEY, code text CONSTRAINT things_code_key UNIQUE,
          qty int CONSTRAINT things_qty_positive CHECK (qty > 0), label text);
        CREATE INDEX things_lower ON "${rich}".things USING btree (lower(label), qty);
        CREATE INDEX things_code_hash ON "${rich}".things USING hash (code);
        COMMENT ON TABLE "${rich}".things IS 'what we have';
        COMMENT ON COLUMN "${rich}".things.qty IS 'how many';
        INSERT INTO "${rich}".things SELECT n, 'c' || n, n, 'x' FROM generate_series(1, 50) AS n;
        ANALYZE "${rich}".things;
        CREATE TABLE "${rich}".never (id int);`),
    );

    const reply = await call(tables, { path: '/api/schema', query: { schema: rich } });

    expect(reply.status).toBe(200);
    const [never, things] = reply.body.schema;
    expect(things.comment).toBe('what we have');
    expect(things.columns.map((c: { comment: string | null }) => c.comment)).toEqual([
      null,
      null,
      'how many',
      null,
    ]);
    expect(things.estimatedRows).toBe(50);
    expect(things.sizeBytes).toBeGreaterThan(0);
    expect(things.indexes).toEqual([
      {
        name: 'things_code_hash',
        columns: ['code'],
        unique: false,
        primary: false,
        method: 'hash',
        valid: true,
        sizeBytes: expect.any(Number),
      },
      {
        name: 'things_code_key',
        columns: ['code'],
        unique: true,
        primary: false,
        method: 'btree',
        valid: true,
        sizeBytes: expect.any(Number),
      },
      {
        name: 'things_lower',
        columns: [null, 'qty'],
        unique: false,
        primary: false,
        method: 'btree',
        valid: true,
        sizeBytes: expect.any(Number),
      },
      {
        name: 'things_pkey',
        columns: ['id'],
        unique: true,
        primary: true,
        method: 'btree',
        valid: true,
        sizeBytes: expect.any(Number),
      },
    ]);
    expect(things.constraints).toEqual([
      { name: 'things_code_key', type: 'unique', columns: ['code'] },
      { name: 'things_qty_positive', type: 'check', columns: ['qty'] },
    ]);
    expect(never).toMatchObject({
      table: 'never',
      comment: null,
      sizeBytes: 0,
      estimatedRows: null,
      indexes: [],
      constraints: [],
    });
  });

  it('names the referenced schema of a foreign key to another schema’s table', async () => {
    const target = await freshSchema('fktarget');
    const source = await freshSchema('fksource');
    await withAdminClient((c) =>
      c.query(`
        CREATE TABLE "${target}".owners (id int PRIMARY KEY);
        CREATE TABLE "${source}".pets (
          id int PRIMARY KEY, owner_id int CONSTRAINT pets_owner_fk REFERENCES "${target}".owners (id));`),
    );

    const reply = await call(tables, { path: '/api/schema', query: { schema: source } });

    expect(reply.body.schema[0].foreignKeys).toEqual([
      {
        column: 'owner_id',
        referencedTable: 'owners',
        referencedColumn: 'id',
        constraintName: 'pets_owner_fk',
        referencedSchema: target,
      },
    ]);
  });

  it('answers promptly, with every new field, while a tenant holds a table in ACCESS EXCLUSIVE', async () => {
    const locked = await freshSchema('lockedstruct');
    await asTenant(
      locked,
      `CREATE TABLE "${locked}".held (id int PRIMARY KEY, n int CHECK (n > 0));
       CREATE INDEX held_expr ON "${locked}".held ((n + 1));
       COMMENT ON TABLE "${locked}".held IS 'held';`,
    );
    const holder = loginAs(`${locked}_user`, 'schema-pass-1');
    await holder.connect();
    await holder.query(`BEGIN; LOCK TABLE "${locked}".held IN ACCESS EXCLUSIVE MODE`);
    try {
      const started = Date.now();
      const reply = await call(tables, { path: '/api/schema', query: { schema: locked } });

      expect(reply.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(2000);
      expect(reply.body.schema[0]).toMatchObject({
        table: 'held',
        comment: 'held',
        indexes: [
          expect.objectContaining({ name: 'held_expr', columns: [null] }),
          expect.objectContaining({ name: 'held_pkey' }),
        ],
        constraints: [{ name: 'held_n_check', type: 'check', columns: ['n'] }],
      });
    } finally {
      await holder.end();
    }
  });

  it('answers 404 for a schema that does not exist and 400 for an invalid name', async () => {
    expect((await call(tables, { path: '/api/schema', query: { schema: 'nope_nope' } })).status).toBe(404);
    const invalid = await call(tables, { path: '/api/schema', query: { schema: 'x;y' } });
    expect(invalid.status).toBe(400);
    expect(invalid.body.error).toBe('Invalid schema name');
  });
});

describe('runQuery on a slow network', () => {
  const database = new URL(process.env.DATABASE_URL as string);
  // Each message of the server's reply arrives apart: pg rejects on the error, before the
  // ReadyForQuery after it says what became of the transaction.
  const proxy = new TcpProxy(database.hostname, Number(database.port || 5432), true);
  beforeAll(() => proxy.up());
  afterAll(() => proxy.down());

  it.each([
    ['a statement', 'SELECT 1/0'],
    ['a script’s last statement', 'SELECT 1; SELECT 1/0'],
  ])('rolls its transaction back when %s fails', async (_, failing) => {
    const url = new URL(database);
    url.host = `127.0.0.1:${proxy.port}`;
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    try {
      const slow: SchemaAccess = {
        ...(await adminAccess('public')),
        run: (work) => work(client as pg.PoolClient),
      };

      await expect(runQuery(slow, { ...asAdmin, sql: failing, timeoutMs: 5000 })).rejects.toMatchObject({
        status: 400,
      });

      // Everything the server sent has arrived: the session is out of any transaction, ready for
      // the next request (withSession throws away one left inside).
      await client.query('SELECT 1').catch(() => undefined);
      expect(client.getTransactionStatus()).toBe('I');
    } finally {
      await client.end();
    }
  });
});
