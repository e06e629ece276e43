import pg from 'pg';
import { handler as health } from '#functions/health';
import { handler as schemas } from '#functions/schemas';
import { parseConfig, resetConfig } from '#lib/config';
import { schemaAccess } from '#lib/db/executor';
import { closePool, createPool } from '#lib/db/pool';
import { call } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { makeTestTls, type TestTls } from '#test/support/tls';
import { startTlsPostgres, type TlsDatabase, withParams } from '#test/support/tls-postgres';

// One PostgreSQL for the file that, like RDS for PostgreSQL 15+, takes TLS connections only.
jest.setTimeout(60_000);

const sharedUrl = process.env.DATABASE_URL;
let tls: TestTls;
let db: TlsDatabase;

/** The service role's URL on the TLS-only server, with the TLS parameters given. */
const url = (params: Record<string, string>) => withParams(db.serviceUrl, params);
const verified = () => url({ sslmode: 'verify-full', sslrootcert: tls.caFile });

/** Points this file's service (config, pools) at `databaseUrl`, as a fresh container would start. */
async function serviceOn(databaseUrl: string): Promise<void> {
  await closePool();
  resetConfig();
  process.env.DATABASE_URL = databaseUrl;
}

/** Whether a backend's connection is encrypted, and with which protocol. */
const ENCRYPTION = 'SELECT ssl, version FROM pg_catalog.pg_stat_ssl WHERE pid = $1';

beforeAll(async () => {
  tls = await makeTestTls();
  db = await startTlsPostgres(tls);
});

afterAll(async () => {
  await closePool();
  process.env.DATABASE_URL = sharedUrl;
  resetConfig();
  await db?.stop();
});

describe('a PostgreSQL that requires TLS', () => {
  it('is reached by the service’s pool with sslmode=verify-full and the CA file, encrypted', async () => {
    const pool = createPool(parseConfig({ ...process.env, DATABASE_URL: verified() }), {
      applicationName: 'dbadmin-tls-test',
    });
    try {
      const { rows } = await pool.query(ENCRYPTION.replace('$1', 'pg_catalog.pg_backend_pid()'));

      expect(rows).toEqual([{ ssl: true, version: expect.stringMatching(/^TLSv1\.[23]$/) }]);
    } finally {
      await pool.end();
    }
  });

  it('refuses a plain connection', async () => {
    const client = new pg.Client({ connectionString: url({ sslmode: 'disable' }) });

    await expect(client.connect()).rejects.toMatchObject({
      code: '28000',
      message: expect.stringContaining('no encryption'),
    });
  });

  it('is asked for TLS, certificate verified, on Lambda when the URL names no sslmode', async () => {
    const onLambda = parseConfig({
      ...process.env,
      DATABASE_URL: db.serviceUrl,
      AWS_LAMBDA_FUNCTION_NAME: 'f',
    });
    const pool = createPool(onLambda, { applicationName: 'dbadmin-tls-test' });
    try {
      // The server's certificate comes from a CA this process does not trust: verification, not
      // the server's refusal of a plain connection, is what fails.
      await expect(pool.query('SELECT 1')).rejects.toMatchObject({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
    } finally {
      await pool.end();
    }
  });

  it('fails certificate verification without the CA, and the API answers 503 JSON', async () => {
    await serviceOn(url({ sslmode: 'verify-full' }));

    const reply = await call(schemas, { path: '/api/schemas' });
    const probe = await call(health, { path: '/api/health', auth: null });

    expect(reply.status).toBe(503);
    expect(reply.body).toEqual({
      error: 'Database unavailable',
      message: 'no verified TLS connection to the database could be made; see the service log',
    });
    expect(probe.status).toBe(503);
    expect(probe.body.error).toBe('Database unavailable');
  });

  it('serves the API and a schema role’s sessions over verified TLS', async () => {
    await serviceOn(verified());
    const schema = uniqueName('tls');

    const created = await call(schemas, {
      method: 'POST',
      path: '/api/schema/create',
      body: { schemaName: schema, password: 'a-long-password' },
    });
    const access = await schemaAccess(undefined, schema);
    // The role's own session cannot see its pg_stat_ssl row (it acts as the schema's owner role);
    // the service's pool, a member of the role, can, while the session is open.
    const session = await access.run(async (client) => {
      const { rows } = await client.query('SELECT session_user AS who, pg_catalog.pg_backend_pid() AS pid');
      const { who, pid } = rows[0] as { who: string; pid: number };
      const seen = await access.catalog.query(ENCRYPTION, [pid]);
      return { who, ...seen.rows[0] };
    });

    expect(created.status).toBe(201);
    expect(session).toEqual({ who: `${schema}_exec`, ssl: true, version: expect.any(String) });
  });
});
