/**
 * Run by test/integration/embedded-postgres.test.ts in a child process (out of Jest's module
 * system, as private-postgres.ts is): starts the embedded PostgreSQL on the data directory in
 * `argv[2]`, then a second one on the same directory, and prints what the second start threw.
 */
import { startEmbeddedPostgres } from '../../bin/embedded-postgres';

async function main(dataDir: string): Promise<void> {
  const options = { dataDir, password: 'served-twice', persistent: false };
  const first = await startEmbeddedPostgres(options);
  try {
    const refused = await startEmbeddedPostgres(options).then(
      async (second) => {
        await second.stop();
        return 'started twice';
      },
      (error: unknown) => (error instanceof Error ? error.message : `threw ${String(error)}`),
    );
    process.stdout.write(JSON.stringify({ refused }));
  } finally {
    await first.stop();
  }
}

main(process.argv[2] as string).catch((error: Error) => {
  process.stderr.write(`${error.stack ?? error.message}\n`);
  process.exitCode = 1;
});
