/**
 * license-admin: the vendor's tool for the license server's store.
 *   issue --email E [--type paid|trial] [--max-deployments N] [--expires-at ISO]
 *   list | show KEY | revoke KEY | deactivate KEY MACHINE_ID
 */
import { parseArgs } from 'node:util';
import type pg from 'pg';
import { newSigningKey } from '#lib/license/lease';
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
  signing-key new                      a new Ed25519 key pair for signing leases

Trials need --expires-at; dates must be in the future. Keys are stored only as hashes: the key is
printed once, by issue. Needs LICENSE_SERVER_DATABASE_URL (signing-key new needs nothing).`;

interface Io {
  out: (line: string) => void;
  err: (line: string) => void;
}

const line = (l: License) =>
  [
    `${l.keyPrefix}…`,
    l.email,
    l.type,
    l.status,
    `${l.machineIds.length}/${l.maxDeployments}`,
    l.expiresAt?.toISOString() ?? 'lifetime',
  ].join('  ');

class UsageError extends Error {}

function issueOptions(args: string[], now: Date) {
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
  if (expiresAt && expiresAt <= now) throw new UsageError('--expires-at must be in the future');
  if (values.type === 'trial' && !expiresAt)
    throw new UsageError('a trial needs --expires-at (a trial without an expiry would never end)');
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

/** The private key goes to the license server's secrets; the public line into lib/license/lease.ts. */
function newKeyPair(args: string[], io: Io): number {
  if (args[0] !== 'new') throw new UsageError('usage: signing-key new');
  const { privateKey, trusted } = newSigningKey();
  io.out(`LICENSE_SERVER_SIGNING_KEY=${privateKey}`);
  io.out('');
  io.out('# add to TRUSTED_KEYS in lib/license/lease.ts, then release the service:');
  io.out(`  { id: '${trusted.id}', publicKey: '${trusted.publicKey}' },`);
  return 0;
}

async function command(name: string, args: string[], io: Io): Promise<number> {
  if (name === 'signing-key') return newKeyPair(args, io);
  const db = await licenseDatabase();
  switch (name) {
    case 'issue':
      io.out((await issueLicense(db, issueOptions(args, new Date()))).licenseKey);
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
