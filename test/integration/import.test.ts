import pg from 'pg';
import { handler as imports } from '#functions/imports';
import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { importClock } from '#lib/admin/import-sessions';
import { closePool } from '#lib/db/pool';
import { bearer, createKey } from '#test/security/tenant';
import { directUrl, withAdminClient } from '#test/support/db';
import { call, httpEvent, lambdaContext, type Reply } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { withSetting } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

/**
 * Importing files through the real handlers into a real PostgreSQL: CSV with its options, JSON
 * arrays and NDJSON, insert/upsert/replace, all or nothing with the failing line named, and
 * imports in parts (out of order, sent twice, missing, too large, abandoned, expired).
 */
afterAll(closePool);

let schema: string;
beforeAll(async () => {
  schema = await freshSchema('imp');
});

async function sql<T = Record<string, unknown>>(text: string): Promise<T[]> {
  const reply = await call(query, { method: 'POST', path: '/api/query', body: { schema, sql: text } });
  if (reply.status !== 200) throw new Error(reply.text);
  return reply.body.rows as T[];
}

/** `people (id int primary key, name text, age int, tags text[], meta jsonb, born date)`. */
async function people(): Promise<string> {
  const table = uniqueName('people');
  await sql(
    `CREATE TABLE ${table} (id int PRIMARY KEY, name text, age int, tags text[], meta jsonb, born date)`,
  );
  return table;
}

const send = (table: string, body: string, contentType: string, query: Record<string, string> = {}) =>
  call(imports, {
    method: 'POST',
    path: `/api/table/${table}/import`,
    query: { schema, ...query },
    headers: { 'content-type': contentType },
    body,
  });

const all = (table: string) => sql(`SELECT * FROM ${table} ORDER BY id`);
const count = async (table: string) =>
  Number((await sql<{ n: string }>(`SELECT count(*) AS n FROM ${table}`))[0]?.n);

describe('POST /api/table/:tableName/import: CSV', () => {
  it('maps the header to columns (any case, any order), reads quotes, NULLs, arrays and jsonb', async () => {
    const table = await people();
    const csv = [
      '\ufeffNAME,Id,tags,meta,born',
      '"Smith, Ann",1,"{a,""b c""}","{""k"": [1]}",2001-02-03',
      'Bo,2,,,',
      '"line\nbreak",3,{},null,1999-12-31',
    ].join('\r\n');

    const reply = await send(table, csv, 'text/csv; charset=utf-8');

    expect(reply.status).toBe(200);
    expect(reply.body).toEqual({
      success: true,
      rows: 3,
      mode: 'insert',
      message: `3 rows imported into "${table}"`,
    });
    expect(await all(table)).toEqual([
      { id: 1, name: 'Smith, Ann', age: null, tags: ['a', 'b c'], meta: '{"k": [1]}', born: '2001-02-03' },
      { id: 2, name: 'Bo', age: null, tags: null, meta: null, born: null },
      // JSON's null, not SQL's NULL: the value's JSON text.
      { id: 3, name: 'line\nbreak', age: null, tags: [], meta: 'null', born: '1999-12-31' },
    ]);
  });

  it('takes a delimiter, a quote, a null string, no header and the columns named', async () => {
    const table = await people();

    const reply = await send(table, "1;'a;b';NA\n2;NA;40\n", 'text/csv', {
      delimiter: ';',
      quote: "'",
      null: 'NA',
      header: 'false',
      columns: 'id,name,age',
    });

    expect(reply.status).toBe(200);
    expect((await all(table)).map((r) => [r.id, r.name, r.age])).toEqual([
      [1, 'a;b', null],
      [2, null, 40],
    ]);
  });

  it('a bad value on the last line of a large file is a 400 naming the line and column; nothing is written', async () => {
    const table = await people();
    const lines = ['id,name,age'];
    for (let i = 1; i <= 50_000; i++) lines.push(`${i},person ${i},${i % 90}`);
    lines.push('50001,late,old');

    const reply = await send(table, `${lines.join('\n')}\n`, 'text/csv');

    expect(reply.status).toBe(400);
    expect(reply.body).toEqual({
      error: 'Import failed',
      message: 'line 50002, column age: invalid input syntax for type integer: "old"; nothing was imported',
    });
    expect(await count(table)).toBe(0);
  });

  it.each([
    [
      'a header column the table lacks',
      'id,nmae\n1,x\n',
      {},
      /the header’s column "nmae" is not a column of/,
    ],
    ['a column named twice', 'id,id\n1,1\n', {}, /names "id" twice/],
    ['an empty file', '', {}, /the file holds nothing to import/],
    ['a bad delimiter', 'id\n1\n', { delimiter: ';;' }, /delimiter must be one single-byte character/],
    ['too many fields', 'id,name\n1,a,extra\n', {}, /line 2: extra data after last expected column/],
  ])('%s is a 400 that says what to fix', async (_what, csv, query, message) => {
    const table = await people();

    const reply = await send(table, csv, 'text/csv', query as Record<string, string>);

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(message);
    expect(await count(table)).toBe(0);
  });

  it('refuses a generated column in the file, and a body of another type or over 5 MiB', async () => {
    const table = uniqueName('gen');
    await sql(`CREATE TABLE ${table} (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text)`);

    const generated = await send(table, 'id,name\n1,a\n', 'text/csv');
    const plain = await send(table, 'name\na\n', 'text/plain');
    const big = await send(table, `name\n${'x'.repeat(6 * 1024 * 1024)}\n`, 'text/csv');
    const fine = await send(table, 'name\na\n', 'text/csv');

    expect(generated.status).toBe(400);
    expect(generated.body.message).toMatch(
      /column "id" of ".*" is GENERATED ALWAYS: leave it out of the file/,
    );
    expect(plain.status).toBe(415);
    expect(plain.body.message).toMatch(/send Content-Type: text\/csv, or application\/json/);
    expect(big.status).toBe(413);
    expect(big.body.message).toMatch(/at most 5242880 bytes: send a larger file in parts/);
    expect(fine.status).toBe(200);
    expect(await sql(`SELECT id, name FROM ${table}`)).toEqual([{ id: 1, name: 'a' }]);
  });
});

describe('POST /api/table/:tableName/import: JSON and NDJSON', () => {
  it('imports a JSON array: arrays to array columns, objects to jsonb, a missing key NULL', async () => {
    const table = await people();
    const rows = [
      { id: 1, name: 'a "q"', tags: ['x', 'y z'], meta: { deep: [1, { k: 'v' }] }, born: '2020-01-02' },
      { id: 2, age: 30 },
    ];

    const reply = await send(table, JSON.stringify(rows), 'application/json');

    expect(reply.status).toBe(200);
    expect(await all(table)).toEqual([
      {
        id: 1,
        name: 'a "q"',
        age: null,
        tags: ['x', 'y z'],
        meta: '{"deep": [1, {"k": "v"}]}',
        born: '2020-01-02',
      },
      { id: 2, name: null, age: 30, tags: null, meta: null, born: null },
    ]);
  });

  it('takes a key as new table from a file names its column (`Full Name` is full_name)', async () => {
    const table = uniqueName('named');
    await sql(`CREATE TABLE ${table} (id int PRIMARY KEY, full_name text)`);

    const reply = await send(table, JSON.stringify([{ id: 1, 'Full Name': 'Ann' }]), 'application/json');

    expect(reply.status).toBe(200);
    expect(await sql(`SELECT * FROM ${table}`)).toEqual([{ id: 1, full_name: 'Ann' }]);
  });

  it('names the row (and the NDJSON line) of a bad value, and of a key the columns lack', async () => {
    const table = await people();

    const badValue = await send(table, '{"id":1,"age":2}\n\n{"id":2,"age":"x"}\n', 'application/x-ndjson');
    const badKey = await send(table, JSON.stringify([{ id: 1 }, { id: 2, nmae: 'x' }]), 'application/json');

    expect(badValue.status).toBe(400);
    expect(badValue.body.message).toBe(
      'row 2 (line 3), column age: invalid input syntax for type integer: "x"; nothing was imported',
    );
    expect(badKey.status).toBe(400);
    expect(badKey.status).toBe(400);
    expect(badKey.body.message).toMatch(/the key "nmae" is not a column of/);
    expect(await count(table)).toBe(0);
  });
});

describe('what the review found', () => {
  it('refuses a CSV line that is . alone (COPY would end there and drop the rest), naming it', async () => {
    const table = await people();

    const reply = await send(table, 'id,name\n1,a\n\\.\n2,b\n3,"\\."\n', 'text/csv');
    const quoted = await send(table, 'id,name\n1,"a\n\\.\nb"\n2,"\\."\n', 'text/csv');

    expect(reply.status).toBe(400);
    expect(reply.body.message).toMatch(/^line 3 is \\\. alone, which COPY reads as the end of the data/);
    expect(quoted.status).toBe(200);
    expect((await all(table)).map((r) => r.name)).toEqual(['a\n\\.\nb', '\\.']);
  });

  it('keeps a 64-bit id and a long number exact, and takes columns named like Object’s own properties', async () => {
    const table = uniqueName('odd');
    await sql(
      `CREATE TABLE ${table} (id bigint PRIMARY KEY, amount numeric, "constructor" text, "__proto__" text)`,
    );

    const reply = await send(
      table,
      '[{"id": 9007199254740993, "amount": 1.00000000000000000001, "constructor": "x"}, {"id": 2}]',
      'application/json',
    );

    expect(reply.status).toBe(200);
    expect(
      await sql(`SELECT id::text, amount::text, "constructor", "__proto__" FROM ${table} ORDER BY id`),
    ).toEqual([
      // A computed key: in a literal, __proto__: would set the prototype rather than a property.
      { id: '2', amount: null, constructor: null, ['__proto__']: null },
      { id: '9007199254740993', amount: '1.00000000000000000001', constructor: 'x', ['__proto__']: null },
    ]);
  });

  it('names the row of a bad value after rows holding line breaks, and the COPY line when a trigger refuses', async () => {
    const table = await people();
    await sql(`CREATE FUNCTION ${table}_no() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN IF NEW.id = 8 THEN RAISE EXCEPTION 'no %', NEW.id; END IF; RETURN NEW; END $$;
               CREATE TRIGGER no BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_no();`);

    const json = await send(
      table,
      JSON.stringify([{ id: 1 }, { id: 2, name: 'a\nb\nc' }, { id: 3 }, { id: 'bad' }]),
      'application/json',
    );
    const csv = await send(
      table,
      `id\n${Array.from({ length: 9 }, (_, i) => i + 1).join('\n')}\n`,
      'text/csv',
    );

    expect(json.body.message).toMatch(/^row 4, column id: invalid input syntax for type integer/);
    expect(csv.status).toBe(400);
    expect(csv.body.message).toBe('line 9: no 8; nothing was imported');
  });
});

describe('modes', () => {
  it('upsert updates the rows whose key is in the file and adds the others; replace starts from nothing', async () => {
    const table = await people();
    await sql(`INSERT INTO ${table} (id, name, age) VALUES (1, 'old', 10), (2, 'kept', 20)`);

    const upsert = await send(table, 'id,name\n1,new\n3,added\n', 'text/csv', { mode: 'upsert' });
    const afterUpsert = (await all(table)).map((r) => [r.id, r.name, r.age]);
    const replace = await send(table, 'id,name\n9,only\n', 'text/csv', { mode: 'replace' });

    expect(upsert.body).toMatchObject({ rows: 2, mode: 'upsert' });
    expect(afterUpsert).toEqual([
      [1, 'new', 10],
      [2, 'kept', 20],
      [3, 'added', null],
    ]);
    expect(replace.body).toMatchObject({ rows: 1, mode: 'replace' });
    expect((await all(table)).map((r) => r.id)).toEqual([9]);
  });

  it('upsert needs a primary key, and its columns in the file; a failed replace keeps the old rows', async () => {
    const keyless = uniqueName('keyless');
    await sql(`CREATE TABLE ${keyless} (name text)`);
    const table = await people();
    await sql(`INSERT INTO ${table} (id, name) VALUES (1, 'stays')`);

    const noKey = await send(keyless, 'name\na\n', 'text/csv', { mode: 'upsert' });
    const keyMissing = await send(table, 'name\na\n', 'text/csv', { mode: 'upsert' });
    const badReplace = await send(table, 'id,age\n2,x\n', 'text/csv', { mode: 'replace' });

    const twice = await send(table, 'id,name\n5,a\n5,b\n', 'text/csv', { mode: 'upsert' });
    expect(twice.body.message).toMatch(/holds a primary key more than once/);
    expect(noKey.body.message).toMatch(/has none: use insert or replace/);
    expect(keyMissing.body.message).toMatch(/the file needs its column\(s\) id/);
    expect(badReplace.status).toBe(400);
    expect(await all(table)).toEqual([expect.objectContaining({ id: 1, name: 'stays' })]);
  });
});

describe('an import in parts', () => {
  const open = (table: string, body: Record<string, unknown> = {}) =>
    call(imports, {
      method: 'POST',
      path: `/api/table/${table}/imports`,
      body: { schema, format: 'csv', ...body },
    });
  const part = (table: string, id: string, n: number, bytes: string, contentType = 'text/csv') =>
    call(imports, {
      method: 'PUT',
      path: `/api/table/${table}/imports/${id}/parts/${n}`,
      query: { schema },
      headers: { 'content-type': contentType },
      body: bytes,
    });
  const commit = (table: string, id: string, parts: number) =>
    call(imports, {
      method: 'POST',
      path: `/api/table/${table}/imports/${id}/commit`,
      body: { schema, parts },
    });
  const status = (table: string, id: string) =>
    call(imports, { path: `/api/table/${table}/imports/${id}`, query: { schema } });

  it('takes parts in any order, a part sent twice once, cut anywhere, and writes them in order at commit', async () => {
    const table = await people();
    const csv = 'id,name\n1,Ann\n2,"B, ob"\n3,Cy\n';
    const opened = await open(table);
    const id = opened.body.id as string;

    expect(opened.status).toBe(201);
    expect(opened.body).toMatchObject({
      table,
      format: 'csv',
      mode: 'insert',
      maxPartBytes: 5 * 1024 * 1024,
    });
    expect((await part(table, id, 3, csv.slice(20))).status).toBe(200);
    expect((await part(table, id, 1, 'id,name\n9,wrong\n')).status).toBe(200);
    expect((await part(table, id, 1, csv.slice(0, 11))).body).toMatchObject({ part: 1, parts: 2 });
    expect((await part(table, id, 2, csv.slice(11, 20), 'application/octet-stream')).body).toMatchObject({
      parts: 3,
    });
    expect(await count(table)).toBe(0);
    expect((await status(table, id)).body).toMatchObject({
      state: 'open',
      parts: [
        { part: 1, bytes: 11 },
        { part: 2, bytes: 9 },
        { part: 3, bytes: csv.length - 20 },
      ],
      totalBytes: csv.length,
    });

    const done = await commit(table, id, 3);
    const again = await commit(table, id, 3);

    expect(done.body).toMatchObject({ success: true, rows: 3 });
    expect(again.body).toEqual(done.body);
    expect((await all(table)).map((r) => r.name)).toEqual(['Ann', 'B, ob', 'Cy']);
    expect((await status(table, id)).body).toMatchObject({
      state: 'committed',
      parts: [],
      outcome: done.body,
    });
    expect((await part(table, id, 4, 'x')).status).toBe(409);
  });

  it('joins a character cut between two parts, and keeps bytes as they were sent', async () => {
    const table = await people();
    const bytes = Buffer.from('id,name\n1,Zoë 𝄞\n', 'utf8');
    const cut = bytes.indexOf(0xf0) + 2; // inside the four bytes of 𝄞
    const id = (await open(table)).body.id as string;
    for (const [n, piece] of [bytes.subarray(0, cut), bytes.subarray(cut)].entries()) {
      // As API Gateway sends a binary body: base64.
      const event = httpEvent({
        method: 'PUT',
        path: `/api/table/${table}/imports/${id}/parts/${n + 1}`,
        query: { schema },
        headers: { 'content-type': 'application/octet-stream' },
        body: piece.toString('base64'),
      });
      const sent = (await imports({ ...event, isBase64Encoded: true }, lambdaContext())) as {
        statusCode: number;
      };
      expect(sent.statusCode).toBe(200);
    }
    expect((await commit(table, id, 2)).body).toMatchObject({ success: true, rows: 1 });
    expect((await all(table)).map((r) => r.name)).toEqual(['Zoë 𝄞']);
  });

  it('a missing part is a 400 naming it and writes nothing; sent, the commit goes through', async () => {
    const table = await people();
    const id = (await open(table, { format: 'ndjson' })).body.id as string;
    await part(table, id, 1, '{"id":1}\n{"id"', 'application/x-ndjson');
    await part(table, id, 3, '{"id":3}\n', 'application/x-ndjson');

    const missing = await commit(table, id, 3);
    const beyond = await commit(table, id, 1);
    await part(table, id, 2, ':2}\n', 'application/x-ndjson');
    const done = await commit(table, id, 3);

    expect(missing.status).toBe(400);
    expect(missing.body.message).toBe('part 2 of 3 was never received: send it, then commit again');
    expect(beyond.body.message).toMatch(/^part 3 was sent, but the commit says 1 parts/);
    expect(done.body).toMatchObject({ rows: 3 });
  });

  it('a bad value in the last part fails the commit with its line, writes nothing, and the part can be sent again', async () => {
    const table = await people();
    const id = (await open(table)).body.id as string;
    await part(table, id, 1, 'id,age\n1,10\n2,');
    await part(table, id, 2, 'twenty\n');

    const failed = await commit(table, id, 2);
    await part(table, id, 2, '20\n');
    const done = await commit(table, id, 2);

    expect(failed.status).toBe(400);
    expect(failed.body.message).toBe(
      'line 3, column age: invalid input syntax for type integer: "twenty"; nothing was imported',
    );
    expect(done.body).toMatchObject({ rows: 2 });
    expect((await all(table)).map((r) => r.age)).toEqual([10, 20]);
  });

  it('refuses a part over 5 MiB, saying to split it', async () => {
    const table = await people();
    const id = (await open(table)).body.id as string;

    const big = await part(table, id, 1, 'x'.repeat(5 * 1024 * 1024 + 1));

    expect(big.status).toBe(413);
    expect(big.body.message).toBe(
      'request body must be at most 5242880 bytes: split the file into more parts',
    );
  });

  describe('with IMPORT_MAX_BYTES at 100', () => {
    withSetting('IMPORT_MAX_BYTES', '100');

    it('holds for all the schema’s imports together, not each one', async () => {
      const table = await people();
      const first = (await open(table)).body.id as string;
      const second = (await open(table)).body.id as string;

      const sent = await part(table, first, 1, 'x'.repeat(60));
      const over = await part(table, second, 1, 'y'.repeat(60));
      const again = await part(table, first, 1, 'x'.repeat(90));

      expect(sent.body).toMatchObject({ totalBytes: 60 });
      expect(over.status).toBe(413);
      expect(over.body.message).toMatch(
        /in all the parts schema ".*"'s imports stage at once \(IMPORT_MAX_BYTES\); this part would make 120/,
      );
      // A part sent again replaces itself: only the others count against it.
      expect(again.body).toMatchObject({ totalBytes: 90 });
      await call(imports, {
        method: 'DELETE',
        path: `/api/table/${table}/imports/${first}`,
        query: { schema },
      });
      await call(imports, {
        method: 'DELETE',
        path: `/api/table/${table}/imports/${second}`,
        query: { schema },
      });
    });
  });

  it('an import left past its expiry is gone, parts and all; abandoned, likewise', async () => {
    const table = await people();
    const stale = (await open(table)).body.id as string;
    await part(table, stale, 1, 'id\n1\n');
    const real = importClock.now;
    try {
      importClock.now = () => real() + 3601 * 1000;
      // Any open sweeps what expired.
      expect((await open(table)).status).toBe(201);
      expect((await part(table, stale, 2, 'x')).status).toBe(404);
      expect((await commit(table, stale, 1)).status).toBe(404);
    } finally {
      importClock.now = real;
    }
    const parts = await withAdminClient(
      async (c) =>
        (await c.query('SELECT count(*)::int AS n FROM _dbadmin.import_parts WHERE session_id = $1', [stale]))
          .rows[0].n,
    );
    expect(parts).toBe(0);

    const abandoned = (await open(table)).body.id as string;
    expect(
      (
        await call(imports, {
          method: 'DELETE',
          path: `/api/table/${table}/imports/${abandoned}`,
          query: { schema },
        })
      ).status,
    ).toBe(200);
    expect((await status(table, abandoned)).status).toBe(404);
  });

  describe('a commit interrupted', () => {
    const abandon = (table: string, id: string) =>
      call(imports, { method: 'DELETE', path: `/api/table/${table}/imports/${id}`, query: { schema } });
    const lockKey = () => Math.floor(Math.random() * 1_000_000_000);
    /** Until a session waits for the advisory lock `key` (a trigger of the table being imported into). */
    const waitingFor = async (key: number) => {
      for (;;) {
        const waiting = await withAdminClient(
          async (c) =>
            (
              await c.query(
                `SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`,
                [key],
              )
            ).rowCount,
        );
        if (waiting) return;
        await new Promise((next) => setTimeout(next, 20));
      }
    };
    /** A connection of the test's holding the advisory lock `key`, so the table's trigger waits. */
    async function holding(key: number) {
      const client = new pg.Client({ connectionString: directUrl() });
      await client.connect();
      await client.query('SELECT pg_advisory_lock($1)', [key]);
      return client;
    }
    /** A trigger on `table` that waits, for each row, until the advisory lock `key` is free. */
    const gate = (table: string, key: number) =>
      sql(
        `CREATE FUNCTION ${table}_gate() RETURNS trigger LANGUAGE plpgsql AS $$
           BEGIN PERFORM pg_advisory_xact_lock(${key}); RETURN NEW; END $$;
         CREATE TRIGGER gate BEFORE INSERT ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_gate()`,
      );

    it('is told apart by its transaction, not a clock: one still running stays committing however long it takes, then writes its rows once', async () => {
      const table = await people();
      const key = lockKey();
      await gate(table, key);
      const id = (await open(table)).body.id as string;
      await part(table, id, 1, 'id,name\n1,Ann\n2,Bo\n');
      const held = await holding(key);

      const committing = commit(table, id, 1);
      await waitingFor(key);
      const real = importClock.now;
      let read: Reply;
      let abandoned: Reply;
      let again: Reply;
      try {
        // Far past the query timeout and 30 s, the old guess at a commit that never reported back.
        importClock.now = () => real() + 10 * 60 * 1000;
        read = await status(table, id);
        abandoned = await abandon(table, id);
        again = await commit(table, id, 1);
      } finally {
        importClock.now = real;
        await held.end();
      }
      const done = await committing;

      expect(read.body).toMatchObject({ state: 'committing' });
      expect(read.body).not.toHaveProperty('message');
      expect([abandoned.status, abandoned.body.error]).toEqual([409, 'Import committing']);
      expect([again.status, again.body.error]).toEqual([409, 'Import committing']);
      expect(done.body).toMatchObject({ success: true, rows: 2 });
      expect(await count(table)).toBe(2);
    });

    it('by its process’s death reads open again once its transaction has ended, parts kept; committed again, its rows are written once', async () => {
      const table = await people();
      const id = (await open(table)).body.id as string;
      await part(table, id, 1, 'id,name\n1,Ann\n');
      await part(table, id, 2, '2,Bo\n');
      // What a commit's process leaves when killed while writing: the import marked committing in
      // the commit's transaction, recorded by its id, and that transaction ending with its session.
      const writing = new pg.Client({ connectionString: directUrl() });
      writing.on('error', () => undefined);
      await writing.connect();
      await writing.query('BEGIN');
      const { xid, pid } = (
        await writing.query('SELECT pg_current_xact_id()::text AS xid, pg_backend_pid() AS pid')
      ).rows[0] as { xid: string; pid: number };
      await withAdminClient((c) =>
        c.query(
          `UPDATE _dbadmin.import_sessions SET state = 'committing', committing_since = now(), commit_xid = $2 WHERE id = $1`,
          [id, xid],
        ),
      );

      const whileWriting = await status(table, id);
      await withAdminClient((c) => c.query('SELECT pg_terminate_backend($1, 10000)', [pid]));
      const after = await status(table, id);
      const done = await commit(table, id, 2);
      const again = await commit(table, id, 2);

      expect(whileWriting.body).toMatchObject({ state: 'committing' });
      expect(after.status).toBe(200);
      expect(after.body).toMatchObject({
        state: 'open',
        parts: [
          { part: 1, bytes: 14 },
          { part: 2, bytes: 5 },
        ],
        message: `the last commit was interrupted (its transaction ${xid} ended without committing): nothing was written, the parts are kept: commit again`,
      });
      expect(done.body).toMatchObject({ success: true, rows: 2 });
      expect(again.body).toEqual(done.body);
      expect(await count(table)).toBe(2);
      const committed = await status(table, id);
      expect(committed.body).toMatchObject({ state: 'committed', parts: [], outcome: done.body });
      expect(committed.body).not.toHaveProperty('message');
    });

    it('by a failure of its own (a bad value) leaves the import open at once, saying nothing of an interruption', async () => {
      const table = await people();
      const id = (await open(table)).body.id as string;
      await part(table, id, 1, 'id,age\n1,old\n');

      const failed = await commit(table, id, 1);
      const read = await status(table, id);

      expect(failed.status).toBe(400);
      expect(read.body).toMatchObject({ state: 'open' });
      expect(read.body).not.toHaveProperty('message');
    });

    it('begun by an earlier version, which recorded no transaction, counts as interrupted past the query timeout and 30 s: abandoned, never committed again', async () => {
      const table = await people();
      const id = (await open(table)).body.id as string;
      await part(table, id, 1, 'id\n1\n');
      const begunEarlier = (ago: string) =>
        withAdminClient((c) =>
          c.query(
            `UPDATE _dbadmin.import_sessions
                SET state = 'committing', committing_since = now() - $2::interval, commit_xid = NULL
              WHERE id = $1`,
            [id, ago],
          ),
        );

      await begunEarlier('1 second');
      const running = await abandon(table, id);
      await begunEarlier('2 hours');
      const interrupted = await commit(table, id, 1);
      const abandoned = await abandon(table, id);

      expect([running.status, running.body.error]).toEqual([409, 'Import committing']);
      expect(interrupted.status).toBe(409);
      expect(interrupted.body.message).toMatch(/recorded no transaction.*may have written its rows/);
      expect(abandoned.status).toBe(200);
      expect(await count(table)).toBe(0);
    });
  });

  it('is its opener’s alone: another key of the schema does not find it; anon keys may not import', async () => {
    const table = await people();
    const mine = await createKey(schema, 'service_role', uniqueName('k'));
    const other = await createKey(schema, 'service_role', uniqueName('k'));
    const anon = await createKey(schema, 'anon', uniqueName('a'));
    const opened = await call(imports, {
      method: 'POST',
      path: `/api/table/${table}/imports`,
      body: { format: 'csv' },
      ...bearer(mine.key),
    });
    const id = opened.body.id as string;

    const byOther = await call(imports, { path: `/api/table/${table}/imports/${id}`, ...bearer(other.key) });
    const byAdmin = await status(table, id);
    const byMine = await call(imports, { path: `/api/table/${table}/imports/${id}`, ...bearer(mine.key) });
    const byAnon = await call(imports, {
      method: 'POST',
      path: `/api/table/${table}/import`,
      headers: { ...bearer(anon.key).headers, 'content-type': 'text/csv' },
      auth: null,
      body: 'id\n1\n',
    });

    expect(opened.status).toBe(201);
    expect([byOther.status, byAdmin.status, byMine.status, byAnon.status]).toEqual([404, 404, 200, 403]);
  });
});

describe('a new table from a file', () => {
  it('suggests columns from the start of a file, makes the table from them, and imports the file into it', async () => {
    const csv = 'id,First Name,joined,Score\n1,Ann,2024-01-02,1.5\n2,Bo,2024-02-03,\n';
    const suggested = await call(imports, {
      method: 'POST',
      path: '/api/import/columns',
      headers: { 'content-type': 'text/csv' },
      body: csv,
    });
    expect(suggested.status).toBe(200);
    const columns = suggested.body.columns as {
      name: string;
      type: string;
      nullable: boolean;
      primaryKey: boolean;
    }[];
    expect(columns.map((c) => `${c.name} ${c.type}${c.primaryKey ? ' key' : ''}`)).toEqual([
      'id INTEGER key',
      'first_name TEXT',
      'joined DATE',
      'score NUMERIC',
    ]);

    const table = uniqueName('fromfile');
    const created = await call(tables, {
      method: 'POST',
      path: '/api/table/create',
      body: {
        schema,
        tableName: table,
        columns: columns.map(({ name, type, nullable, primaryKey }) => ({
          name,
          type,
          nullable,
          primaryKey,
        })),
      },
    });
    const imported = await send(table, csv, 'text/csv');

    expect(created.status).toBe(201);
    expect(imported.body).toMatchObject({ rows: 2 });
    expect(await sql(`SELECT id, first_name, joined, score FROM ${table} ORDER BY id`)).toEqual([
      { id: 1, first_name: 'Ann', joined: '2024-01-02', score: '1.5' },
      { id: 2, first_name: 'Bo', joined: '2024-02-03', score: null },
    ]);
  });
});
