import type pg from 'pg';
import type { Migration, MigrationTarget } from '#lib/db/migrations';
import { withTransaction } from '#lib/db/pool';
import { type LeasePayload, type SignedLease, signLease } from '#lib/license/lease';
import { keyHash, keyPrefix, newLicenseKey, normalizeEmail } from './keys';

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
  {
    id: 2,
    name: 'hashed keys, lease sequence, shared rate limits',
    // Keys are kept as SHA-256 of their normalized spelling plus a display prefix. The rate-limit
    // table is rate-limiter-flexible's PostgreSQL layout, shared by every container.
    sql: `
      ALTER TABLE license_server.licenses ADD COLUMN key_hash text, ADD COLUMN key_prefix text;
      UPDATE license_server.licenses
         SET key_hash = encode(sha256(convert_to(upper(btrim(license_key)), 'UTF8')), 'hex'),
             key_prefix = left(upper(btrim(license_key)), 9);
      ALTER TABLE license_server.licenses
        ALTER COLUMN key_hash SET NOT NULL,
        ALTER COLUMN key_prefix SET NOT NULL,
        ADD CONSTRAINT licenses_key_hash_key UNIQUE (key_hash),
        DROP COLUMN license_key;
      CREATE SEQUENCE license_server.lease_seq;
      CREATE TABLE license_server.rate_limits (
        key    varchar(255) PRIMARY KEY,
        points integer NOT NULL DEFAULT 0,
        expire bigint
      )`,
  },
];

export interface License {
  id: number;
  /** `DBA-XXXXX`: the key itself is never stored, only its hash. */
  keyPrefix: string;
  keyHash: string;
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
  SELECT l.id, l.key_prefix AS "keyPrefix", l.key_hash AS "keyHash", l.email, l.status, l.type,
         l.expires_at AS "expiresAt", l.max_deployments AS "maxDeployments", l.created_at AS "createdAt",
         l.activated_at AS "activatedAt",
         coalesce((SELECT array_agg(a.machine_id ORDER BY a.first_seen_at) FROM license_server.activations a
                    WHERE a.license_id = l.id), '{}') AS "machineIds"
    FROM license_server.licenses l`;

/** Offline grace a lease grants past the server's answer (SPEC.md: 3 days trial, 7 days paid). */
const GRACE_MS = { trial: 3 * 86_400_000, paid: 7 * 86_400_000 } as const;

export interface IssueInput {
  email: string;
  type: 'trial' | 'paid';
  maxDeployments: number;
  expiresAt: Date | null;
}

/** A new license; its key is in the answer and nowhere else. */
export async function issueLicense(
  db: pg.Pool,
  input: IssueInput,
): Promise<License & { licenseKey: string }> {
  const licenseKey = newLicenseKey();
  const { rows } = await db.query<{ id: number }>(
    `INSERT INTO license_server.licenses (key_hash, key_prefix, email, type, max_deployments, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
    [
      keyHash(licenseKey),
      keyPrefix(licenseKey),
      input.email.trim(),
      input.type,
      input.maxDeployments,
      input.expiresAt,
    ],
  );
  const license = (await findById(db, rows[0]?.id ?? 0)) as License;
  return { ...license, licenseKey };
}

async function findById(db: pg.Pool | pg.ClientBase, id: number): Promise<License | undefined> {
  const { rows } = await db.query<License>(`${SELECT_LICENSE} WHERE l.id = $1`, [id]);
  return rows[0];
}

export async function findLicense(
  db: pg.Pool | pg.ClientBase,
  licenseKey: string,
): Promise<License | undefined> {
  const { rows } = await db.query<License>(`${SELECT_LICENSE} WHERE l.key_hash = $1`, [keyHash(licenseKey)]);
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

/** Signs answers when the server has a signing key (LICENSE_SERVER_SIGNING_KEY). */
export type Signer = Parameters<typeof signLease>[0] | undefined;

interface LeaseRequest {
  licenseKey: string;
  machineId?: string | undefined;
  nonce?: string | undefined;
}

/** The lease for an answer: only for a client that named its machine and sent a nonce. */
async function lease(
  db: pg.Pool | pg.ClientBase,
  signer: Signer,
  request: LeaseRequest,
  answer: Pick<LeasePayload, 'valid' | 'activated' | 'type' | 'expiresAt'>,
  now: Date,
): Promise<{ lease?: SignedLease }> {
  if (!signer || !request.machineId || !request.nonce) return {};
  // Milliseconds since 1970 times 1000, plus a counter: increasing even across a restored backup
  // (which would rewind a plain sequence, and every client would refuse answers as older).
  const { rows } = await db.query<{ seq: string }>(
    `SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint * 1000
             + nextval('license_server.lease_seq') % 1000) AS seq`,
  );
  const good = answer.valid && answer.activated && answer.type !== null;
  const notAfter = new Date(now.getTime() + (good && answer.type ? GRACE_MS[answer.type] : 0));
  return {
    lease: signLease(signer, {
      v: 1,
      nonce: request.nonce,
      keyHash: keyHash(request.licenseKey),
      machineId: request.machineId,
      serverTime: now.toISOString(),
      ...answer,
      notAfter: notAfter.toISOString(),
      seq: Number(rows[0]?.seq),
    }),
  };
}

export interface Clocked {
  now: Date;
  signer: Signer;
}

/**
 * Is the key good (and the email its owner's), and does this machine hold a slot? A machine that
 * asks is seen: its slot's `last_seen_at` moves (the heartbeat that keeps a slot from being freed).
 */
export async function validate(
  db: pg.Pool,
  input: LeaseRequest & { email?: string | undefined },
  { now, signer }: Clocked,
) {
  const license = await findLicense(db, input.licenseKey);
  const refused = async (message: string) => ({
    valid: false,
    activated: false,
    message,
    type: null,
    expiresAt: null,
    ...(await lease(db, signer, input, { valid: false, activated: false, type: null, expiresAt: null }, now)),
  });
  if (!usable(license, now)) return refused('License key not found or inactive');
  if (!sameOwner(license, input.email)) return refused('Email mismatch');
  let activated: boolean | undefined;
  if (input.machineId !== undefined) {
    const seen = await db.query(
      'UPDATE license_server.activations SET last_seen_at = $3 WHERE license_id = $1 AND machine_id = $2',
      [license.id, input.machineId, now],
    );
    activated = seen.rowCount === 1;
  }
  const expiresAt = license.expiresAt?.toISOString() ?? null;
  return {
    valid: true,
    ...(activated === undefined ? {} : { activated }),
    message: 'License is valid',
    type: license.type,
    expiresAt,
    ...(await lease(
      db,
      signer,
      input,
      { valid: true, activated: activated === true, type: license.type, expiresAt },
      now,
    )),
  };
}

/**
 * Adds the machine to the license's deployments. The license row is locked for the count and the
 * insert, so parallel activations never exceed max_deployments. When every slot is taken, slots
 * whose machine has not been seen for `staleAfterMs` are freed first, and the answer says so.
 */
export async function activate(
  db: pg.Pool,
  input: LeaseRequest & { machineId: string; email: string },
  { now, signer, staleAfterMs }: Clocked & { staleAfterMs: number },
) {
  return withTransaction(db, async (client) => {
    // Lock first, then read the activations in a statement of their own: under READ COMMITTED it
    // sees every activation committed before the lock was granted.
    await client.query('SELECT 1 FROM license_server.licenses WHERE key_hash = $1 FOR UPDATE', [
      keyHash(input.licenseKey),
    ]);
    let license = await findLicense(client, input.licenseKey);
    if (!usable(license, now)) return { success: false, message: 'Invalid license' };
    if (!sameOwner(license, input.email)) return { success: false, message: 'Email mismatch' };
    const granted = async (message: string, extra: object = {}) => ({
      success: true,
      message,
      ...extra,
      ...(await lease(
        client,
        signer,
        input,
        {
          valid: true,
          activated: true,
          type: (license as License).type,
          expiresAt: (license as License).expiresAt?.toISOString() ?? null,
        },
        now,
      )),
    });
    if (license.machineIds.includes(input.machineId)) {
      await client.query(
        'UPDATE license_server.activations SET last_seen_at = $3 WHERE license_id = $1 AND machine_id = $2',
        [license.id, input.machineId, now],
      );
      return granted('Already activated');
    }
    let released: string[] = [];
    if (license.machineIds.length >= license.maxDeployments) {
      const { rows } = await client.query<{ machine_id: string }>(
        `DELETE FROM license_server.activations WHERE license_id = $1 AND last_seen_at < $2 RETURNING machine_id`,
        [license.id, new Date(now.getTime() - staleAfterMs)],
      );
      released = rows.map((row) => row.machine_id);
      license = { ...license, machineIds: license.machineIds.filter((id) => !released.includes(id)) };
    }
    if (license.machineIds.length >= license.maxDeployments) {
      return {
        success: false,
        message: 'Deployment limit reached. Deactivate an existing deployment first.',
      };
    }
    await client.query(
      `INSERT INTO license_server.activations (license_id, machine_id, first_seen_at, last_seen_at) VALUES ($1, $2, $3, $3)`,
      [license.id, input.machineId, now],
    );
    await client.query(
      'UPDATE license_server.licenses SET activated_at = coalesce(activated_at, $2) WHERE id = $1',
      [license.id, now],
    );
    const hours = Math.round(staleAfterMs / 3_600_000);
    return granted(
      'License activated',
      released.length > 0
        ? {
            released,
            notice: `freed ${released.length} deployment slot(s) not seen for ${hours} h: ${released.join(', ')}`,
          }
        : {},
    );
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
    `UPDATE license_server.licenses SET status = 'revoked' WHERE key_hash = $1`,
    [keyHash(licenseKey)],
  );
  return rowCount === 1;
}
