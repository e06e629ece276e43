import pg from 'pg';

/** A direct connection for assertions about the catalog, independent of the code under test. */
export async function withAdminClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
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
