import { brotliDecompressSync } from 'node:zlib';
import { handler as schemas } from '#functions/schemas';
import { handler as tenants } from '#functions/tenants';
import { BUNDLES, bundleClock, bundleParts } from '#lib/admin/bundle';
import { PART_BYTES, sign } from '#lib/admin/bundle-format';
import { closePool } from '#lib/db/pool';
import { asTenant } from '#test/security/tenant';
import { backUp, commit, putPart, sendRestore } from '#test/support/bundles';
import { schemaExists, withAdminClient } from '#test/support/db';
import { call, type Reply } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { changingSettings } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

afterAll(closePool);
afterEach(() => {
  bundleParts.bytes = PART_BYTES;
  bundleClock.now = () => Date.now();
});

/** A tenant with one of most things a bundle carries, and rows that test COPY's text form. */
async function tenant(): Promise<string> {
  const schema = await freshSchema('bk');
  await asTenant(
    schema,
    `CREATE TYPE mood AS ENUM ('calm', 'loud');
     CREATE FUNCTION shout(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT upper(t) $$;
     CREATE TABLE people (
       id serial PRIMARY KEY,
       name text NOT NULL,
       mood mood DEFAULT 'calm',
       loud text GENERATED ALWAYS AS (shout(name)) STORED,
       tags text[],
       photo bytea,
       born timestamptz
     );
     CREATE TABLE notes (
       id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
       person_id int NOT NULL REFERENCES people (id) ON DELETE CASCADE,
       body text
     );
     CREATE TABLE log (at text);
     CREATE FUNCTION logged() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN INSERT INTO log VALUES (TG_OP || ' ' || TG_TABLE_NAME); RETURN NULL; END $$;
     CREATE TRIGGER logged AFTER INSERT OR DELETE OR TRUNCATE ON notes FOR EACH STATEMENT EXECUTE FUNCTION logged();
     CREATE VIEW loud_people AS SELECT id, loud FROM people;
     -- Needs people's key before its rows come (name is grouped by it); notes' key comes after them.
     CREATE VIEW notes_per_person AS
       SELECT p.id, p.name, count(n.id) AS n FROM people p LEFT JOIN notes n ON n.person_id = p.id GROUP BY p.id;
     CREATE MATERIALIZED VIEW note_counts AS SELECT person_id, count(*) AS n FROM notes GROUP BY person_id;
     INSERT INTO people (name, mood, tags, photo, born) VALUES
       ('ada', 'loud', '{a,"b c",NULL}', '\\x00ff10', '2001-02-03 04:05:06.789012+00'),
       (E'tab\\there\\nnew line \\\\ back', NULL, NULL, NULL, NULL),
       ('ünïcødé ✓ 𝄞', 'calm', '{}', '', 'infinity');
     INSERT INTO notes (person_id, body) SELECT 1 + (i % 3), repeat('x', i) FROM generate_series(1, 40) i;
     REFRESH MATERIALIZED VIEW note_counts;`,
  );
  return schema;
}

const post = (path: string, body: unknown, query?: Record<string, string>) =>
  call(schemas, { method: 'POST', path, body, query, headers: { 'content-type': 'application/json' } });

/** Every table's rows, as text, in a stable order. */
const contents = (schema: string) =>
  withAdminClient(async (c) => {
    const out: Record<string, unknown[]> = {};
    for (const table of ['people', 'notes', 'log', 'note_counts']) {
      const { rows } = await c.query(`SELECT t::text AS row FROM "${schema}".${table} t ORDER BY t::text`);
      out[table] = rows.map((r) => r.row);
    }
    return out;
  });

describe('a tenant backup restored into a new schema', () => {
  it('makes the same structure and rows, under the new name, as its own role', async () => {
    const source = await tenant();
    bundleParts.bytes = 200; // many parts, the compressed stream cut anywhere, a long row across several
    // Materialized views are refreshed on restore: the source's is refreshed too, to compare.
    await asTenant(
      source,
      `INSERT INTO notes (person_id, body) VALUES (3, repeat('é𝄞', 400)); REFRESH MATERIALIZED VIEW note_counts`,
    );
    const { manifest, parts, made } = await backUp(source);
    expect(made).toMatchObject({ schema: source, state: 'ready', tables: 3, rows: 3 + 41 + 2 });
    expect(parts.length).toBeGreaterThan(5);
    expect(parts.slice(0, -1).every((part) => part.length === 200)).toBe(true);
    const copy = uniqueName('rs');
    const id = await sendRestore(copy, 'new', manifest, parts);
    const done = await commit(copy, id, 'restore-pass-1');
    expect(done.status).toBe(200);
    expect(done.body).toEqual({ schema: copy, mode: 'new', from: source, tables: 3, rows: 46 });
    expect(await contents(copy)).toEqual(await contents(source));
    const drift = await call(tenants, { path: `/api/drift/${copy}`, query: { against: source } });
    expect(drift.body).toMatchObject({ same: true });
    await withAdminClient(async (c) => {
      const { rows } = await c.query(
        `SELECT nspowner::regrole::text AS owner FROM pg_namespace WHERE nspname = $1`,
        [copy],
      );
      expect(rows[0].owner).toBe(`${copy}_owner`);
      // Sequences and identities go on from the source's values.
      const next = await c.query(`SELECT nextval('"${copy}".people_id_seq') AS n`);
      expect(Number(next.rows[0].n)).toBe(4);
    });
    // Sent again once done: the same answer.
    expect((await commit(copy, id, 'restore-pass-1')).body).toEqual(done.body);
  });

  it('holds the stream compressed: its structure first, keys made after the rows unless a view needs one', async () => {
    const source = await tenant();
    const { manifest, parts } = await backUp(source);
    const stream = brotliDecompressSync(Buffer.concat(parts));
    expect(stream.length).toBe(manifest.bytes);
    expect(Buffer.concat(parts).length).toBeLessThan(stream.length);
    const { ddl } = JSON.parse(stream.subarray(0, manifest.header).toString('utf8'));
    const people = ddl.before.find((sql: string) => sql.startsWith('CREATE TABLE people'));
    expect(people).toContain('CONSTRAINT people_pkey PRIMARY KEY (id)');
    expect(ddl.before.join('\n')).not.toContain('notes_pkey');
    const keyAt = ddl.after.indexOf('ALTER TABLE notes ADD CONSTRAINT notes_pkey PRIMARY KEY (id)');
    const foreignKeyAt = ddl.after.findIndex((sql: string) => sql.includes('FOREIGN KEY'));
    expect(keyAt).toBeGreaterThanOrEqual(0);
    expect(keyAt).toBeLessThan(foreignKeyAt);
  });

  it('names the copy’s own objects in reg* columns, which travel as text', async () => {
    const source = await freshSchema('bkreg');
    await asTenant(
      source,
      `CREATE TABLE items (id int PRIMARY KEY);
       CREATE TABLE refs (id int PRIMARY KEY, target regclass, kinds regtype[]);
       INSERT INTO refs VALUES (1, 'items', '{items,int4}')`,
    );
    const { manifest, parts } = await backUp(source);
    const copy = uniqueName('rs');
    const id = await sendRestore(copy, 'new', manifest, parts);
    expect((await commit(copy, id, 'restore-pass-1')).status).toBe(200);

    const { rows } = await withAdminClient((c) =>
      c.query(
        `SELECT target = $1::regclass AS own, kinds[1] = $2::regtype AS "ownType" FROM "${copy}".refs`,
        [`"${copy}".items`, `"${copy}".items`],
      ),
    );
    expect(rows).toEqual([{ own: true, ownType: true }]);
  });

  it('refuses a bundle made on a later PostgreSQL major than the server’s', async () => {
    const source = await freshSchema('bkmajor');
    const { manifest } = await backUp(source);
    const { mac: _, ...unsigned } = manifest;
    const later = sign(process.env.DBADMIN_SECRET as string, { ...unsigned, postgres: 990_000 });

    const opened = await post('/api/restores', { schema: uniqueName('rs'), mode: 'new', manifest: later });

    expect([opened.status, opened.body.error]).toEqual([409, 'Bundle from a later PostgreSQL']);
    expect(opened.body.message).toMatch(/made on PostgreSQL 99; this server runs 1[0-9]/);
  });

  it('keeps tables of no columns, or of generated columns alone, with their rows', async () => {
    const source = await freshSchema('bkbare');
    await asTenant(
      source,
      `CREATE TABLE bare (); INSERT INTO bare DEFAULT VALUES; INSERT INTO bare DEFAULT VALUES;
       CREATE TABLE made (one int GENERATED ALWAYS AS (1) STORED); INSERT INTO made DEFAULT VALUES`,
    );
    const { manifest, parts } = await backUp(source);
    const copy = uniqueName('rs');
    const id = await sendRestore(copy, 'new', manifest, parts);

    const done = await commit(copy, id, 'restore-pass-1');

    expect([done.status, done.body.rows]).toEqual([200, 3]);
    const { rows } = await withAdminClient((c) =>
      c.query(
        `SELECT (SELECT count(*)::int FROM "${copy}".bare) AS bare, (SELECT sum(one)::int FROM "${copy}".made) AS made`,
      ),
    );
    expect(rows).toEqual([{ bare: 2, made: 1 }]);
  });

  it('refuses a new schema that exists, and a commit with parts missing', async () => {
    const source = await tenant();
    const { manifest, parts } = await backUp(source);
    const exists = await post('/api/restores', { schema: source, mode: 'new', manifest });
    expect(exists.status).toBe(409);
    const copy = uniqueName('rs');
    const opened = await post('/api/restores', { schema: copy, mode: 'new', manifest });
    const id = opened.body.id as string;
    const missing = await commit(copy, id, 'restore-pass-1');
    expect(missing.status).toBe(409);
    expect(missing.body.message).toMatch(/lacks parts 1/);
    for (const [i, part] of parts.entries()) await putPart(copy, id, i + 1, part);
    const noPassword = await commit(copy, id);
    expect([noPassword.status, noPassword.body.message]).toEqual([400, expect.stringMatching(/password/)]);
    expect(await schemaExists(copy)).toBe(false);
  });
});

describe('a tenant larger than a result may be', () => {
  const { set, restore } = changingSettings();
  afterEach(restore);

  it('is backed up and restored whole: its rows stream on, never held', async () => {
    const schema = await freshSchema('bkbig');
    await asTenant(
      schema,
      `CREATE TABLE blobs (id int PRIMARY KEY, body text);
       INSERT INTO blobs SELECT i, repeat(md5(i::text), 40) FROM generate_series(1, 2000) i`,
    );
    set({ QUERY_MAX_BYTES: '1000' }); // its sessions' wire limit: about 1 MiB; the rows are 2.6 MB
    const { manifest, parts } = await backUp(schema);
    expect(manifest.rows).toBe(2000);
    const copy = uniqueName('rs');
    const id = await sendRestore(copy, 'new', manifest, parts);
    expect((await commit(copy, id, 'restore-pass-1')).body).toMatchObject({ rows: 2000 });
    const cloned = await post('/api/schema/create', {
      schemaName: uniqueName('cl'),
      password: 'clone-pass-1',
      template: schema,
      withData: true,
    });
    expect([cloned.status, cloned.body.clone?.rows]).toEqual([201, 2000]);
  });
});

describe('a tenant whose code names its own schema', () => {
  it('is backed up, and restores as a new schema only under its own name', async () => {
    const schema = await freshSchema('bkself');
    await asTenant(
      schema,
      `CREATE TABLE items (id int); CREATE FUNCTION n() RETURNS bigint LANGUAGE sql AS $$ SELECT count(*) FROM ${schema}.items $$`,
    );
    const { manifest, parts } = await backUp(schema);
    expect(manifest.selfNamed).toEqual([`function n() names schema ${schema} in its body`]);
    const elsewhere = await post('/api/restores', { schema: uniqueName('rs'), mode: 'new', manifest });
    expect([elsewhere.status, elsewhere.body.error]).toEqual([409, 'Bundle names its schema']);
    const deleted = await call(schemas, {
      method: 'DELETE',
      path: `/api/schema/${schema}`,
      query: { cascade: 'true' },
    });
    expect(deleted.status).toBe(200);
    const id = await sendRestore(schema, 'new', manifest, parts);
    expect((await commit(schema, id, 'restore-pass-1')).status).toBe(200);
    const counted = await withAdminClient((c) => c.query(`SELECT "${schema}".n() AS n`));
    expect(Number(counted.rows[0].n)).toBe(0);
  });
});

describe('a tenant backup restored over its schema', () => {
  it('puts back the rows as they were, without firing the tenant’s triggers', async () => {
    const schema = await tenant();
    const before = await contents(schema);
    const { manifest, parts } = await backUp(schema);
    await asTenant(
      schema,
      `DELETE FROM notes WHERE id < 10; INSERT INTO people (name) VALUES ('later');
       UPDATE people SET name = 'changed' WHERE id = 1; ALTER TABLE notes DISABLE TRIGGER logged`,
    );
    // The trigger's state is structure: enabled again, the schema is shaped as the bundle's.
    await asTenant(schema, 'ALTER TABLE notes ENABLE TRIGGER logged');
    const log = (await contents(schema)).log;
    const id = await sendRestore(schema, 'replace', manifest, parts);
    const done = await commit(schema, id);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ schema, mode: 'replace', rows: 3 + 40 + 1 });
    const after = await contents(schema);
    expect(after).toEqual(before);
    expect(log).not.toEqual(before.log);
    await withAdminClient(async (c) => {
      const { rows } = await c.query(
        `SELECT t.tgenabled, (SELECT count(*)::int FROM pg_constraint k WHERE k.conrelid = t.tgrelid AND k.contype = 'f') AS fks
           FROM pg_trigger t WHERE t.tgname = 'logged' AND t.tgrelid = $1::regclass`,
        [`"${schema}".notes`],
      );
      expect(rows[0]).toEqual({ tgenabled: 'O', fks: 1 });
      const next = await c.query(`SELECT nextval('"${schema}".people_id_seq') AS n`);
      expect(Number(next.rows[0].n)).toBe(4);
    });
  });

  it('refuses a schema whose structure changed since, and changes nothing', async () => {
    const schema = await tenant();
    const { manifest, parts } = await backUp(schema);
    const id = await sendRestore(schema, 'replace', manifest, parts);
    await asTenant(schema, 'ALTER TABLE people ADD COLUMN extra int; DELETE FROM notes');
    const refused = await commit(schema, id);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe('Structure differs');
    expect((await contents(schema)).notes).toEqual([]);
    const again = await post('/api/restores', { schema, mode: 'replace', manifest });
    expect(again.status).toBe(409);
  });
});

describe('what a restore keeps and refuses', () => {
  it('carries grants to the schema’s own roles, under the new schema’s names', async () => {
    const source = await freshSchema('bkgrant');
    await asTenant(
      source,
      `CREATE TABLE items (id int); GRANT SELECT, INSERT ON items TO "${source}_user" WITH GRANT OPTION`,
    );
    const { manifest, parts } = await backUp(source);
    const copy = uniqueName('rs');
    const id = await sendRestore(copy, 'new', manifest, parts);
    expect((await commit(copy, id, 'restore-pass-1')).status).toBe(200);
    const grants = await withAdminClient(
      async (c) =>
        (
          await c.query(
            `SELECT grantee, privilege_type, is_grantable FROM information_schema.role_table_grants
              WHERE table_schema = $1 AND table_name = 'items' AND grantee = $2 ORDER BY privilege_type`,
            [copy, `${copy}_user`],
          )
        ).rows,
    );
    expect(grants).toEqual([
      { grantee: `${copy}_user`, privilege_type: 'INSERT', is_grantable: 'YES' },
      { grantee: `${copy}_user`, privilege_type: 'SELECT', is_grantable: 'YES' },
    ]);
  });

  it('replaces a schema whose view has an INSTEAD OF trigger', async () => {
    const schema = await freshSchema('bkview');
    await asTenant(
      schema,
      `CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items VALUES (1, 'a');
       CREATE VIEW named AS SELECT id, name FROM items;
       CREATE FUNCTION put() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO items VALUES (NEW.id, NEW.name); RETURN NEW; END $$;
       CREATE TRIGGER put INSTEAD OF INSERT ON named FOR EACH ROW EXECUTE FUNCTION put()`,
    );
    const { manifest, parts } = await backUp(schema);
    await asTenant(schema, `DELETE FROM items`);
    const id = await sendRestore(schema, 'replace', manifest, parts);
    expect((await commit(schema, id)).body).toMatchObject({ rows: 1 });
  });

  it('keeps four restores open into one schema at most, and abandons one with its parts', async () => {
    const schema = await freshSchema('bkopen');
    await asTenant(schema, 'CREATE TABLE items (id int)');
    const { manifest } = await backUp(schema);
    const open = () => post('/api/restores', { schema, mode: 'replace', manifest });
    const opened = [await open(), await open(), await open(), await open()];
    const fifth = await open();
    expect(opened.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect([fifth.status, fifth.body.error]).toEqual([409, 'Too many restores']);
    const first = opened[0]?.body.id as string;
    const abandoned = await call(schemas, {
      method: 'DELETE',
      path: `/api/restores/${first}`,
      query: { schema },
    });
    expect(abandoned.status).toBe(200);
    expect((await call(schemas, { path: `/api/restores/${first}`, query: { schema } })).status).toBe(404);
    expect((await open()).status).toBe(201);
  });
});

describe('parts sent side by side', () => {
  /** Runs `work` while another transaction holds the restore's row as `lock` says. */
  const whileHeld = (id: string, lock: string, work: () => Promise<Reply>) =>
    withAdminClient(async (c) => {
      await c.query('BEGIN');
      await c.query(`SELECT 1 FROM ${BUNDLES} WHERE id = $1 ${lock}`, [id]);
      try {
        return await work();
      } finally {
        await c.query('ROLLBACK');
      }
    });

  it('are taken at once, but none while a commit runs, and no commit while one comes', async () => {
    const source = await tenant();
    bundleParts.bytes = 200;
    const { manifest, parts } = await backUp(source);
    const copy = uniqueName('rs');
    const id = (await post('/api/restores', { schema: copy, mode: 'new', manifest })).body.id as string;
    const last = parts.length;

    const sent = await Promise.all(parts.slice(0, -1).map((part, i) => putPart(copy, id, i + 1, part)));
    const duringCommit = await whileHeld(id, 'FOR UPDATE', () =>
      putPart(copy, id, last, parts[last - 1] as Buffer),
    );
    const duringPart = await whileHeld(id, 'FOR KEY SHARE', () => commit(copy, id, 'restore-pass-1'));

    expect(sent.map((reply) => reply.status)).toEqual(parts.slice(0, -1).map(() => 200));
    expect([duringCommit.status, duringCommit.body.error]).toEqual([409, 'Restore busy']);
    expect([duringPart.status, duringPart.body.error]).toEqual([409, 'Restore busy']);
    expect((await putPart(copy, id, last, parts[last - 1] as Buffer)).status).toBe(200);
    expect((await commit(copy, id, 'restore-pass-1')).status).toBe(200);
    expect(await contents(copy)).toEqual(await contents(source));
  });
});

describe('a restore kept open', () => {
  it('lives on while parts come, its expiry moved at most once a minute', async () => {
    const source = await tenant();
    bundleParts.bytes = 200;
    const { manifest, parts } = await backUp(source);
    const copy = uniqueName('rs');
    const id = (await post('/api/restores', { schema: copy, mode: 'new', manifest })).body.id as string;
    const expiresAt = async () =>
      (await call(schemas, { path: `/api/restores/${id}`, query: { schema: copy } })).body
        .expiresAt as string;
    const opened = await expiresAt();

    bundleClock.now = () => Date.now() + 30_000;
    await putPart(copy, id, 1, parts[0] as Buffer);
    const soon = await expiresAt();
    // Near its end, a part moves it on by the whole time again.
    bundleClock.now = () => Date.parse(opened) - 10_000;
    await putPart(copy, id, 2, parts[1] as Buffer);
    const later = await expiresAt();

    expect(soon).toBe(opened);
    expect(Date.parse(later) - Date.parse(opened)).toBeGreaterThan(3000 * 1000);
  });
});

describe('backups kept', () => {
  it('lists, expires and deletes them', async () => {
    const schema = await tenant();
    const { id } = await backUp(schema);
    const list = await call(schemas, { path: '/api/backups', query: { schema } });
    expect(list.body.map((b: { id: string }) => b.id)).toEqual([id]);
    const gone = await call(schemas, { method: 'DELETE', path: `/api/backups/${id}`, query: { schema } });
    expect(gone.status).toBe(200);
    expect((await call(schemas, { path: `/api/backups/${id}`, query: { schema } })).status).toBe(404);
    const { id: later, manifest } = await backUp(schema);
    const past = await call(schemas, {
      path: `/api/backups/${later}/parts/${manifest.parts.length + 1}`,
      query: { schema },
    });
    expect([past.status, past.body.error]).toEqual([404, 'No such part']);
    bundleClock.now = () => Date.now() + 2 * 3600 * 1000;
    expect((await call(schemas, { path: `/api/backups/${later}/parts/1`, query: { schema } })).status).toBe(
      404,
    );
  });

  it('keeps at most four of one schema', async () => {
    const schema = await tenant();
    for (let i = 0; i < 4; i++) await backUp(schema);
    const fifth = await post('/api/backups', undefined, { schema });
    expect(fifth.status).toBe(409);
    expect(fifth.body.error).toBe('Too many backups');
  });

  it('counts none of an earlier schema of the name, dropped behind the service, against the four', async () => {
    const schema = await freshSchema('bkcap');
    for (let i = 0; i < 4; i++) await backUp(schema);
    await withAdminClient((c) => c.query(`DROP SCHEMA "${schema}" CASCADE; CREATE SCHEMA "${schema}"`));

    const again = await post('/api/backups', undefined, { schema });

    expect([again.status, again.body.message]).toEqual([201, undefined]);
  });
});
