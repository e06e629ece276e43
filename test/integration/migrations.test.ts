import pg from 'pg';
import { type Migration, migrate } from '#lib/db/migrations';
import { withAdminClient } from '#test/support/db';
import { uniqueName } from '#test/support/names';

async function withClients<T>(count: number, work: (clients: pg.Client[]) => Promise<T>): Promise<T> {
  const clients = Array.from(
    { length: count },
    () => new pg.Client({ connectionString: process.env.DATABASE_URL }),
  );
  await Promise.all(clients.map((c) => c.connect()));
  try {
    return await work(clients);
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
}

describe('migrate', () => {
  it('creates _dbadmin with the license cache table and records it', async () => {
    await withClients(1, ([client]) => migrate(client as pg.Client));

    const columns = await withAdminClient(async (c) =>
      c.query(
        `SELECT column_name FROM information_schema.columns
          WHERE table_schema = '_dbadmin' AND table_name = 'license_cache' ORDER BY ordinal_position`,
      ),
    );
    expect(columns.rows.map((r) => r.column_name)).toEqual([
      'machine_id',
      'license_key_hash',
      'license_type',
      'expires_at',
      'last_validated_at',
      'created_at',
      'updated_at',
      'lease',
      'lease_seq',
      'high_water',
      'status',
    ]);
    const trial = await withAdminClient((c) => c.query(`SELECT to_regclass('_dbadmin.trial') AS t`));
    expect(trial.rows[0].t).toBe('_dbadmin.trial');
  });

  it('applies each migration once when several processes start together', async () => {
    const table = uniqueName('probe');
    const id = 1_000_000 + Math.floor(Math.random() * 1_000_000);
    const migrations: Migration[] = [{ id, name: 'probe', sql: `CREATE TABLE _dbadmin.${table} (n int)` }];

    const applied = await withClients(5, (clients) =>
      Promise.all(clients.map((c) => migrate(c, migrations))),
    );

    expect(applied.flat()).toEqual([id]);
    const recorded = await withAdminClient((c) =>
      c.query('SELECT count(*)::int AS n FROM _dbadmin.migrations WHERE id = $1', [id]),
    );
    expect(recorded.rows[0].n).toBe(1);
    await withAdminClient((c) =>
      c.query(`DROP TABLE _dbadmin.${table}; DELETE FROM _dbadmin.migrations WHERE id = ${id}`),
    );
  });

  it('leaves no record when a migration fails, so it runs again next time', async () => {
    const id = 2_000_000 + Math.floor(Math.random() * 1_000_000);
    const broken: Migration[] = [{ id, name: 'broken', sql: 'CREATE TABLE _dbadmin.x (' }];

    await expect(withClients(1, ([client]) => migrate(client as pg.Client, broken))).rejects.toMatchObject({
      code: '42601',
    });

    const recorded = await withAdminClient((c) =>
      c.query('SELECT 1 FROM _dbadmin.migrations WHERE id = $1', [id]),
    );
    expect(recorded.rowCount).toBe(0);
  });
});
