import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import {
  BUNDLE_FORMAT,
  BUNDLE_VERSION,
  type BundleManifest,
  type BundleTable,
  PART_BYTES,
  PartWriter,
  sign,
} from '#lib/admin/bundle-format';
import { beginSnapshotRead, copyOut, holdTables } from '#lib/admin/clone';
import { fingerprintOf } from '#lib/admin/drift';
import { OPEN_TARGET, readSchemaDdl } from '#lib/admin/schema-ddl';
import type { AuditDraft } from '#lib/db/audit-log';
import { assertTenantSchema, type SchemaAccess } from '#lib/db/executor';
import { quoteLiteral } from '#lib/db/identifiers';
import { INTERNAL_SCHEMA } from '#lib/db/own-schemas';
import { withClient, withTransaction } from '#lib/db/pool';
import { streamingCopy } from '#lib/db/result-limits';
import { inPlainTransaction } from '#lib/db/transaction';
import { Download } from '#lib/download';
import { ApiError, NotFound, PayloadTooLarge } from '#lib/errors';
import { ownerOf, type Principal } from '#lib/principal';

/**
 * A tenant's backup: its structure and rows in one snapshot, as a bundle (lib/admin/bundle-format)
 * kept in dbadmin's own tables until it expires, downloaded part by part (each fits a Lambda
 * response). Read on a session of the schema's own role, the principal's as any of its reads,
 * from the schema's objects alone: no whole-catalog read as `pg_dump -n` does. Restoring one is
 * lib/admin/restore.
 */

export const BUNDLES = `${INTERNAL_SCHEMA}.bundles`;
export const BUNDLE_PARTS = `${INTERNAL_SCHEMA}.bundle_parts`;
/** Parts of one bundle, at most: 40 GB, far past IMPORT_MAX_BYTES. */
export const BUNDLE_PARTS_MAX = 10_000;
/** The oid of the schema named by `$2`: a backup is its schema's, not its name's. */
const SCHEMA_OID = '(SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = $2::text)';

/** Backups of one schema kept at once: each may hold up to BundleLimits.maxBytes. */
export const MAX_BACKUPS_PER_SCHEMA = 4;

/** The service's clock for expiry; tests move it (never a real wait). */
export const bundleClock = { now: (): number => Date.now() };
/** How large a backup's parts are: PART_BYTES; tests cut small ones. */
export const bundleParts = { bytes: PART_BYTES };

export interface BundleLimits {
  /** A bundle this long unread or unsent expires. */
  ttlSeconds: number;
  /** The most one bundle holds. */
  maxBytes: number;
}

export const bundleLimits = (config: { IMPORT_SESSION_TTL_SECONDS: number; IMPORT_MAX_BYTES: number }) => ({
  ttlSeconds: config.IMPORT_SESSION_TTL_SECONDS,
  maxBytes: config.IMPORT_MAX_BYTES,
});

export const expiry = (limits: BundleLimits) => new Date(bundleClock.now() + limits.ttlSeconds * 1000);

/** Deletes every bundle past its expiry, with its parts; one another transaction holds waits for a later sweep. */
export async function removeExpiredBundles(db: pg.ClientBase | pg.Pool): Promise<void> {
  await db.query(
    `DELETE FROM ${BUNDLES} WHERE id IN (
       SELECT id FROM ${BUNDLES} WHERE expires_at < $1 FOR UPDATE SKIP LOCKED)`,
    [new Date(bundleClock.now())],
  );
}

/**
 * Before a bundle is counted against its schema's cap and claimed, in the caller's transaction:
 * one claim at a time, so the count cannot be raced past (as an import's open,
 * lib/admin/import-sessions), and the expired ones swept first.
 */
export async function claimingBundles(client: pg.ClientBase): Promise<void> {
  await client.query(`LOCK TABLE ${BUNDLES} IN SHARE UPDATE EXCLUSIVE MODE`);
  await removeExpiredBundles(client);
}

/** Stores part `n` of bundle `id`; sent again, it replaces itself. */
export const storePart = (db: pg.Pool | pg.ClientBase, id: string, n: number, bytes: Buffer) =>
  db.query(
    `INSERT INTO ${BUNDLE_PARTS} (bundle_id, part, bytes) VALUES ($1, $2, $3)
     ON CONFLICT (bundle_id, part) DO UPDATE SET bytes = EXCLUDED.bytes`,
    [id, n, bytes],
  );

/** COPY's binary form: its signature, flags and header extension length, then each row. */
const COPY_SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const COPY_HEADER_BYTES = COPY_SIGNATURE.length + 8;

/**
 * Part `n` of bundle `id`, its bytes; undefined when it is not there. Read by COPY in binary: the
 * bytes as they are stored, four times faster than PostgreSQL's base64 of them (the pools hand
 * bytea over as text, for JSON answers).
 */
export async function loadPart(client: pg.ClientBase, id: string, n: number): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  const sql = `COPY (SELECT bytes FROM ${BUNDLE_PARTS} WHERE bundle_id = ${quoteLiteral(id)} AND part = ${Number(n)})
               TO STDOUT (FORMAT binary)`;
  for await (const chunk of client.query(copyTo(sql))) chunks.push(Buffer.from(chunk as Buffer));
  return onlyValue(Buffer.concat(chunks));
}

/** The one bytea of a binary COPY of at most one row: undefined for no row or NULL. */
function onlyValue(copy: Buffer): Buffer | undefined {
  const unexpected = () => new Error(`COPY answered ${copy.length} bytes that are not one bytea`);
  if (copy.length < COPY_HEADER_BYTES + 2 || !copy.subarray(0, COPY_SIGNATURE.length).equals(COPY_SIGNATURE))
    throw unexpected();
  let at = COPY_HEADER_BYTES + copy.readUInt32BE(COPY_HEADER_BYTES - 4);
  const fields = copy.readInt16BE(at);
  if (fields === -1) return undefined; // the trailer: no row
  if (fields !== 1) throw unexpected();
  const length = copy.readInt32BE(at + 2);
  at += 6;
  if (length < 0) return undefined;
  if (at + length > copy.length) throw unexpected();
  return copy.subarray(at, at + length);
}

export interface BackupSummary {
  id: string;
  schema: string;
  state: 'writing' | 'ready';
  createdAt: string;
  expiresAt: string;
  tables?: number;
  rows?: number;
  bytes?: number;
  parts?: number;
}

interface BundleRow {
  id: string;
  schema_name: string;
  state: 'writing' | 'ready';
  manifest: BundleManifest | null;
  created_at: Date;
  expires_at: Date;
}

const summaryOf = (row: BundleRow): BackupSummary => ({
  id: row.id,
  schema: row.schema_name,
  state: row.state,
  createdAt: row.created_at.toISOString(),
  expiresAt: row.expires_at.toISOString(),
  ...(row.manifest && {
    tables: row.manifest.tables.length,
    rows: row.manifest.rows,
    bytes: row.manifest.bytes,
    parts: row.manifest.parts.length,
  }),
});

/**
 * Makes a backup of the schema `access` reaches: answers its summary once every part is stored.
 * Refuses (413) a schema whose bundle would pass `limits.maxBytes`, and (409) a fifth backup of
 * one schema kept at once.
 */
export async function backupSchema(
  db: pg.Pool,
  secret: string,
  access: SchemaAccess,
  principal: Principal | undefined,
  audit: AuditDraft | undefined,
  limits: BundleLimits,
): Promise<BackupSummary> {
  const { schema } = access;
  assertTenantSchema(schema);
  const id = randomUUID();
  const createdAt = new Date(bundleClock.now());
  await withTransaction(db, async (client) => {
    await claimingBundles(client);
    // A backup of an earlier schema of this name is out of reach: not counted (deleteSchema removes them).
    const { rows } = await client.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${BUNDLES} WHERE schema_name = $1 AND schema_oid = ${SCHEMA_OID} AND kind = 'backup'`,
      [schema, schema],
    );
    if ((rows[0]?.n ?? 0) >= MAX_BACKUPS_PER_SCHEMA) {
      throw new ApiError(
        409,
        'Too many backups',
        `schema "${schema}" keeps ${MAX_BACKUPS_PER_SCHEMA} backups already: download and delete one (DELETE .../backups/{id}) first`,
      );
    }
    await client.query(
      `INSERT INTO ${BUNDLES} (id, kind, schema_name, schema_oid, owner, state, created_at, expires_at)
       VALUES ($1, 'backup', $2, ${SCHEMA_OID}, $3, 'writing', $4, $5)`,
      [id, schema, ownerOf(principal), createdAt, expiry(limits)],
    );
  });
  try {
    const manifest = await access.run((client) =>
      inPlainTransaction(client, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', () =>
        writeBundle(
          client,
          access,
          secret,
          { id, createdAt },
          (n, bytes) => storePart(db, id, n, bytes),
          limits,
        ),
      ),
    );
    const { rows } = await withTransaction(
      db,
      (client) =>
        client.query<BundleRow>(
          `UPDATE ${BUNDLES} SET state = 'ready', manifest = $2, expires_at = $3 WHERE id = $1
           RETURNING id, schema_name, state, manifest, created_at, expires_at`,
          [id, JSON.stringify(manifest), expiry(limits)],
        ),
      { audit },
    );
    if (!rows[0]) throw new NotFound('Backup not found', `backup ${id} was deleted while it was made`);
    return summaryOf(rows[0]);
  } catch (error) {
    await db.query(`DELETE FROM ${BUNDLES} WHERE id = $1`, [id]).catch(() => undefined);
    throw error;
  }
}

/** The bundle of the schema `client` works in, in its transaction's snapshot: answers the signed manifest. */
async function writeBundle(
  client: pg.PoolClient,
  access: SchemaAccess,
  secret: string,
  { id, createdAt }: { id: string; createdAt: Date },
  store: (n: number, bytes: Buffer) => Promise<unknown>,
  limits: BundleLimits,
): Promise<BundleManifest> {
  const { schema } = access;
  await beginSnapshotRead(client);
  const ddl = await readSchemaDdl(client, schema, OPEN_TARGET, true, {
    keepSelfNamed: true,
    purpose: 'backed up',
  });
  const fingerprint = await fingerprintOf(client, schema);
  const { rows: server } = await client.query<{ version: number }>(
    `SELECT pg_catalog.current_setting('server_version_num')::int AS version`,
  );
  const header = Buffer.from(`${JSON.stringify({ ddl })}\n`, 'utf8');
  if (header.length > limits.maxBytes) throw tooLargeBundle(schema, limits.maxBytes);
  await holdTables(client, ddl.tables);
  streamingCopy(client, limits.maxBytes);
  // Made once nothing before it can fail, so a failure after is its abandon()'s to clean.
  const writer = new PartWriter(async (n, bytes) => {
    await store(n, bytes);
  }, bundleParts.bytes);
  const tables: BundleTable[] = [];
  let sha256: string;
  try {
    await writer.write(header);
    for (const table of ddl.tables) {
      const before = writer.bytes;
      const rows = await copyTable(client, access, copyOut(table), writer, limits.maxBytes);
      tables.push({ table: table.table, rows, bytes: writer.bytes - before });
    }
    sha256 = await writer.end();
  } catch (error) {
    writer.abandon();
    throw error;
  }
  return sign(secret, {
    format: BUNDLE_FORMAT,
    version: BUNDLE_VERSION,
    id,
    schema,
    createdAt: createdAt.toISOString(),
    postgres: server[0]?.version ?? 0,
    fingerprint,
    selfNamed: ddl.selfNamed,
    header: header.length,
    tables,
    rows: tables.reduce((sum, table) => sum + table.rows, 0),
    bytes: writer.bytes,
    sha256,
    parts: writer.parts,
  });
}

/** One table's rows into the writer: answers how many. A bundle growing past `maxBytes` is cancelled. */
async function copyTable(
  client: pg.PoolClient,
  access: SchemaAccess,
  sql: string,
  writer: PartWriter,
  maxBytes: number,
): Promise<number> {
  const source = client.query(copyTo(sql));
  let tooLarge = false;
  try {
    for await (const chunk of source) {
      if (tooLarge) continue;
      await writer.write(chunk as Buffer);
      if (writer.bytes > maxBytes) {
        tooLarge = true;
        access.cancel(client);
      }
    }
  } catch (error) {
    if (!tooLarge) throw error;
  }
  if (tooLarge) throw tooLargeBundle(access.schema, maxBytes);
  return source.rowCount;
}

const tooLargeBundle = (schema: string, maxBytes: number) =>
  new PayloadTooLarge(
    maxBytes,
    ` in one bundle (IMPORT_MAX_BYTES): schema "${schema}" holds more; back it up with pg_dump`,
  );

const notFound = (id: string, schema: string) =>
  new NotFound(
    'Backup not found',
    `schema "${schema}" has no backup ${id}: it expired, was deleted, or never was`,
  );

async function readyBackup(db: pg.Pool, schema: string, id: string): Promise<BundleRow> {
  const { rows } = await db.query<BundleRow>(
    `SELECT id, schema_name, state, manifest, created_at, expires_at FROM ${BUNDLES}
      WHERE id = $1 AND schema_name = $2 AND schema_oid = ${SCHEMA_OID} AND kind = 'backup' AND expires_at >= $3`,
    [id, schema, new Date(bundleClock.now())],
  );
  const found = rows[0];
  if (!found) throw notFound(id, schema);
  if (found.state !== 'ready') {
    throw new ApiError(409, 'Backup not ready', `backup ${id} is still being made; ask again when it is`);
  }
  return found;
}

/** The schema's backups kept, newest first. */
export async function listBackups(db: pg.Pool, schema: string): Promise<BackupSummary[]> {
  const { rows } = await db.query<BundleRow>(
    `SELECT id, schema_name, state, manifest, created_at, expires_at FROM ${BUNDLES}
      WHERE schema_name = $2 AND schema_oid = ${SCHEMA_OID} AND kind = 'backup' AND expires_at >= $1
      ORDER BY created_at DESC, id`,
    [new Date(bundleClock.now()), schema],
  );
  return rows.map(summaryOf);
}

/** A backup's manifest: what a restore is opened with. */
export async function backupManifest(db: pg.Pool, schema: string, id: string): Promise<BundleManifest> {
  return (await readyBackup(db, schema, id)).manifest as BundleManifest;
}

/** Part `n` of a backup: compressed bytes (lib/admin/bundle-format). */
export async function backupPart(db: pg.Pool, schema: string, id: string, n: number): Promise<Download> {
  const { manifest } = await readyBackup(db, schema, id);
  const count = manifest?.parts.length ?? 0;
  const bytes = await withClient(db, (client) => loadPart(client, id, n));
  if (!bytes) throw new NotFound('No such part', `backup ${id} has parts 1 to ${count}, not ${n}`);
  return new Download(bytes, 'application/octet-stream', `${schema}-${id}.part${String(n).padStart(4, '0')}`);
}

export async function deleteBackup(db: pg.Pool, schema: string, id: string, audit: AuditDraft | undefined) {
  const { rowCount } = await withTransaction(
    db,
    (client) =>
      client.query(
        `DELETE FROM ${BUNDLES} WHERE id = $1 AND schema_name = $2 AND schema_oid = ${SCHEMA_OID} AND kind = 'backup'`,
        [id, schema],
      ),
    { audit },
  );
  if (rowCount !== 1) throw notFound(id, schema);
  return { success: true, message: `Backup ${id} of schema "${schema}" deleted` };
}
