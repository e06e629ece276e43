/**
 * license-admin: the vendor's tool for the license server's store.
 *   issue --email E [--type paid|trial] [--max-deployments N] [--expires-at ISO]
 *   list | show KEY | revoke KEY | deactivate KEY MACHINE_ID
 */
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { closeLicenseDatabase, licenseDatabase } from '../license-server/lib/db';
import {
  deactivate,
  findLicense,
  issueLicense,
  type License,
  listLicenses,
  revoke,
} from '../license-server/lib/store';

export const HELP = `Usage: license-admin <command> [options]

  issue --email E [--type paid|trial] [--max-deployments N] [--expires-at ISO]   prints the new key
  list                                 every license, one per line
  show KEY                             one license and its activated machines
  revoke KEY                           the key stops validating
  deactivate KEY MACHINE_ID            frees that machine's deployment slot

Needs LICENSE_SERVER_DATABASE_URL.`;

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

const line = (l: License) =>
  [
    l.licenseKey,
    l.email,
    l.type,
    l.status,
    `${l.machineIds.length}/${l.maxDeployments}`,
    l.expiresAt?.toISOString() ?? 'lifetime',
  ].join('  ');

class UsageError extends Error {}

function issueOptions(args: string[]) {
  const { values } = parseArgs({
    args,
    options: {
      email: { type: 'string' },
      type: { type: 'string', default: 'paid' },
      'max-deployments': { type: 'string', default: '5' },
      'expires-at': { type: 'string' },
    },
  });
  if (!values.email?.includes('@')) throw new UsageError('issue needs --email with an email address');
  if (values.type !== 'paid' && values.type !== 'trial') throw new UsageError('--type must be paid or trial');
  const maxDeployments = Number(values['max-deployments']);
  if (!Number.isInteger(maxDeployments) || maxDeployments < 1)
    throw new UsageError('--max-deployments must be a positive whole number');
  const expiresAt = values['expires-at'] ? new Date(values['expires-at']) : null;
  if (expiresAt && Number.isNaN(expiresAt.getTime()))
    throw new UsageError('--expires-at must be an ISO 8601 date');
  return { email: values.email, type: values.type, maxDeployments, expiresAt } as const;
}

async function showLicense(db: pg.Pool, key: string | undefined, io: Io): Promise<number> {
  const license = key ? await findLicense(db, key) : undefined;
  if (!license) throw new UsageError('show needs the key of an existing license');
  io.out(JSON.stringify(license, null, 2));
  return 0;
}

async function revokeLicense(db: pg.Pool, key: string | undefined, io: Io): Promise<number> {
  if (!key || !(await revoke(db, key))) throw new UsageError('revoke needs the key of an existing license');
  io.out(`revoked ${key}`);
  return 0;
}

async function deactivateMachine(db: pg.Pool, [key, machineId]: string[], io: Io): Promise<number> {
  if (!key || !machineId) throw new UsageError('deactivate needs KEY MACHINE_ID');
  // The vendor may free any slot: no owner email to check.
  const outcome = await deactivate(db, { licenseKey: key, machineId });
  if (!outcome.success) {
    io.err(`license-admin: ${outcome.message}`);
    return 1;
  }
  io.out(`deactivated ${machineId}`);
  return 0;
}

async function command(name: string, args: string[], io: Io): Promise<number> {
  const db = await licenseDatabase();
  switch (name) {
    case 'issue':
      io.out((await issueLicense(db, issueOptions(args))).licenseKey);
      return 0;
    case 'list':
      for (const license of await listLicenses(db)) io.out(line(license));
      return 0;
    case 'show':
      return showLicense(db, args[0], io);
    case 'revoke':
      return revokeLicense(db, args[0], io);
    case 'deactivate':
      return deactivateMachine(db, args, io);
    default:
      throw new UsageError(`unknown command ${name}`);
  }
}

export async function run(argv: string[], io: Io): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '--help' || name === '-h') {
    (name ? io.out : io.err)(HELP);
    return name ? 0 : 2;
  }
  try {
    return await command(name, args, io);
  } catch (error) {
    const usage =
      error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    io.err(`license-admin: ${(error as Error).message}${usage ? `\n\n${HELP}` : ''}`);
    return usage ? 2 : 1;
  } finally {
    await closeLicenseDatabase();
  }
}
