import { createHash } from 'node:crypto';
import { brotliCompressSync, brotliDecompressSync } from 'node:zlib';
import { handler as schemas } from '#functions/schemas';
import { closePool } from '#lib/db/pool';
import {
  asTenant,
  bearer,
  createKey,
  expectTenantRightsOnly,
  sightings,
  tenantSchema,
} from '#test/security/tenant';
import { backUp, commit, openRestore, putPart } from '#test/support/bundles';
import { schemaExists, withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { person } from '#test/support/people';
import { freshSchema } from '#test/support/tables';

/**
 * A bundle is a tenant's whole schema, structure and rows: another tenant must never read it, and
 * restoring one must never run what its tenant planted with the admin's rights. A bundle is also
 * a file a licensee can edit (decompress, edit, compress): a restore refuses any part or manifest that is
 * not the one the service signed, rather than run DDL someone wrote into it.
 */

afterAll(closePool);

/** A tenant whose code names nothing but its own objects, unqualified: its bundle restores under any name. */
async function plainTenant(prefix: string): Promise<string> {
  const schema = await freshSchema(prefix);
  await asTenant(
    schema,
    `CREATE TABLE items (id serial PRIMARY KEY, name text); INSERT INTO items (name) VALUES ('first')`,
  );
  return schema;
}

/** Records who runs it in `canary` of whichever schema it runs in (its name is unqualified). */
const SPY = `INSERT INTO canary VALUES (session_user, has_schema_privilege('_dbadmin', 'USAGE'))`;

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

describe('a tenant’s bundle is its own', () => {
  it('is out of reach of another tenant’s key, even by its id', async () => {
    const victim = await tenantSchema('bkvictim');
    const thief = await tenantSchema('bkthief');
    const { id } = await backUp(victim);
    const key = (await createKey(thief, 'service_role')).key as string;

    const named = await call(schemas, {
      path: `/api/backups/${id}`,
      query: { schema: victim },
      ...bearer(key),
    });
    const byId = await call(schemas, { path: `/api/backups/${id}`, ...bearer(key) });
    const part = await call(schemas, { path: `/api/backups/${id}/parts/1`, ...bearer(key) });
    const list = await call(schemas, { path: '/api/backups', ...bearer(key) });
    const gone = await call(schemas, { method: 'DELETE', path: `/api/backups/${id}`, ...bearer(key) });

    expect(named.status).toBe(403);
    expect([byId.status, part.status, gone.status]).toEqual([404, 404, 404]);
    expect(list.body).toEqual([]);
    expect((await call(schemas, { path: `/api/backups/${id}`, query: { schema: victim } })).status).toBe(200);
  });

  it('is out of reach of an anon key of its own schema, and of a person scoped elsewhere', async () => {
    const schema = await tenantSchema('bkscope');
    const other = await tenantSchema('bkother');
    const { id } = await backUp(schema);
    const anon = (await createKey(schema, 'anon')).key as string;
    const scoped = await person('admin', [other]);

    const byAnon = await call(schemas, {
      path: `/api/backups/${id}/parts/1`,
      query: { schema },
      ...bearer(anon),
    });
    const byPerson = await scoped.as(schemas, { path: `/api/backups/${id}/parts/1`, query: { schema } });
    const restoreByPerson = await scoped.as(schemas, {
      method: 'POST',
      path: '/api/restores',
      body: { schema: uniqueName('rs'), mode: 'new', manifest: {} },
    });

    expect([byAnon.status, byPerson.status, restoreByPerson.status]).toEqual([403, 403, 403]);
  });

  it('restores into a new schema only for whoever may create schemas: never a key', async () => {
    const schema = await tenantSchema('bkkey');
    const { manifest } = await backUp(schema);
    const key = (await createKey(schema, 'service_role')).key as string;

    const opened = await call(schemas, {
      method: 'POST',
      path: '/api/restores',
      body: { schema, mode: 'new', manifest },
      ...bearer(key),
    });

    expect(opened.status).toBe(403);
  });
});

describe('a tenant’s backups go with its schema', () => {
  it('are never the next tenant’s of the same name, deleted through the API or dropped behind it', async () => {
    const schema = await plainTenant('bkreuse');
    const { id } = await backUp(schema);
    const deleted = await call(schemas, {
      method: 'DELETE',
      path: `/api/schema/${schema}`,
      query: { cascade: 'true' },
    });
    expect(deleted.status).toBe(200);
    const made = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: schema, password: 'next-tenant-1' },
    });
    expect(made.status).toBe(201);
    const { id: second } = await backUp(schema);
    // Dropped by SQL, behind the service's back, and made again: another schema, by its oid.
    await withAdminClient((c) => c.query(`DROP SCHEMA "${schema}" CASCADE; CREATE SCHEMA "${schema}"`));

    const list = await call(schemas, { path: '/api/backups', query: { schema } });
    const first = await call(schemas, { path: `/api/backups/${id}/parts/1`, query: { schema } });
    const later = await call(schemas, { path: `/api/backups/${second}/parts/1`, query: { schema } });

    expect(list.body).toEqual([]);
    expect([first.status, later.status]).toEqual([404, 404]);
  });
});

describe('a bundle edited by hand', () => {
  it('is refused part by part, and its manifest with the checksum written again too', async () => {
    const schema = await plainTenant('bkedit');
    const { manifest, parts } = await backUp(schema);
    const copy = uniqueName('rs');
    // The whole stream decompressed, edited, and compressed again as one part.
    const text = brotliDecompressSync(Buffer.concat(parts)).toString('utf8');
    const edited = brotliCompressSync(text.replace('CREATE TABLE', 'CREATE UNLOGGED TABLE'));
    expect(brotliDecompressSync(edited).toString('utf8')).not.toBe(text);

    const opened = await openRestore(copy, 'new', manifest);
    const sent = await putPart(copy, opened.body.id, 1, edited);
    const rehashed = {
      ...manifest,
      parts: [{ bytes: edited.length, sha256: sha256(edited) }],
    };
    const reopened = await openRestore(copy, 'new', rehashed);
    const resigned = await openRestore(copy, 'new', { ...rehashed, mac: 'ab'.repeat(32) });
    const unsigned = await openRestore(copy, 'new', { ...manifest, mac: undefined });

    expect([sent.status, sent.body.error]).toEqual([400, 'Bundle refused']);
    for (const reply of [reopened, resigned, unsigned]) {
      expect([reply.status, reply.body.error]).toEqual([400, 'Bundle refused']);
    }
    expect(await schemaExists(copy)).toBe(false);
  });

  it('cannot be moved to another DBADMIN_SECRET’s service as it is, nor its tables swapped', async () => {
    const schema = await tenantSchema('bkswap');
    const { manifest } = await backUp(schema);
    const swapped = { ...manifest, tables: [...manifest.tables].reverse(), schema: 'someone_else' };

    const reply = await openRestore(uniqueName('rs'), 'new', swapped);

    expect([reply.status, reply.body.error]).toEqual([400, 'Bundle refused']);
  });
});

describe('restoring never runs a tenant’s code with the admin’s rights', () => {
  it('checks, defaults and materialized views run as the restored schema’s role, in a new schema and over one', async () => {
    const schema = await freshSchema('bkplant');
    await asTenant(
      schema,
      `CREATE TABLE canary (who text, internal boolean);
       CREATE FUNCTION spy() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN ${SPY}; RETURN true; END $$;
       -- A materialized view is filled under a safe search path (PostgreSQL 17): this one names its own.
       CREATE FUNCTION spy_text() RETURNS text LANGUAGE plpgsql SET search_path = ${schema}
         AS $$ BEGIN ${SPY}; RETURN 'x'; END $$;
       CREATE TABLE items (id int PRIMARY KEY, note text DEFAULT spy_text(), CHECK (spy()));
       INSERT INTO items VALUES (1, 'a'), (2, 'b');
       CREATE MATERIALIZED VIEW seen AS SELECT spy_text() AS x;
       DELETE FROM canary;`,
    );
    const { manifest, parts } = await backUp(schema);

    const copy = uniqueName('rs');
    const fresh = await openRestore(copy, 'new', manifest);
    for (const [i, part] of parts.entries()) await putPart(copy, fresh.body.id, i + 1, part);
    const restored = await commit(copy, fresh.body.id, 'restore-pass-1');
    expect(restored.body).toMatchObject({ rows: 2 });
    const seenNew = await sightings(copy);
    expectTenantRightsOnly(seenNew);
    expect(new Set(seenNew.map((s) => s.who))).toEqual(new Set([`${copy}_exec`]));

    const over = await openRestore(schema, 'replace', manifest);
    for (const [i, part] of parts.entries()) await putPart(schema, over.body.id, i + 1, part);
    const replaced = await commit(schema, over.body.id);
    expect(replaced.status).toBe(200);
    const seenOver = await sightings(schema);
    expectTenantRightsOnly(seenOver);
    expect(new Set(seenOver.map((s) => s.who))).toEqual(new Set([`${schema}_exec`]));
  });

  it('a replace never deletes rows a forced policy hid from the backup', async () => {
    const schema = await freshSchema('bkforce');
    await asTenant(
      schema,
      `CREATE TABLE notes (id int PRIMARY KEY, secret boolean NOT NULL);
       INSERT INTO notes VALUES (1, false), (2, true);
       ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
       CREATE POLICY open_only ON notes USING (NOT secret);
       ALTER TABLE notes FORCE ROW LEVEL SECURITY`,
    );
    const { manifest, parts } = await backUp(schema);
    expect(manifest.rows).toBe(1);

    const opened = await openRestore(schema, 'replace', manifest);
    // Lifted after the open, forced again before the commit: refused there too.
    await asTenant(schema, 'ALTER TABLE notes NO FORCE ROW LEVEL SECURITY');
    const later = await openRestore(schema, 'replace', manifest);
    for (const [i, part] of parts.entries()) await putPart(schema, later.body.id, i + 1, part);
    await asTenant(schema, 'ALTER TABLE notes FORCE ROW LEVEL SECURITY');
    const committed = await commit(schema, later.body.id);

    expect([opened.status, opened.body.error]).toEqual([409, 'Forced row-level security']);
    expect([committed.status, committed.body.error]).toEqual([409, 'Forced row-level security']);
    const ids = await withAdminClient(
      async (c) => (await c.query(`SELECT id FROM "${schema}".notes ORDER BY id`)).rows,
    );
    expect(ids).toEqual([{ id: 1 }, { id: 2 }]);
  });

  it('a tenant’s lock bounds a replace, which then changes nothing', async () => {
    const schema = await tenantSchema('bklock');
    const { manifest, parts } = await backUp(schema);
    const opened = await openRestore(schema, 'replace', manifest);
    for (const [i, part] of parts.entries()) await putPart(schema, opened.body.id, i + 1, part);
    await asTenant(schema, `INSERT INTO "${schema}".items (name) VALUES ('after')`);

    const reply = await withAdminClient(async (holder) => {
      await holder.query(`BEGIN; LOCK TABLE "${schema}".items IN ACCESS SHARE MODE`);
      try {
        return await commit(schema, opened.body.id);
      } finally {
        await holder.query('ROLLBACK');
      }
    });

    expect(reply.status).toBe(409);
    const names = await withAdminClient(
      async (c) => (await c.query(`SELECT name FROM "${schema}".items ORDER BY id`)).rows,
    );
    expect(names.map((r) => r.name)).toContain('after');
  });
});
