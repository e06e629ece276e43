import pg from 'pg';
import { handler as keys } from '#functions/keys';
import { handler as query } from '#functions/query';
import type { handler as rows } from '#functions/rows';
import { handler as tables } from '#functions/tables';
import { directUrl, withAdminClient } from '#test/support/db';
import { type Call, call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * A hostile tenant: a schema made through the API, the schema's own database login (whose
 * password the admin handed over), and API keys. Attacks plant code that records who ran it.
 */

/** The service's own database role: code a tenant wrote must never run as this role. */
export const serviceRole = () => decodeURIComponent(new URL(directUrl()).username);

/** freshSchema's password for `<schema>_user`. */
const TENANT_PASSWORD = 'schema-pass-1';

export function loginAs(role: string, password: string): pg.Client {
  const url = new URL(directUrl());
  url.username = role;
  url.password = encodeURIComponent(password);
  return new pg.Client({ connectionString: url.toString() });
}

/** Runs SQL as the schema's own database login, as the tenant would from psql. */
export async function asTenant(schema: string, sql: string): Promise<void> {
  const client = loginAs(`${schema}_user`, TENANT_PASSWORD);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export const bearer = (key: string) => ({ auth: null, headers: { authorization: `Bearer ${key}` } });

export const sqlAs = (key: string, sql: string) =>
  call(query, { method: 'POST', path: '/api/query', body: { sql }, ...bearer(key) });

export async function createKey(schema: string, keyType: 'anon' | 'service_role', keyName: string = keyType) {
  const reply = await call(keys, {
    method: 'POST',
    path: `/api/project/${schema}/keys`,
    body: { keyName, keyType },
  });
  if (reply.status !== 201) throw new Error(`key for ${schema}: ${reply.text}`);
  return reply.body as { id: number; key: string };
}

/**
 * SQL that records who runs it, in `<schema>.canary`: the session's login, and whether that
 * role can reach dbadmin's internal schema (the service role can; a tenant's roles cannot).
 */
export const RECORD = (schema: string) =>
  `INSERT INTO "${schema}".canary VALUES (session_user, has_schema_privilege('_dbadmin', 'USAGE'))`;

/** The canary table and a spy function any role may call; owned by the tenant. */
export const plantCanary = (schema: string) => `
  CREATE TABLE "${schema}".canary (who text, internal boolean);
  GRANT USAGE ON SCHEMA "${schema}" TO PUBLIC;
  GRANT INSERT ON "${schema}".canary TO PUBLIC;
  CREATE FUNCTION "${schema}".spy() RETURNS boolean LANGUAGE plpgsql AS $$
  BEGIN ${RECORD(schema)}; RETURN true; END $$;
  CREATE FUNCTION "${schema}".spy_text() RETURNS text LANGUAGE plpgsql AS $$
  BEGIN ${RECORD(schema)}; RETURN 'planted'; END $$;`;

export interface Sighting {
  who: string;
  internal: boolean;
}

/** Who ran the planted code since the last look (and forgets them). */
export const sightings = (schema: string): Promise<Sighting[]> =>
  withAdminClient(
    async (c) => (await c.query(`DELETE FROM "${schema}".canary RETURNING who, internal`)).rows,
  );

/** A tenant schema with a table `items (id serial primary key, name text)` holding one row. */
export async function tenantSchema(prefix: string): Promise<string> {
  const schema = await freshSchema(prefix);
  const created = await call(tables, {
    method: 'POST',
    path: '/api/table/create',
    body: {
      tableName: 'items',
      schema,
      columns: [
        { name: 'id', type: 'SERIAL', primaryKey: true },
        { name: 'name', type: 'TEXT' },
      ],
    },
  });
  if (created.status !== 201) throw new Error(`items in ${schema}: ${created.text}`);
  await asTenant(schema, `INSERT INTO "${schema}".items (name) VALUES ('first'); ${plantCanary(schema)}`);
  return schema;
}

/** The admin's request through the real handler, with Basic credentials. */
export const admin = (handler: typeof rows, request: Call) => call(handler, request);

/**
 * The planted code ran (so the attack was live), and never as the service's role or with its
 * reach into dbadmin's internal schema.
 */
export function expectTenantRightsOnly(seen: Sighting[]): void {
  expect(seen.length).toBeGreaterThan(0);
  for (const sighting of seen) {
    expect(sighting).toEqual({ who: expect.not.stringMatching(`^${serviceRole()}$`), internal: false });
  }
}

/**
 * How many backends still match `where` (a condition on pg_stat_activity), polled until none do
 * or the tries run out: a cancel or terminate lands a moment after the reply.
 */
export const backendsStillRunning = (where: string, tries = 2000) =>
  withAdminClient(async (c) => {
    const count = async () =>
      Number(
        (
          await c.query(
            `SELECT count(*) AS n FROM pg_stat_activity WHERE ${where} AND pid <> pg_backend_pid()`,
          )
        ).rows[0].n,
      );
    let n = await count();
    for (let tried = 0; tried < tries && n > 0; tried++) n = await count();
    return n;
  });
