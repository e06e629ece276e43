import { join } from 'node:path';
import type pg from 'pg';
import { dropRolePool, isSystemSchema } from '#lib/db/executor';
import { roleName } from '#lib/db/role-names';
import { revoking, shutLogins } from '#lib/db/role-revocation';
import { lockSchema } from '#lib/db/schema-locks';
import { rederiveLogins } from '#lib/db/schema-roles';
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
  /** Schemas whose roles were derived anew (`gone` ones included). */
  schemas: number;
  /** The roles whose password was derived anew (and whose sessions were ended). */
  roles: string[];
  /** Schemas no longer in the database (their owner dropped them) whose roles were left: now shut, NOLOGIN. */
  gone: string[];
  /** Schemas being deleted: their roles cannot log in and are left so. */
  closing: string[];
  /** Schemas whose roles stayed busy (a tenant holding locks on them): run the rotation again. */
  busy: string[];
  /** The license file: none, already under the new secret, or written again under it. */
  licenseFile: 'absent' | 'current' | 'resealed';
}

/** `shut`: the schema is gone, and its roles were left unable to log in. */
type SchemaOutcome = { roles: string[]; shut: boolean } | 'closing' | 'dropped' | 'busy';

/** Idempotent: a second run derives the same passwords again and finds the file already under `secret`. */
export async function rotateSecret(db: pg.Pool, input: RotationInput): Promise<RotationReport> {
  assertSecrets(input);
  // Before anything changes: a wrong previous secret must leave everything as it was.
  const license = await openLicense(db, input);
  const report: RotationReport = {
    schemas: 0,
    roles: [],
    gone: [],
    closing: [],
    busy: [],
    licenseFile: 'absent',
  };
  for (const schema of await schemasWithLogins(db)) {
    const outcome = await rederiveSchema(db, input.secret, schema);
    if (outcome === 'closing' || outcome === 'busy') report[outcome].push(schema);
    else if (outcome !== 'dropped') {
      report.schemas += 1;
      report.roles.push(...outcome.roles);
      if (outcome.shut) report.gone.push(schema);
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

/**
 * Schemas with a login role of dbadmin's (`_exec`, `_svc`, `_anon`), the system's own aside: those
 * in the database, and those no longer there whose lock row remains (made for their roles, and
 * deleted only by deleteSchema): a schema's owner may drop it, and its roles stay. Not every role
 * named so: roles are the cluster's, and other databases' schemas have theirs.
 */
async function schemasWithLogins(db: pg.Pool): Promise<string[]> {
  const { rows } = await db.query<{ schema: string }>(
    `SELECT s.name AS schema
       FROM (SELECT nspname::text AS name FROM pg_catalog.pg_namespace
             UNION SELECT schema_name FROM _dbadmin.schema_locks) s
      WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                     WHERE r.rolname IN (s.name || '_exec', s.name || '_svc', s.name || '_anon'))
      ORDER BY 1`,
  );
  return rows.map((row) => row.schema).filter((schema) => !isSystemSchema(schema));
}

/** The schema and its roles were dropped between listing and locking: the lock row just made is rolled back. */
class SchemaDropped extends Error {}

/**
 * One schema's roles, under its lock and with revocation's care (a tenant may hold locks on its
 * roles): their sessions end before and after, so none goes on with the old password. When the
 * schema is gone, they are shut instead: nothing legitimate logs in as them any more.
 */
async function rederiveSchema(db: pg.Pool, secret: string, schema: string): Promise<SchemaOutcome> {
  const roles = (['exec', 'svc', 'anon'] as const).map((kind) => roleName(schema, kind));
  try {
    const outcome = await revoking(
      db,
      roles,
      async (client): Promise<SchemaOutcome> => {
        const { closing } = await lockSchema(client, schema);
        const { rowCount } = await client.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [
          schema,
        ]);
        if (rowCount === 1) {
          if (closing) return 'closing';
          return { roles: await rederiveLogins(client, secret, schema), shut: false };
        }
        const shut = await shutLogins(client, secret, schema);
        if (shut.length === 0) throw new SchemaDropped();
        return { roles: shut, shut: true };
      },
      { audit: undefined }, // run by the CLI, outside any request
    );
    // This process's pools of them log in afresh (the invoked function shares a container).
    await Promise.all(roles.map(dropRolePool));
    return outcome;
  } catch (error) {
    if (error instanceof SchemaDropped) return 'dropped';
    if (error instanceof ApiError && error.status === 409) return 'busy';
    throw error;
  }
}
