import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pg from 'pg';
import { handler as schemas } from '#functions/schemas';
import { resetConfig } from '#lib/config';
import { closePool } from '#lib/db/pool';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { changingSettings } from '#test/support/settings';
import { makeTestTls } from '#test/support/tls';
import { startTlsPostgres, withParams } from '#test/support/tls-postgres';

/**
 * GET /api/schema/{schemaName}/connection: the answer lets psql and an application in as the
 * schema's login, with the password the admin set at creation and no other.
 */
jest.setTimeout(60_000);

const run = promisify(execFile);
// Printable ASCII the schema's password may hold, URL-reserved characters among them.
const PASSWORD = 'p@ss:w/rd#1%&?';

const settings = changingSettings();
afterAll(async () => {
  settings.restore();
  await closePool();
});

async function createSchema(password = PASSWORD): Promise<string> {
  const schemaName = uniqueName('conn');
  const reply = await call(schemas, {
    method: 'POST',
    path: '/api/schema/create',
    body: { schemaName, password },
  });
  if (reply.status !== 201) throw new Error(`schema: ${reply.text}`);
  return schemaName;
}

const connection = (schema: string) => call(schemas, { path: `/api/schema/${schema}/connection` });

/**
 * The psql command as a person pastes it into a shell, with a statement after it: psql's only
 * other input is PGPASSWORD (no service file, no psqlrc, no PG* variable of this process).
 */
async function psql(command: string, sql: string[], env: Record<string, string> = {}): Promise<string> {
  const statements = sql.map((text) => ` -c '${text}'`).join('');
  const { stdout } = await run('sh', ['-c', `${command} -X -A -t${statements}`], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PGPASSWORD: PASSWORD, PGCONNECT_TIMEOUT: '10', ...env },
    timeout: 20_000,
  });
  return stdout.trim();
}

describe('a schema’s connection string', () => {
  let schema: string;
  beforeAll(async () => {
    schema = await createSchema();
  });

  it('names the schema’s login and leaves its password a placeholder, never the service’s', async () => {
    const reply = await connection(schema);
    const service = new URL(process.env.DATABASE_URL as string);

    expect(reply.status).toBe(200);
    expect(reply.body).toMatchObject({ user: `${schema}_user`, host: expect.any(String) });
    expect(reply.body.url).toMatch(new RegExp(`^postgresql://${schema}_user:<password>@`));
    expect(reply.body.psql).toMatch(new RegExp(`^psql 'postgresql://${schema}_user@[^']+'$`));
    expect(reply.text).not.toContain(decodeURIComponent(service.password));
    expect(reply.text).not.toContain(`${service.username}@`);
  });

  it('lets an application in, with the password set at creation in place of <password>', async () => {
    const { body } = await connection(schema);
    const client = new pg.Client({
      connectionString: body.url.replace('<password>', encodeURIComponent(PASSWORD)),
    });
    await client.connect();
    try {
      const { rows } = await client.query('SELECT session_user AS who, current_database() AS db');

      expect(rows[0]).toEqual({ who: `${schema}_user`, db: body.database });
    } finally {
      await client.end();
    }
  });

  it('lets psql in', async () => {
    const { body } = await connection(schema);

    // The login works as the schema's owner role (its default `role`), as the README says.
    expect(await psql(body.psql, ['select session_user, current_user'])).toBe(
      `${schema}_user|${schema}_owner`,
    );
  });

  it('lets nobody in with another password', async () => {
    const { body } = await connection(schema);

    await expect(psql(body.psql, ['select 1'], { PGPASSWORD: 'not-the-password' })).rejects.toThrow(
      /password authentication failed/,
    );
  });

  it('names the host and port PUBLIC_DATABASE_HOST and PUBLIC_DATABASE_PORT give', async () => {
    settings.set({ PUBLIC_DATABASE_HOST: 'db.example.com', PUBLIC_DATABASE_PORT: '6432' });
    try {
      const { body } = await connection(schema);

      expect(body).toMatchObject({ host: 'db.example.com', port: 6432 });
      expect(body.psql).toContain(`@db.example.com:6432/`);
    } finally {
      settings.restore();
    }
  });
});

describe('what has no connection string', () => {
  it('answers 404 for a schema that does not exist', async () => {
    const reply = await connection(uniqueName('none'));

    expect(reply.status).toBe(404);
    expect(reply.body.error).toBe('Schema not found');
  });

  it('answers 404 for a schema made outside dbadmin, which has no login of its own', async () => {
    const schema = uniqueName('bare');
    await withAdminClient((c) => c.query(`CREATE SCHEMA "${schema}"`));
    try {
      const reply = await connection(schema);

      expect(reply.status).toBe(404);
      expect(reply.body).toEqual({
        error: 'Login not found',
        message: expect.stringContaining(`${schema}_user`),
      });
    } finally {
      await withAdminClient((c) => c.query(`DROP SCHEMA "${schema}"`));
    }
  });

  it('answers 400 for dbadmin’s own schema, whose name no tenant schema may have', async () => {
    const reply = await connection('_dbadmin');

    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('Invalid schema name');
  });

  it.each(['public', 'information_schema', 'pg_catalog', 'pg_toast'])(
    'answers 400 for the system schema %s',
    async (schema) => {
      const reply = await connection(schema);

      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('System schema');
    },
  );
});

describe('over TLS', () => {
  it('carries sslmode=verify-full, and psql gets in encrypted with the server’s CA', async () => {
    const tls = await makeTestTls();
    const db = await startTlsPostgres(tls);
    try {
      await closePool();
      settings.set({
        DATABASE_URL: withParams(db.serviceUrl, { sslmode: 'verify-full', sslrootcert: tls.caFile }),
      });
      const schema = await createSchema();

      const { body } = await connection(schema);
      // The server takes TLS connections only; \conninfo says which protocol psql got.
      const seen = await psql(body.psql, ['select session_user', '\\conninfo'], {
        PGSSLROOTCERT: tls.caFile,
      });

      expect(body.sslmode).toBe('verify-full');
      expect(body.url).toMatch(/\?sslmode=verify-full$/);
      expect(seen).toMatch(new RegExp(`^${schema}_user\n.*SSL connection \\(protocol: TLSv1\\.[23]`, 's'));
    } finally {
      await closePool();
      settings.restore();
      resetConfig();
      await db.stop();
    }
  });
});
