import { join } from 'node:path';
import type pg from 'pg';
import { dropRolePool, isSystemSchema } from '#lib/db/executor';
import { lockSchema, rederiveLogins, revoking, roleName } from '#lib/db/schema-roles';
import { ApiError, BadRequest } from '#lib/errors';
import { recoverMachineId } from '#lib/license/cache-table';
import { fileKeys, LICENSE_FILE, openLicenseFileWith, saveLicenseFile } from '#lib/license/license-file';
import { machineId } from '#lib/license/machine-id';

/*
 * A change of DBADMIN_SECRET, made whole: every role dbadmin logs in as gets the password the new
 * secret derives (and its old sessions end), and the license file, keyed by the secret, is written
 * again under the new one. Without it a process resets a role only when it first works as it or
 * its login is refused (roles unused since keep the old secret's password), and the license file
 * no longer opens: the license lives on the cache row's signed lease until its grace period ends.
 */

export interface RotationInput {
  /** The new DBADMIN_SECRET. */
  secret: string;
  /** The secret the license file was written with; not needed when there is none, or it is already under `secret`. */
  previousSecret?: string | undefined;
  licenseDataDir: string;
}

export interface RotationReport {
  /** Schemas whose roles were derived anew. */
  schemas: number;
  /** The roles whose password was derived anew (and whose sessions were ended). */
  roles: string[];
  /** Schemas being deleted: their roles cannot log in and are left so. */
  closing: string[];
  /** Schemas whose roles stayed busy (a tenant holding locks on them): run the rotation again. */
  busy: string[];
  /** The license file: none, already under the new secret, or written again under it. */
  licenseFile: 'absent' | 'current' | 'resealed';
}

type SchemaOutcome = { roles: string[] } | 'closing' | 'gone' | 'busy';

/** Idempotent: a second run derives the same passwords again and finds the file already under `secret`. */
export async function rotateSecret(db: pg.Pool, input: RotationInput): Promise<RotationReport> {
  assertSecrets(input);
  // Before anything changes: a wrong previous secret must leave everything as it was.
  const license = await openLicense(db, input);
  const report: RotationReport = { schemas: 0, roles: [], closing: [], busy: [], licenseFile: 'absent' };
  for (const schema of await schemasWithLogins(db)) {
    const outcome = await rederiveSchema(db, input.secret, schema);
    if (outcome === 'closing' || outcome === 'busy') report[outcome].push(schema);
    else if (outcome !== 'gone') {
      report.schemas += 1;
      report.roles.push(...outcome.roles);
    }
  }
  report.licenseFile = await resealLicense(input, license);
  return report;
}

function assertSecrets({ secret, previousSecret }: RotationInput): void {
  if (previousSecret === undefined) return;
  if (previousSecret.length < 32)
    throw new BadRequest(
      'Invalid previous secret',
      'the previous secret is at least 32 characters, as DBADMIN_SECRET',
    );
  if (previousSecret === secret)
    throw new BadRequest(
      'Same secret',
      'the previous secret is DBADMIN_SECRET itself: set DBADMIN_SECRET to the new secret first',
    );
}

type OpenedLicense = Exclude<Awaited<ReturnType<typeof openLicenseFileWith>>, 'unverified'>;

async function openLicense(db: pg.Pool, input: RotationInput): Promise<OpenedLicense> {
  const secrets = [input.secret, ...(input.previousSecret ? [input.previousSecret] : [])];
  const id = async () => (await machineId(input.licenseDataDir, () => recoverMachineId(db))).machineId;
  const opened = await openLicenseFileWith(input.licenseDataDir, id, secrets);
  if (opened !== 'unverified') return opened;
  throw new BadRequest(
    'License file does not open',
    `${join(input.licenseDataDir, LICENSE_FILE)} verifies under neither DBADMIN_SECRET nor ${input.previousSecret ? 'the previous secret given' : 'any previous secret (none given)'}: give the secret it was written with as the previous secret; nothing was changed`,
  );
}

/** Same contents, new IV and signature: the lease, the times and the status stay as they were. */
async function resealLicense(
  input: RotationInput,
  license: OpenedLicense,
): Promise<RotationReport['licenseFile']> {
  if (license === 'absent') return 'absent';
  if (license.secret === input.secret) return 'current';
  await saveLicenseFile(input.licenseDataDir, fileKeys(input.secret, license.machineId), license.file);
  return 'resealed';
}

/** Schemas with a login role of dbadmin's (`_exec`, `_svc`, `_anon`); the system's own aside. */
async function schemasWithLogins(db: pg.Pool): Promise<string[]> {
  const { rows } = await db.query<{ schema: string }>(
    `SELECT n.nspname AS schema FROM pg_catalog.pg_namespace n
      WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                     WHERE r.rolname IN (n.nspname || '_exec', n.nspname || '_svc', n.nspname || '_anon'))
      ORDER BY 1`,
  );
  return rows.map((row) => row.schema).filter((schema) => !isSystemSchema(schema));
}

/** The schema was dropped between listing and locking: the lock row just made is rolled back. */
class SchemaGone extends Error {}

/**
 * One schema's roles, under its lock and with revocation's care (a tenant may hold locks on its
 * roles): their sessions end before and after, so none goes on with the old password.
 */
async function rederiveSchema(db: pg.Pool, secret: string, schema: string): Promise<SchemaOutcome> {
  const roles = (['exec', 'svc', 'anon'] as const).map((kind) => roleName(schema, kind));
  try {
    const outcome = await revoking(db, roles, async (client): Promise<SchemaOutcome> => {
      if ((await lockSchema(client, schema)).closing) return 'closing';
      const { rowCount } = await client.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [
        schema,
      ]);
      if (rowCount !== 1) throw new SchemaGone();
      return { roles: await rederiveLogins(client, secret, schema) };
    });
    // This process's pools of them log in afresh (the invoked function shares a container).
    await Promise.all(roles.map(dropRolePool));
    return outcome;
  } catch (error) {
    if (error instanceof SchemaGone) return 'gone';
    if (error instanceof ApiError && error.status === 409) return 'busy';
    throw error;
  }
}
