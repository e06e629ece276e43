import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { granted } from '#lib/access';
import {
  BUNDLE_PARTS,
  BUNDLES,
  type BundleLimits,
  bundleClock,
  claimingBundles,
  expiry,
  loadPart,
  storePart,
} from '#lib/admin/bundle';
import { type BundleManifest, BundleReader, checkPart, verifiedManifest } from '#lib/admin/bundle-format';
import { copyIn, fillSchema } from '#lib/admin/clone';
import { fingerprintOf, schemaFingerprint } from '#lib/admin/drift';
import { retarget, type SchemaDdl, type TableData } from '#lib/admin/schema-ddl';
import { createSchema, deleteSchema } from '#lib/admin/schemas';
import { type AuditDraft, nothingChanged } from '#lib/db/audit-log';
import { assertTenantSchema, type SchemaAccess } from '#lib/db/executor';
import { quoteIdent } from '#lib/db/identifiers';
import { sqlState } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { LOCK_WAIT } from '#lib/db/schema-roles';
import { inTransaction } from '#lib/db/transaction';
import { ApiError, BadRequest, Forbidden, NotFound, PayloadTooLarge } from '#lib/errors';
import { loggedError, logger } from '#lib/log';
import { ownerOf, type Principal } from '#lib/principal';

/**
 * A bundle (lib/admin/bundle-format) restored, sent as an import is: opened with its manifest
 * (whose signature is checked first), its parts sent in any order and as often as needed (each
 * checked against the manifest as it comes), then committed. Into a new schema, made as any
 * schema is (its own owner, login and keys), or over an existing schema of the same structure,
 * whose rows are replaced. All or nothing, in one transaction on a session of the schema's own
 * role, with the request's audit entry: nothing of the bundle, its tenant's code included, runs
 * with the admin's rights.
 */

export type RestoreMode = 'new' | 'replace';

/** Restores open into one schema at once: each stages up to IMPORT_MAX_BYTES of parts. */
export const MAX_RESTORES_PER_SCHEMA = 4;

export interface RestoreScope {
  schema: string;
  principal: Principal | undefined;
  audit: AuditDraft | undefined;
}

interface RestoreRow {
  id: string;
  schema_name: string;
  state: 'open' | 'restored';
  manifest: BundleManifest;
  options: { mode: RestoreMode };
  outcome: RestoreOutcome | null;
  expires_at: Date;
}

export interface RestoreOutcome {
  schema: string;
  mode: RestoreMode;
  from: string;
  tables: number;
  rows: number;
}

const structureDiffers = (schema: string, from: string) =>
  new ApiError(
    409,
    'Structure differs',
    `schema "${schema}" is no longer shaped as "${from}" was when the bundle was made, so its rows cannot replace the schema's: restore the bundle into a new schema ("mode": "new") and compare the two (GET /api/drift/{schema}?against=)`,
  );

async function schemaExists(db: pg.Pool, schema: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [schema]);
  return rowCount === 1;
}

/** A restore into a new schema creates it: the admin's, or a person's who may create schemas. */
export function assertMayCreate(principal: Principal | undefined): void {
  if (principal?.kind === 'key') {
    throw new Forbidden(
      'API keys cannot create schemas; restore into a new schema with the admin’s credentials',
    );
  }
  if (principal?.kind === 'person' && !granted(principal, 'schemas.create')) {
    throw new Forbidden(
      `your role (${principal.role}) may not create schemas, so cannot restore into a new one; replace a schema's rows ("mode": "replace"), or ask an owner`,
    );
  }
}

const major = (versionNum: number) => Math.floor(versionNum / 10_000);

/**
 * Refuses a bundle made on a later PostgreSQL major than this server's: its statements and COPY's
 * binary form are only read forward.
 */
async function assertNotLater(db: pg.Pool, manifest: BundleManifest): Promise<void> {
  const { rows } = await db.query<{ version: number }>(
    `SELECT pg_catalog.current_setting('server_version_num')::int AS version`,
  );
  const made = major(manifest.postgres);
  const here = major(rows[0]?.version ?? 0);
  if (made > here) {
    throw new ApiError(
      409,
      'Bundle from a later PostgreSQL',
      `the bundle was made on PostgreSQL ${made}; this server runs ${here}: restore it on PostgreSQL ${made} or later`,
    );
  }
}

/** Opens a restore of the bundle `manifest` describes into `scope.schema`: refused at once if it never could be. */
export async function openRestore(
  db: pg.Pool,
  secret: string,
  scope: RestoreScope,
  { manifest: sent, mode }: { manifest: unknown; mode: RestoreMode },
  limits: BundleLimits,
) {
  const { schema } = scope;
  assertTenantSchema(schema);
  if (mode === 'new') assertMayCreate(scope.principal);
  const manifest = verifiedManifest(secret, sent);
  await assertNotLater(db, manifest);
  if (manifest.bytes > limits.maxBytes) {
    throw new PayloadTooLarge(limits.maxBytes, ' in one bundle (IMPORT_MAX_BYTES)');
  }
  const exists = await schemaExists(db, schema);
  if (mode === 'new' && schema !== manifest.schema && manifest.selfNamed.length > 0) {
    throw new ApiError(
      409,
      'Bundle names its schema',
      `the bundle's code names its own schema "${manifest.schema}" (${manifest.selfNamed.slice(0, 3).join('; ')}), so it restores as a new schema only under that name: delete or rename that schema first, or make the code name its objects unqualified and back it up again`,
    );
  }
  if (mode === 'new' && exists) {
    throw new ApiError(
      409,
      'Schema exists',
      `schema "${schema}" exists: name a new one, or replace its rows ("mode": "replace")`,
    );
  }
  if (mode === 'replace') {
    if (!exists)
      throw new NotFound(
        'Schema not found',
        `schema "${schema}" does not exist; restore into it with "mode": "new"`,
      );
    if ((await schemaFingerprint(db, schema)) !== manifest.fingerprint)
      throw structureDiffers(schema, manifest.schema);
    await assertNoForcedRls(db, schema);
  }
  const id = randomUUID();
  const expiresAt = expiry(limits);
  await withTransaction(
    db,
    async (client) => {
      await claimingBundles(client);
      const { rows: open } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${BUNDLES} WHERE schema_name = $1 AND kind = 'restore' AND state = 'open'`,
        [schema],
      );
      if ((open[0]?.n ?? 0) >= MAX_RESTORES_PER_SCHEMA) {
        throw new ApiError(
          409,
          'Too many restores',
          `schema "${schema}" has ${MAX_RESTORES_PER_SCHEMA} restores open: commit or abandon one (DELETE /api/restores/{id}) first`,
        );
      }
      await client.query(
        `INSERT INTO ${BUNDLES} (id, kind, schema_name, owner, state, manifest, options, created_at, expires_at)
         VALUES ($1, 'restore', $2, $3, 'open', $4, $5, $6, $7)`,
        [
          id,
          schema,
          ownerOf(scope.principal),
          JSON.stringify(manifest),
          JSON.stringify({ mode }),
          new Date(bundleClock.now()),
          expiresAt,
        ],
      );
    },
    { audit: scope.audit },
  );
  return {
    id,
    schema,
    mode,
    from: manifest.schema,
    parts: manifest.parts.length,
    expiresAt: expiresAt.toISOString(),
  };
}

async function restoreSession(client: pg.ClientBase | pg.Pool, id: string, scope: RestoreScope, lock = '') {
  const { rows } = await client.query<RestoreRow>(
    `SELECT id, schema_name, state, manifest, options, outcome, expires_at FROM ${BUNDLES}
      WHERE id = $1 AND schema_name = $2 AND kind = 'restore' AND owner = $3 AND expires_at >= $4 ${lock}`,
    [id, scope.schema, ownerOf(scope.principal), new Date(bundleClock.now())],
  );
  if (!rows[0]) {
    throw new NotFound(
      'Restore not found',
      `no restore ${id} of yours into schema "${scope.schema}": it expired, or was never opened`,
    );
  }
  return rows[0];
}

/**
 * The restore, held by this transaction: alone (to commit or abandon it), or beside others sending
 * parts (`shared`: parts travel in parallel). What it cannot take at once answers 409 at once.
 */
async function held(
  client: pg.ClientBase,
  id: string,
  scope: RestoreScope,
  shared = false,
): Promise<RestoreRow> {
  try {
    return await restoreSession(client, id, scope, shared ? 'FOR KEY SHARE NOWAIT' : 'FOR UPDATE NOWAIT');
  } catch (error) {
    if (sqlState(error) !== '55P03') throw error;
    throw new ApiError(
      409,
      'Restore busy',
      shared
        ? `restore ${id} is being committed or abandoned; ask for it again shortly`
        : `restore ${id} is being committed, or a part of it sent, right now; ask again once that is done`,
    );
  }
}

const restored = (id: string) =>
  new ApiError(409, 'Restore committed', `restore ${id} was committed; open a new one to restore again`);

/** How far a part moves its restore's expiry on, at least: a minute, or half a shorter time to live. */
const expiryStep = (limits: BundleLimits) => Math.min(60_000, (limits.ttlSeconds * 1000) / 2);

/** Takes part `n` of the bundle: refused when it is not the manifest's part `n`. */
export async function putRestorePart(
  db: pg.Pool,
  id: string,
  scope: RestoreScope,
  n: number,
  bytes: Buffer,
  limits: BundleLimits,
) {
  return withTransaction(
    db,
    async (client) => {
      // Shared with the other parts' (a row's KEY SHARE lets each update its expiry in turn).
      const found = await held(client, id, scope, true);
      if (found.state !== 'open') throw restored(id);
      checkPart(found.manifest, n, bytes);
      await storePart(client, id, n, bytes);
      // Kept open while parts come; moved on at most once a minute, so parts sent side by side
      // seldom wait for one another's update of the row.
      const until = expiry(limits);
      await client.query(`UPDATE ${BUNDLES} SET expires_at = $2 WHERE id = $1 AND expires_at < $3`, [
        id,
        until,
        new Date(until.getTime() - expiryStep(limits)),
      ]);
      return { part: n, bytes: bytes.length, ...(await partsOf(client, found)) };
    },
    { audit: scope.audit },
  );
}

async function partsOf(client: pg.ClientBase | pg.Pool, found: RestoreRow) {
  const { rows } = await client.query<{ part: number }>(
    `SELECT part FROM ${BUNDLE_PARTS} WHERE bundle_id = $1 ORDER BY part`,
    [found.id],
  );
  const have = new Set(rows.map((row) => row.part));
  const missing = found.manifest.parts.map((_, i) => i + 1).filter((n) => !have.has(n));
  return { received: have.size, missing };
}

export async function restoreStatus(db: pg.Pool, id: string, scope: RestoreScope) {
  const found = await restoreSession(db, id, scope);
  return {
    id,
    schema: found.schema_name,
    mode: found.options.mode,
    from: found.manifest.schema,
    state: found.state,
    parts: found.manifest.parts.length,
    ...(found.state === 'open'
      ? await partsOf(db, found)
      : { received: found.manifest.parts.length, missing: [] }),
    expiresAt: found.expires_at.toISOString(),
    ...(found.outcome && { outcome: found.outcome }),
  };
}

/** Abandons an open restore: its parts are deleted. */
export async function abandonRestore(db: pg.Pool, id: string, scope: RestoreScope) {
  return withTransaction(
    db,
    async (client) => {
      const found = await held(client, id, scope);
      if (found.state !== 'open') throw restored(id);
      await client.query(`DELETE FROM ${BUNDLES} WHERE id = $1`, [id]);
      return { success: true, message: `Restore ${id} abandoned; its parts are deleted` };
    },
    { audit: scope.audit },
  );
}

export interface CommitInput {
  /** The new schema's login password ("mode": "new"). */
  password?: string;
}

/**
 * Restores the bundle: every part there and checked, then all or nothing. Committed once: sent
 * again, the same answer. Held (FOR UPDATE) while it runs, so a second commit meanwhile is refused.
 * Should the process die after the schema's transaction committed and before the restore is marked
 * so, the restore stays open: committed again, a replace writes the same rows again, and a new
 * schema answers 409 (it exists).
 */
export async function commitRestore(
  db: pg.Pool,
  secret: string,
  id: string,
  scope: RestoreScope,
  { password }: CommitInput,
  accessTo: (schema: string) => Promise<SchemaAccess>,
): Promise<RestoreOutcome> {
  return withTransaction(db, async (client) => {
    const found = await held(client, id, scope);
    if (found.state === 'restored' && found.outcome) {
      nothingChanged(scope.audit);
      return found.outcome;
    }
    const { missing } = await partsOf(client, found);
    if (missing.length > 0) {
      throw new ApiError(
        409,
        'Parts missing',
        `restore ${id} lacks parts ${missing.slice(0, 20).join(', ')}${missing.length > 20 ? ', ...' : ''}: send them, then commit`,
      );
    }
    // Parts are read on the connection that holds the restore (Lambda's pool is two wide).
    const reader = new BundleReader(
      found.manifest,
      async (n) => (await loadPart(client, id, n)) ?? Buffer.alloc(0),
    );
    const mode = found.options.mode;
    let rows: number;
    let tables: RestoreTable[];
    try {
      const { ddl } = await reader.header();
      tables = tablesOf(ddl, found.manifest);
      rows =
        mode === 'new'
          ? await restoreNew(db, secret, scope, password, ddl, tables, reader, accessTo)
          : await replaceRows(scope, found.manifest, ddl, tables, reader, accessTo);
    } finally {
      // Before the connection goes back: no part loads on it after.
      await reader.close();
    }
    const outcome: RestoreOutcome = {
      schema: scope.schema,
      mode,
      from: found.manifest.schema,
      tables: tables.length,
      rows,
    };
    await client.query(`UPDATE ${BUNDLES} SET state = 'restored', outcome = $2 WHERE id = $1`, [
      id,
      JSON.stringify(outcome),
    ]);
    await client.query(`DELETE FROM ${BUNDLE_PARTS} WHERE bundle_id = $1`, [id]);
    return outcome;
  });
}

interface RestoreTable {
  data: TableData;
  rows: number;
  bytes: number;
}

/** The header's tables with the manifest's counts, which must name the same tables in the same order. */
function tablesOf(ddl: SchemaDdl, manifest: BundleManifest): RestoreTable[] {
  if (ddl.tables.length !== manifest.tables.length) {
    throw new BadRequest('Bundle refused', 'the bundle’s header and manifest list other tables');
  }
  return ddl.tables.map((data, i) => {
    const counted = manifest.tables[i];
    if (counted?.table !== data.table) {
      throw new BadRequest('Bundle refused', 'the bundle’s header and manifest list other tables');
    }
    return { data, rows: counted.rows, bytes: counted.bytes };
  });
}

/** A table's rows from the bundle into `to`'s session: refused when they are not as many as it says. */
async function rowsFrom(reader: BundleReader, to: pg.PoolClient, table: RestoreTable): Promise<number> {
  const sink = to.query(copyFrom(copyIn(table.data)));
  await pipeline(Readable.from(reader.take(table.bytes)), sink);
  if (sink.rowCount !== table.rows) {
    throw new BadRequest(
      'Bundle refused',
      `table ${table.data.table} came with ${sink.rowCount} rows, the manifest says ${table.rows}`,
    );
  }
  return sink.rowCount;
}

/** Makes the schema, then fills it from the bundle as its own role; deletes it again should that fail. */
async function restoreNew(
  db: pg.Pool,
  secret: string,
  scope: RestoreScope,
  password: string | undefined,
  ddl: SchemaDdl,
  tables: RestoreTable[],
  reader: BundleReader,
  accessTo: (schema: string) => Promise<SchemaAccess>,
): Promise<number> {
  if (password === undefined) {
    throw new BadRequest('Password required', 'a restore into a new schema needs "password", its login’s');
  }
  assertMayCreate(scope.principal);
  const schemaName = scope.schema;
  await createSchema(db, secret, { schemaName, password }, undefined);
  const named = {
    ...ddl,
    before: retarget(ddl.before, schemaName),
    after: retarget(ddl.after, schemaName),
  };
  const byName = new Map(tables.map((table) => [table.data.table, table]));
  try {
    const target = await accessTo(schemaName);
    const rows = await target.run((to) =>
      inTransaction(
        to,
        async () => {
          const count = await fillSchema(to, schemaName, named, (session, data) =>
            rowsFrom(reader, session, byName.get(data.table) as RestoreTable),
          );
          await reader.end();
          return count ?? 0;
        },
        { audit: scope.audit },
      ),
    );
    return rows;
  } catch (error) {
    await deleteSchema(db, { schemaName, cascade: true }, undefined).catch((cleanup: unknown) =>
      logger.error('a failed restore left its schema behind', {
        schema: schemaName,
        error: loggedError(cleanup),
      }),
    );
    throw error;
  }
}

const TRIGGER_STATES: Record<string, string> = { O: 'ENABLE', R: 'ENABLE REPLICA', A: 'ENABLE ALWAYS' };

/**
 * Replaces the schema's rows with the bundle's, in one transaction as the schema's role: the
 * structure must still be the bundle's (its fingerprint). Its triggers are off while rows come in
 * (a tenant's audit trigger would log the restore as new rows), its foreign keys are dropped and
 * made again after (so tables come in any order, and are checked once), and forced row-level
 * security is lifted for the owner meanwhile (COPY refuses it). All of it as it was at commit.
 */
async function replaceRows(
  scope: RestoreScope,
  manifest: BundleManifest,
  ddl: SchemaDdl,
  tables: RestoreTable[],
  reader: BundleReader,
  accessTo: (schema: string) => Promise<SchemaAccess>,
): Promise<number> {
  const { schema } = scope;
  const target = await accessTo(schema);
  return target.run((to) =>
    inTransaction(
      to,
      async () => {
        await to.query(
          `SET LOCAL search_path TO ${quoteIdent(schema, 'schema name')}; SET LOCAL lock_timeout = '${LOCK_WAIT}'`,
        );
        if ((await fingerprintOf(to, schema)) !== manifest.fingerprint)
          throw structureDiffers(schema, manifest.schema);
        await assertNoForcedRls(to, schema);
        const held = await heldAside(to, schema);
        const list = tables.map((table) => table.data.table).join(', ');
        await to.query(
          [...held.off, ...(list ? [`TRUNCATE ${list} RESTART IDENTITY`] : [])].join(';\n') || 'SELECT 1',
        );
        let rows = 0;
        for (const table of tables) rows += await rowsFrom(reader, to, table);
        await reader.end();
        const refresh = ddl.materialized.map((view) => `REFRESH MATERIALIZED VIEW ${view}`);
        await to.query([...ddl.sequenceValues, ...refresh, ...held.on].join(';\n') || 'SELECT 1');
        return rows;
      },
      { audit: scope.audit },
    ),
  );
}

/**
 * Refuses to replace the rows of a schema with a table that forces row-level security on its
 * owner: its backup was read through those policies, so it holds only the rows they showed, and a
 * replace would delete the others.
 */
export async function assertNoForcedRls(db: pg.ClientBase | pg.Pool, schema: string): Promise<void> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND c.relforcerowsecurity ORDER BY c.relname LIMIT 5`,
    [schema],
  );
  if (rows.length > 0) {
    throw new ApiError(
      409,
      'Forced row-level security',
      `table ${rows.map((r) => `"${r.name}"`).join(', ')} of schema "${schema}" forces row-level security on its owner, so its backup holds only the rows its policies showed, and replacing its rows would delete the others: restore into a new schema instead, or lift FORCE, back up and restore again`,
    );
  }
}

/** What a replace turns off before its rows and back on after: triggers and foreign keys. */
async function heldAside(to: pg.PoolClient, schema: string): Promise<{ off: string[]; on: string[] }> {
  const { rows } = await to.query<{ kind: string; tab: string; name: string; detail: string }>(
    `WITH n AS (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1)
     SELECT 'trigger' AS kind, pg_catalog.quote_ident(c.relname) AS tab, pg_catalog.quote_ident(t.tgname) AS name,
            t.tgenabled::text AS detail
       FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_class c ON c.oid = t.tgrelid, n
      WHERE c.relnamespace = n.oid AND c.relkind IN ('r', 'p') AND NOT t.tgisinternal AND t.tgenabled <> 'D'
     UNION ALL
     SELECT 'fk', pg_catalog.quote_ident(c.relname), pg_catalog.quote_ident(k.conname), pg_catalog.pg_get_constraintdef(k.oid)
       FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid, n
      WHERE c.relnamespace = n.oid AND k.contype = 'f'
`,
    [schema],
  );
  const off: string[] = [];
  const on: string[] = [];
  for (const { kind, tab, name, detail } of rows) {
    if (kind === 'trigger') {
      off.push(`ALTER TABLE ${tab} DISABLE TRIGGER ${name}`);
      on.push(`ALTER TABLE ${tab} ${TRIGGER_STATES[detail] ?? 'ENABLE'} TRIGGER ${name}`);
    } else {
      off.push(`ALTER TABLE ${tab} DROP CONSTRAINT ${name}`);
      on.push(`ALTER TABLE ${tab} ADD CONSTRAINT ${name} ${detail}`);
    }
  }
  return { off, on };
}
