/**
 * Loaded into the process serverless-offline runs the functions in (bin/offline.ts), before it:
 * one request's failure must not end the others'.
 *
 * - A promise rejected with nobody to hear it (work a function started and did not wait for) is
 *   logged and the host keeps serving: it ended one piece of work, not the process's state.
 * - An exception thrown outside any request's await (a timer's or a socket's callback) leaves the
 *   process in a state nobody knows: it is logged, and the host exits with 70 at once, before
 *   serverless-offline's own handler, for npm start's supervisor (bin/supervise.sh) to run it
 *   again; the container's restart policy does the same there.
 */
const CRASH = 70;

const line = (what, error) =>
  `dbadmin: ${what}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`;

process.on('unhandledRejection', (reason) => {
  console.error(line('a rejected promise nobody waited for (the host keeps serving)', reason));
});

process.prependListener('uncaughtException', (error) => {
  console.error(line('an uncaught error; the host exits to be started again', error));
  process.exit(CRASH);
});
