/**
 * rotate-secret [--previous-secret SECRET]
 * After DBADMIN_SECRET changed: derives every schema role's password from the new secret, ends
 * their sessions, and writes the license file again under it. Prints what it did.
 */
import { parseArgs } from 'node:util';
import { type RotationReport, rotateSecret } from '#lib/admin/rotate-secret';
import { loadConfig } from '#lib/config';
import { withServicePool } from '#lib/db/pool';
import { ApiError } from '#lib/errors';
import { localEnvironment } from './local';

export const HELP = `Usage: rotate-secret [--previous-secret SECRET]

After DBADMIN_SECRET has changed: derives the password of every role dbadmin logs in as
(<schema>_exec, _svc, _anon) from the new secret and ends their sessions, and writes the license
file again under the new secret, so the license stays as it was. Safe to run again.

  -p, --previous-secret  the secret the license file was written with (or DBADMIN_PREVIOUS_SECRET,
                         which other users cannot see in ps); not needed when there is no license
                         file or it is already under DBADMIN_SECRET
  -h, --help             show this help

Uses the service's settings (DATABASE_URL, DBADMIN_SECRET: the new one, LICENSE_DATA_DIR, ...).`;

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

type Parsed = { previous: string | undefined } | { help: true } | { error: string };

function parse(argv: string[], env: NodeJS.ProcessEnv): Parsed {
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        'previous-secret': { type: 'string', short: 'p' },
        help: { type: 'boolean', short: 'h' },
      },
    });
    if (values.help) return { help: true };
    const previous = values['previous-secret'] ?? env.DBADMIN_PREVIOUS_SECRET;
    // An empty value (an unset variable pasted in) is a mistake, not "no previous secret".
    if (previous === '') return { error: 'the previous secret is empty' };
    return { previous };
  } catch (error) {
    return { error: (error as Error).message };
  }
}

/** Plain lines: what was derived, what was left and why, what became of the license file. */
export function reportLines(
  report: RotationReport,
  licenseDataDir: string,
): { out: string[]; err: string[] } {
  const out = [
    `Re-derived ${report.roles.length} role passwords in ${report.schemas} schemas from the new DBADMIN_SECRET and ended their sessions`,
    ...report.closing.map((schema) => `Left schema "${schema}": being deleted, its roles cannot log in`),
    ...report.gone.map(
      (schema) => `Shut the roles of schema "${schema}", which no longer exists: they cannot log in`,
    ),
    {
      absent: `No license file in ${licenseDataDir}: nothing to re-sign`,
      current: 'License file already under the new secret: left as it is',
      resealed: 'License file re-signed under the new secret: the license stays as it was',
    }[report.licenseFile],
  ];
  const err = report.busy.map(
    (schema) =>
      `rotate-secret: schema "${schema}": its roles stayed busy (locks held by its sessions); run rotate-secret again`,
  );
  return { out, err };
}

export async function run(argv: string[], env: NodeJS.ProcessEnv, io: Io): Promise<number> {
  const parsed = parse(argv, env);
  if ('help' in parsed) {
    io.out(HELP);
    return 0;
  }
  if ('error' in parsed) {
    io.err(`rotate-secret: ${parsed.error}\n\n${HELP}`);
    return 2;
  }
  // Beside a local `npm start`: its generated secret, and its database (or the embedded one).
  let local: Awaited<ReturnType<typeof localEnvironment>> | undefined;
  try {
    local = await localEnvironment(env);
    const config = await loadConfig(local.env);
    const report = await withServicePool(config, 'dbadmin-rotate-secret', (db) =>
      rotateSecret(db, {
        secret: config.DBADMIN_SECRET,
        previousSecret: parsed.previous,
        licenseDataDir: config.LICENSE_DATA_DIR,
      }),
    );
    const lines = reportLines(report, config.LICENSE_DATA_DIR);
    for (const line of lines.out) io.out(line);
    for (const line of lines.err) io.err(line);
    return lines.err.length > 0 ? 1 : 0;
  } catch (error) {
    io.err(`rotate-secret: ${(error as Error).message}`);
    // What the operator can fix (a wrong or missing previous secret) is told apart from failures.
    return error instanceof ApiError && error.status < 500 ? 2 : 1;
  } finally {
    await local?.stop();
  }
}
