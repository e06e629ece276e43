import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '#lib/db/migrations';
import { withClient } from '#lib/db/pool';
import { directUrl } from '#test/support/db';

/**
 * A database of its own for a licensing test file: the trial is recorded once per database, so
 * files running side by side must not share one. Made by the superuser when the test setup has
 * one, owned by the service's role, migrated; dropped by `drop`.
 */
export async function licenseTestDatabase(): Promise<{
  db: pg.Pool;
  /** The service role's URL of this database. */
  url: string;
  clear: () => Promise<void>;
  drop: () => Promise<void>;
}> {
  const serviceUrl = new URL(directUrl());
  const adminUrl = process.env.DBADMIN_TEST_SUPERUSER_URL ?? process.env.DATABASE_URL;
  const name = `dbadmin_license_${randomBytes(4).toString('hex')}`;
  const owner = decodeURIComponent(serviceUrl.username);
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name} OWNER "${owner.replace(/"/g, '""')}"`);
  await admin.end();
  serviceUrl.pathname = `/${name}`;
  const db = new pg.Pool({
    connectionString: serviceUrl.href,
    max: 4,
    options: '-c search_path=pg_catalog,pg_temp',
  });
  await withClient(db, (client) => migrate(client));
  return {
    db,
    url: serviceUrl.href,
    /** A new deployment's database: no trial, no cache rows. */
    clear: async () => {
      await db.query('DELETE FROM _dbadmin.trial; DELETE FROM _dbadmin.license_cache');
    },
    drop: async () => {
      await db.end();
      const dropper = new pg.Client({ connectionString: adminUrl });
      await dropper.connect();
      await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await dropper.end();
    },
  };
}
