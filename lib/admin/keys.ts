import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { secretDigest } from '#lib/admin/passwords';
import { type AuditDraft, describeChange } from '#lib/db/audit-log';
import { assertSchemaExists } from '#lib/db/catalog';
import { dropRolePool, isSystemSchema } from '#lib/db/executor';
import { forgetKeyRecords } from '#lib/db/idempotency';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { type KeyType, kindOfKey, roleName } from '#lib/db/role-names';
import { revoking } from '#lib/db/role-revocation';
import { lockSchema } from '#lib/db/schema-locks';
import { prepareSchemaRole, resetKeyRole } from '#lib/db/schema-roles';
import { BadRequest, NotFound } from '#lib/errors';

/** SHA-256 suffices: keys are 256 random bits, so there is nothing to guess or stretch. */
/** Keys are kept as their SHA-256 digest, as every secret of 256 random bits is (lib/admin/passwords). */
export const hashKey = secretDigest;

export const KEY_PATTERN = /^[0-9a-f]{64}$/;

export interface CreateKeyInput {
  schema: string;
  keyName: string;
  keyType: KeyType;
}

function assertKeyableSchema(schema: string): void {
  if (isSystemSchema(schema)) {
    throw new BadRequest(
      'Invalid schema name',
      `schema "${schema}" belongs to PostgreSQL or dbadmin; API keys are for tenant schemas only`,
    );
  }
}

/** A new key, returned this once; only its hash and prefix are kept. Its role may log in from now on. */
export async function createKey(
  db: pg.Pool,
  secret: string,
  { schema, keyName, keyType }: CreateKeyInput,
  audit: AuditDraft | undefined,
) {
  assertKeyableSchema(schema);
  const key = randomBytes(32).toString('hex');
  return withTransaction(
    db,
    async (client) => {
      await assertSchemaExists(client, schema);
      let row: { id: number; created_at: Date };
      try {
        const { rows } = await client.query<{ id: number; created_at: Date }>(
          `INSERT INTO _dbadmin.api_keys (schema_name, key_name, key_type, key_hash, key_prefix)
         VALUES ($1, $2, $3, $4, $5) RETURNING id, created_at`,
          [schema, keyName, keyType, hashKey(key), key.slice(0, 8)],
        );
        row = rows[0] as { id: number; created_at: Date };
      } catch (error) {
        if (isPgError(error) && error.code === '23505') {
          throw new BadRequest(
            'Key name exists',
            `schema "${schema}" already has a key named "${keyName}"`,
            error,
          );
        }
        throw error;
      }
      await prepareSchemaRole(client, secret, schema, kindOfKey(keyType));
      describeChange(audit, { target: `key ${row.id} (${keyName})` });
      return {
        id: row.id,
        key,
        keyPrefix: key.slice(0, 8),
        keyName,
        keyType,
        schemaName: schema,
        createdAt: row.created_at.toISOString(),
      };
    },
    { audit },
  );
}

export async function listKeys(db: pg.Pool, schema: string) {
  await assertSchemaExists(db, schema);
  const { rows } = await db.query(
    `SELECT id, key_name, key_type, key_prefix, created_at, last_used_at, is_active
       FROM _dbadmin.api_keys WHERE schema_name = $1 ORDER BY id`,
    [schema],
  );
  return rows;
}

/**
 * Deletes the key. Its role's password is reset (whatever the key's SQL set is void) and its
 * sessions end; with the schema's last key of its type the role also loses its login.
 */
export async function deleteKey(
  db: pg.Pool,
  secret: string,
  schema: string,
  keyId: number,
  audit: AuditDraft | undefined,
) {
  const { rows } = await db.query<{ key_type: KeyType }>(
    'SELECT key_type FROM _dbadmin.api_keys WHERE schema_name = $1 AND id = $2',
    [schema, keyId],
  );
  const found = rows[0];
  const notFound = () => new NotFound('Key not found', `schema "${schema}" has no key with id ${keyId}`);
  if (!found) throw notFound();
  const kind = kindOfKey(found.key_type);
  // A session opened with a password the key's SQL set for its role, or for `_exec` (where code
  // the key planted runs for the admin), ends, before and after. So do the service's own sessions
  // of those roles: a request running right now in the schema fails once (503), and the next one
  // reconnects with the reset password.
  const role = roleName(schema, kind);
  const exec = roleName(schema, 'exec');
  await revoking(
    db,
    [role, exec],
    async (client) => {
      await lockSchema(client, schema);
      const { rowCount } = await client.query(
        'DELETE FROM _dbadmin.api_keys WHERE schema_name = $1 AND id = $2',
        [schema, keyId],
      );
      if (!rowCount) throw notFound();
      await forgetKeyRecords(client, keyId);
      await resetKeyRole(client, secret, schema, kind);
    },
    { audit },
  );
  await Promise.all([dropRolePool(role), dropRolePool(exec)]);
  return { success: true, message: `Key ${keyId} deleted` };
}

/**
 * Records use in the background, never on the request's path: every request is counted in memory,
 * and the count (with the time) is written at most once a minute per key and container. A
 * container retired between writes loses its last minute's count: request counts are a floor.
 */
const lastTouched = new Map<number, number>();
const unwritten = new Map<number, number>();
const pendingTouches = new Set<Promise<unknown>>();
export function touchKey(db: pg.Pool, id: number, now = Date.now()): void {
  unwritten.set(id, (unwritten.get(id) ?? 0) + 1);
  if (now - (lastTouched.get(id) ?? 0) < 60_000) return;
  lastTouched.set(id, now);
  writeUse(db, id);
}

function writeUse(db: pg.Pool, id: number): void {
  const count = unwritten.get(id) ?? 0;
  unwritten.delete(id);
  const write = db
    .query(
      'UPDATE _dbadmin.api_keys SET last_used_at = pg_catalog.now(), request_count = request_count + $2 WHERE id = $1',
      [id, count],
    )
    .catch(() => {
      // Counted again with the next write.
      lastTouched.delete(id);
      unwritten.set(id, (unwritten.get(id) ?? 0) + count);
    })
    .finally(() => pendingTouches.delete(write));
  pendingTouches.add(write);
}

/** Writes every count not written yet, whatever the minute (tests, a page that must be exact). */
export async function flushKeyUse(db: pg.Pool): Promise<void> {
  for (const id of [...unwritten.keys()]) writeUse(db, id);
  await settleKeyTouches();
}

/** Resolves when the background last_used_at writes started so far are done (tests, shutdown). */
export async function settleKeyTouches(): Promise<void> {
  await Promise.all(pendingTouches);
}
