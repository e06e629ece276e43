import type pg from 'pg';
import type { Migration, MigrationTarget } from '#lib/db/migrations';
import { withTransaction } from '#lib/db/pool';
import { newLicenseKey, normalizeEmail, normalizeKey } from './keys';

export const STORE_TARGET: MigrationTarget = { schema: 'license_server' };

export const STORE_MIGRATIONS: readonly Migration[] = [
  {
    id: 1,
    name: 'licenses and activations',
    sql: `
      CREATE TABLE license_server.licenses (
        id              serial PRIMARY KEY,
        license_key     text NOT NULL UNIQUE,
        email           text NOT NULL,
        status          text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'revoked')),
        type            text NOT NULL CHECK (type IN ('trial', 'paid')),
        expires_at      timestamptz,
        max_deployments integer NOT NULL DEFAULT 5 CHECK (max_deployments > 0),
        created_at      timestamptz NOT NULL DEFAULT now(),
        activated_at    timestamptz
      );
      CREATE TABLE license_server.activations (
        license_id    integer NOT NULL REFERENCES license_server.licenses ON DELETE CASCADE,
        machine_id    text NOT NULL,
        first_seen_at timestamptz NOT NULL DEFAULT now(),
        last_seen_at  timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (license_id, machine_id)
      )`,
  },
];

export interface License {
  id: number;
  licenseKey: string;
  email: string;
  status: 'active' | 'revoked';
  type: 'trial' | 'paid';
  expiresAt: Date | null;
  maxDeployments: number;
  createdAt: Date;
  activatedAt: Date | null;
  machineIds: string[];
}

const SELECT_LICENSE = `
  SELECT l.id, l.license_key AS "licenseKey", l.email, l.status, l.type, l.expires_at AS "expiresAt",
         l.max_deployments AS "maxDeployments", l.created_at AS "createdAt", l.activated_at AS "activatedAt",
         coalesce((SELECT array_agg(a.machine_id ORDER BY a.first_seen_at) FROM license_server.activations a
                    WHERE a.license_id = l.id), '{}') AS "machineIds"
    FROM license_server.licenses l`;

export interface IssueInput {
  email: string;
  type: 'trial' | 'paid';
  maxDeployments: number;
  expiresAt: Date | null;
}

export async function issueLicense(db: pg.Pool, input: IssueInput): Promise<License> {
  const { rows } = await db.query<{ id: number }>(
    `INSERT INTO license_server.licenses (license_key, email, type, max_deployments, expires_at)
     VALUES ($1, $2, $3, $4, $5) RETURNING id`,
    [newLicenseKey(), input.email.trim(), input.type, input.maxDeployments, input.expiresAt],
  );
  return (await findById(db, rows[0]?.id ?? 0)) as License;
}

async function findById(db: pg.Pool | pg.ClientBase, id: number): Promise<License | undefined> {
  const { rows } = await db.query<License>(`${SELECT_LICENSE} WHERE l.id = $1`, [id]);
  return rows[0];
}

export async function findLicense(
  db: pg.Pool | pg.ClientBase,
  licenseKey: string,
  lock = false,
): Promise<License | undefined> {
  const { rows } = await db.query<License>(
    `${SELECT_LICENSE} WHERE l.license_key = $1${lock ? ' FOR UPDATE OF l' : ''}`,
    [normalizeKey(licenseKey)],
  );
  return rows[0];
}

export async function listLicenses(db: pg.Pool): Promise<License[]> {
  const { rows } = await db.query<License>(`${SELECT_LICENSE} ORDER BY l.id`);
  return rows;
}

/** Usable now: active (not revoked) and not past its expiry. Unknown and revoked look the same. */
const usable = (license: License | undefined, now: Date): license is License =>
  license !== undefined && license.status === 'active' && (!license.expiresAt || license.expiresAt > now);

const sameOwner = (license: License, email: string | undefined) =>
  email === undefined || normalizeEmail(email) === normalizeEmail(license.email);

export async function validate(
  db: pg.Pool,
  input: { licenseKey: string; machineId?: string; email?: string },
  now = new Date(),
) {
  const license = await findLicense(db, input.licenseKey);
  if (!usable(license, now)) {
    return {
      valid: false,
      activated: false,
      message: 'License key not found or inactive',
      type: null,
      expiresAt: null,
    };
  }
  if (!sameOwner(license, input.email)) {
    return { valid: false, activated: false, message: 'Email mismatch', type: null, expiresAt: null };
  }
  const activated = input.machineId === undefined ? undefined : license.machineIds.includes(input.machineId);
  if (activated) {
    await db.query(
      'UPDATE license_server.activations SET last_seen_at = now() WHERE license_id = $1 AND machine_id = $2',
      [license.id, input.machineId],
    );
  }
  return {
    valid: true,
    ...(activated === undefined ? {} : { activated }),
    message: 'License is valid',
    type: license.type,
    expiresAt: license.expiresAt?.toISOString() ?? null,
  };
}

/**
 * Adds the machine to the license's deployments. The license row is locked for the count and the
 * insert, so parallel activations never exceed max_deployments.
 */
export async function activate(
  db: pg.Pool,
  input: { licenseKey: string; machineId: string; email: string },
  now = new Date(),
) {
  return withTransaction(db, async (client) => {
    // Lock first, then read the activations in a statement of their own: under READ COMMITTED it
    // sees every activation committed before the lock was granted.
    await client.query('SELECT 1 FROM license_server.licenses WHERE license_key = $1 FOR UPDATE', [
      normalizeKey(input.licenseKey),
    ]);
    const license = await findLicense(client, input.licenseKey);
    if (!usable(license, now)) return { success: false, message: 'Invalid license' };
    if (!sameOwner(license, input.email)) return { success: false, message: 'Email mismatch' };
    if (license.machineIds.includes(input.machineId)) return { success: true, message: 'Already activated' };
    if (license.machineIds.length >= license.maxDeployments) {
      return {
        success: false,
        message: 'Deployment limit reached. Deactivate an existing deployment first.',
      };
    }
    await client.query('INSERT INTO license_server.activations (license_id, machine_id) VALUES ($1, $2)', [
      license.id,
      input.machineId,
    ]);
    await client.query(
      'UPDATE license_server.licenses SET activated_at = coalesce(activated_at, now()) WHERE id = $1',
      [license.id],
    );
    return { success: true, message: 'License activated' };
  });
}

export async function deactivate(
  db: pg.Pool,
  input: { licenseKey: string; machineId: string; email?: string },
) {
  const license = await findLicense(db, input.licenseKey);
  if (license?.status !== 'active') return { success: false, message: 'Invalid license' };
  if (!sameOwner(license, input.email)) return { success: false, message: 'Email mismatch' };
  const { rowCount } = await db.query(
    'DELETE FROM license_server.activations WHERE license_id = $1 AND machine_id = $2',
    [license.id, input.machineId],
  );
  return rowCount
    ? { success: true, message: 'Deployment deactivated' }
    : { success: false, message: 'This machine is not activated for the license' };
}

export async function revoke(db: pg.Pool, licenseKey: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE license_server.licenses SET status = 'revoked' WHERE license_key = $1`,
    [normalizeKey(licenseKey)],
  );
  return rowCount === 1;
}
