import pg from 'pg';

/**
 * A direct connection for assertions about the catalog, independent of the code under test: as
 * the superuser in the service's database when the tests started the server (the service's role
 * holds no tenant's rights, lib/db/role-admin), else as DATABASE_URL's role.
 */
export async function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/**
 * DATABASE_URL's login on the server itself, not through a pooler the tests put in front of it
 * (DBADMIN_TEST_POOLER): where a tenant with its own login connects from, and where a session's
 * state (a LISTEN, a lock held across statements) stays with it.
 */
export function directUrl(): string {
  const url = new URL(process.env.DATABASE_URL as string);
  const direct = process.env.DBADMIN_TEST_DIRECT_URL;
  if (direct) url.host = new URL(direct).host;
  return url.toString();
}

/** A connection as the service's own role (DATABASE_URL, directly), with its rights and its defaults. */
export async function withServiceClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: directUrl() });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

export const schemaExists = (name: string) =>
  withAdminClient(
    async (c) => (await c.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [name])).rowCount === 1,
  );

export const roleExists = (name: string) =>
  withAdminClient(
    async (c) => (await c.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [name])).rowCount === 1,
  );

function adminUrl(): string | undefined {
  const superuser = process.env.DBADMIN_TEST_SUPERUSER_URL;
  const service = process.env.DATABASE_URL;
  if (!superuser || !service) return service;
  const url = new URL(superuser);
  url.pathname = new URL(service).pathname;
  return url.toString();
}

/**
 * As withAdminClient, working as the schema's owner: what it makes in the schema is the tenant's,
 * as if the tenant had made it (the service's role can make nothing there).
 */
export const withOwnerClient = <T>(schema: string, work: (client: pg.Client) => Promise<T>): Promise<T> =>
  withAdminClient(async (client) => {
    await client.query(`SET ROLE ${pg.escapeIdentifier(`${schema}_owner`)}`);
    return work(client);
  });
