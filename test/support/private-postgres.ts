/**
 * Run by test/integration/embedded-postgres.test.ts in a child process (as `npm start` runs, out
 * of Jest's module system): starts the embedded PostgreSQL with its data directory in `argv[2]`
 * and a copy of the binaries, connects as the service role, prints what it saw as JSON: who it is,
 * and how the server treats text.
 */
import pg from 'pg';
import { startEmbeddedPostgres } from '../../bin/embedded-postgres';

async function main(dataDir: string): Promise<void> {
  const database = await startEmbeddedPostgres({
    dataDir,
    password: 'superuser-password',
    servicePassword: 'service-password',
    persistent: false,
    copyBinaries: true,
    log: () => undefined,
  });
  try {
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const { rows } = await client.query(
      `SELECT current_user AS who, pg_catalog.current_setting('server_encoding') AS encoding,
              pg_catalog.length('é€😀') AS length, pg_catalog.upper('é') AS upper,
              'ÉTÉ' ILIKE 'été' AS ilike, $1::text AS echoed`,
      ['é€😀'],
    );
    await client.end();
    process.stdout.write(JSON.stringify(rows[0]));
  } finally {
    await database.stop();
  }
}

main(process.argv[2] as string).catch((error: Error) => {
  process.stderr.write(`${error.stack ?? error.message}\n`);
  process.exitCode = 1;
});
