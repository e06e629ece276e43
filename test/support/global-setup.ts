import { buildConsole } from '../../bin/build-console';
import {
  type EmbeddedDatabase,
  inServiceDatabase,
  startTemporaryPostgres,
} from '../../bin/embedded-postgres';
import { EMBEDDED_MAJORS, type EmbeddedMajor } from '../../bin/postgres-reach';
import { runTmpdir } from '../../bin/run-tmpdir';
import { type PgBouncer, startPgBouncer } from './pgbouncer';

function testedMajor(): EmbeddedMajor | undefined {
  const asked = process.env.DBADMIN_TEST_POSTGRES;
  if (asked === undefined) return undefined;
  const major = EMBEDDED_MAJORS.find((known) => known === asked);
  if (!major)
    throw new Error(`DBADMIN_TEST_POSTGRES=${asked}: the embedded majors are ${EMBEDDED_MAJORS.join(', ')}`);
  return major;
}

/**
 * DBADMIN_TEST_POOLER=pgbouncer: the service reaches PostgreSQL through the real PgBouncer in
 * transaction mode, with a global cap of 50 server connections (the security suite runs so too);
 * tenants' logins made by the tests go through it as well. Assertions about the catalog still
 * connect directly, as the superuser (test/support/db).
 */
async function throughPooler(database: EmbeddedDatabase): Promise<PgBouncer | undefined> {
  const asked = process.env.DBADMIN_TEST_POOLER;
  if (asked === undefined) return undefined;
  if (asked !== 'pgbouncer') throw new Error(`DBADMIN_TEST_POOLER=${asked}: the pooler tested is pgbouncer`);
  if (process.env.DBADMIN_TEST_AS === 'superuser') throw new Error('PgBouncer serves no superuser login');
  const pooler = await startPgBouncer({
    databaseUrl: database.url,
    superuserUrl: database.superuserUrl,
    maxDbConnections: 50,
  });
  process.env.DBADMIN_TEST_DIRECT_URL = database.url;
  process.env.DATABASE_URL = pooler.url;
  process.env.DATABASE_POOL_MODE = 'transaction';
  return pooler;
}

/**
 * A real PostgreSQL for the whole run: DATABASE_URL when set, otherwise an embedded one in a
 * temporary directory. The service runs as its own non-superuser role, as in production;
 * DBADMIN_TEST_AS=superuser runs it as the superuser instead (the security suite runs both ways).
 * DBADMIN_TEST_POSTGRES=15 runs against the oldest supported major instead of 17 (the security
 * suite runs on both). Workers inherit the URLs through the environment.
 *
 * The run's temporary files go under a directory of its own (runTmpdir), inherited by the
 * workers through TMPDIR, which the teardown removes (and a failed setup, since Jest then runs no
 * teardown).
 */
export default async function globalSetup(): Promise<void> {
  const removeTmpdir = runTmpdir('dbadmin-jest');
  (globalThis as { __dbadminRemoveTmpdir?: () => void }).__dbadminRemoveTmpdir = removeTmpdir;
  try {
    // The console function embeds the console's bundle: build it as packaging and `npm start` do.
    await buildConsole();
    if (process.env.DATABASE_URL) {
      // A run that claims PostgreSQL 15 must not pass against whatever DATABASE_URL serves.
      if (process.env.DBADMIN_TEST_POSTGRES) {
        throw new Error(
          'DBADMIN_TEST_POSTGRES starts an embedded server: unset DATABASE_URL, or DBADMIN_TEST_POSTGRES',
        );
      }
      return;
    }
    const database = await startTemporaryPostgres('test', { major: testedMajor() });
    const asSuperuser = process.env.DBADMIN_TEST_AS === 'superuser';
    process.env.DATABASE_URL = asSuperuser ? inServiceDatabase(database.superuserUrl) : database.url;
    process.env.DBADMIN_TEST_SUPERUSER_URL = database.superuserUrl;
    const pooler = await throughPooler(database);
    (globalThis as { __dbadminStopDatabase?: () => Promise<void> }).__dbadminStopDatabase = async () => {
      await pooler?.stop();
      await database.stop();
      // A watch run sets up again, and must not take the stopped server for a given DATABASE_URL.
      delete process.env.DATABASE_URL;
      delete process.env.DBADMIN_TEST_SUPERUSER_URL;
      delete process.env.DATABASE_POOL_MODE;
      delete process.env.DBADMIN_TEST_DIRECT_URL;
    };
  } catch (error) {
    // Jest runs no teardown after a setup that failed.
    removeTmpdir();
    throw error;
  }
}
