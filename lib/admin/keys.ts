import { createHash, randomBytes } from 'node:crypto';
import type pg from 'pg';
import { schemaInfo } from '#lib/db/catalog';
import { ensureKeyRoles, type KeyType } from '#lib/db/key-roles';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { BadRequest, NotFound } from '#lib/errors';

/** SHA-256 suffices: keys are 256 random bits, so there is nothing to guess or stretch. */
export const hashKey = (key: string) => createHash('sha256').update(key).digest();

export const KEY_PATTERN = /^[0-9a-f]{64}$/;

export interface CreateKeyInput {
  schema: string;
  keyName: string;
  keyType: KeyType;
}

/** A new key, returned this once; only its hash and prefix are kept. */
export async function createKey(db: pg.Pool, secret: string, { schema, keyName, keyType }: CreateKeyInput) {
  const key = randomBytes(32).toString('hex');
  return withTransaction(db, async (client) => {
    await schemaInfo(client, schema);
    await ensureKeyRoles(client, secret, schema);
    try {
      const { rows } = await client.query<{ id: number; created_at: Date }>(
        `INSERT INTO _dbadmin.api_keys (schema_name, key_name, key_type, key_hash, key_prefix)
         VALUES ($1, $2, $3, $4, $5) RETURNING id, created_at`,
        [schema, keyName, keyType, hashKey(key), key.slice(0, 8)],
      );
      const row = rows[0] as { id: number; created_at: Date };
      return {
        id: row.id,
        key,
        keyPrefix: key.slice(0, 8),
        keyName,
        keyType,
        schemaName: schema,
        createdAt: row.created_at.toISOString(),
      };
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
  });
}

export async function listKeys(db: pg.Pool, schema: string) {
  await schemaInfo(db, schema);
  const { rows } = await db.query(
    `SELECT id, key_name, key_type, key_prefix, created_at, last_used_at, is_active
       FROM _dbadmin.api_keys WHERE schema_name = $1 ORDER BY id`,
    [schema],
  );
  return rows;
}

export async function deleteKey(db: pg.Pool, schema: string, keyId: number) {
  const { rows } = await db.query<{ key_hash: string }>(
    `DELETE FROM _dbadmin.api_keys WHERE schema_name = $1 AND id = $2 RETURNING encode(key_hash, 'hex') AS key_hash`,
    [schema, keyId],
  );
  const deleted = rows[0];
  if (!deleted) throw new NotFound('Key not found', `schema "${schema}" has no key with id ${keyId}`);
  // This process stops accepting the key now; others within KEY_CACHE_MS.
  keyCache.delete(deleted.key_hash);
  return { success: true, message: `Key ${keyId} deleted` };
}

export interface StoredKey {
  id: number;
  schema: string;
  keyType: KeyType;
  active: boolean;
}

/** How long another process may go on accepting a key deleted elsewhere. */
export const KEY_CACHE_MS = 5_000;
const KEY_CACHE_MAX = 10_000;
const keyCache = new Map<string, { key: StoredKey; until: number }>();

/** The active key a bearer token stands for, or undefined; cached briefly to spare the database. */
export async function resolveKey(
  db: pg.Pool,
  token: string,
  now = Date.now(),
): Promise<StoredKey | undefined> {
  if (!KEY_PATTERN.test(token)) return undefined;
  const hash = hashKey(token);
  const id = hash.toString('hex');
  const cached = keyCache.get(id);
  if (cached && cached.until > now) return cached.key;
  const key = await findKey(db, hash);
  if (!key?.active) {
    keyCache.delete(id);
    return undefined;
  }
  if (keyCache.size >= KEY_CACHE_MAX) keyCache.clear();
  keyCache.set(id, { key, until: now + KEY_CACHE_MS });
  return key;
}

async function findKey(db: pg.Pool, hash: Buffer): Promise<StoredKey | undefined> {
  const { rows } = await db.query<{ id: number; schema_name: string; key_type: KeyType; is_active: boolean }>(
    {
      name: 'dbadmin.find-key',
      text: 'SELECT id, schema_name, key_type, is_active FROM _dbadmin.api_keys WHERE key_hash = $1',
      values: [hash],
    },
  );
  const row = rows[0];
  return row && { id: row.id, schema: row.schema_name, keyType: row.key_type, active: row.is_active };
}

/** Records use in the background: at most once a minute per key, never on the request's path. */
const lastTouched = new Map<number, number>();
const pendingTouches = new Set<Promise<unknown>>();
export function touchKey(db: pg.Pool, id: number, now = Date.now()): void {
  if (now - (lastTouched.get(id) ?? 0) < 60_000) return;
  lastTouched.set(id, now);
  const write = db
    .query('UPDATE _dbadmin.api_keys SET last_used_at = now() WHERE id = $1', [id])
    .catch(() => lastTouched.delete(id))
    .finally(() => pendingTouches.delete(write));
  pendingTouches.add(write);
}

/** Resolves when the background last_used_at writes started so far are done (tests, shutdown). */
export async function settleKeyTouches(): Promise<void> {
  await Promise.all(pendingTouches);
}
