import { createHash } from 'node:crypto';
import type pg from 'pg';
import { granted, inScope, outsideScope } from '#lib/access';
import { type Config, getConfig, resultLimits } from '#lib/config';
import type { AuditDraft } from '#lib/db/audit-log';
import { quoteIdent } from '#lib/db/identifiers';
import { fromDatabaseError, isPgError } from '#lib/db/pg-errors';
import {
  discardAfterUse,
  getDatabase,
  getQueryPool,
  onClose,
  poolsUse,
  sessionPool,
  stopBackend,
  withSession,
  withTransaction,
} from '#lib/db/pool';
import { beginText } from '#lib/db/pooler';
import { currentQuotas, statementTimeoutMs } from '#lib/db/quotas';
import { CopyTooLarge, ResultTooLarge, watchWire, wireLimit } from '#lib/db/result-limits';
import {
  kindOfKey,
  type RoleKind,
  roleName,
  rolePassword,
  type SchemaRole,
  schemaRole,
} from '#lib/db/role-names';
import { prepareSchemaRole, roleReady, sessionSettings } from '#lib/db/schema-roles';
import { isNoSession, type SessionPool } from '#lib/db/session-pool';
import { BadRequest, Busy, QueryTimeout, ServiceUnavailable } from '#lib/errors';
import type { Principal } from '#lib/principal';

/**
 * Which connection a request's SQL runs on: the one place that decides it.
 *
 * - dbadmin's own SQL (catalog reads, keys, migrations, license cache): the service's pool, whose
 *   search path is pg_catalog alone (lib/db/pool).
 * - Anything that touches a schema's objects, for the admin or a key: a connection that logs in
 *   as that schema's role (lib/db/schema-roles), so code a tenant planted there runs with the
 *   schema's rights. `SET ROLE` would not do: planted code can `RESET ROLE`.
 * - The admin's ad-hoc SQL with `runAs: "admin"`: the admin's own rights, on connections that are
 *   reset after each use.
 */

/** Schemas no role of ours may act in: the database's own and dbadmin's. */
export function isSystemSchema(schema: string): boolean {
  return schema === 'information_schema' || schema.startsWith('pg_') || schema.startsWith('_');
}

export function assertTenantSchema(schema: string): void {
  if (isSystemSchema(schema)) {
    throw new BadRequest(
      'System schema',
      `schema "${schema}" belongs to PostgreSQL or dbadmin and has no role of its own to act as; the admin's SQL can read it with "runAs": "admin"`,
    );
  }
}

/** A schema as seen by one principal: where its SQL runs. */
export interface SchemaAccess {
  schema: string;
  /** dbadmin's own pool, for catalog reads (never runs tenant code). */
  catalog: pg.Pool;
  /** Runs `work` on a session of the schema's role; the session is clean again before anyone else gets it. */
  run<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T>;
  /**
   * An anon key's access: `run` gives its work a read-only transaction already open, which is rolled
   * back after it (the work must neither open nor end one).
   */
  readOnly: boolean;
  /** Cancels the statement running on one of its sessions (a result passed its limits). */
  cancel(client: pg.PoolClient): void;
  /** How long one of its statements may run: QUERY_TIMEOUT_MS, or the schema's quota when lower. */
  timeoutMs: number;
  /** The request's audit entry, when it is audited: committed with the change made through this access. */
  audit: AuditDraft | undefined;
}

/**
 * The process's session pools, one per schema role it has worked as, shared by every function's
 * bundle in it (the local host runs them all in one process), so a role's DB_POOL_MAX bounds its
 * sessions in the whole process. Never closed for being many: a pool holds connections only
 * while the process's budget lets it (lib/db/session-pool), so every tenant stays warm however
 * many there are. A pool is made again when what it logs in with changed (the secret, the
 * statement timeout a tenant's quota may lower). Only plain values, pg's own errors and
 * SessionPool's markers cross bundles through it, never an error class of ours.
 */
interface RolePool {
  pool: SessionPool;
  /** What its sessions log in with: a pool made under other settings is not reused. */
  made: string;
}
const ROLE_POOLS = Symbol.for('dbadmin.role-pools');
const processGlobal = globalThis as { [ROLE_POOLS]?: Map<string, RolePool> };
processGlobal[ROLE_POOLS] ??= new Map();
const rolePools = processGlobal[ROLE_POOLS];
onClose(async () => {
  const pools = [...rolePools.values()];
  rolePools.clear();
  await Promise.all(pools.map(({ pool }) => pool.close()));
});

/** Role preparations this bundle ran, by kind (for the metrics): ideally one per role and change of its roles. */
export const roleSetups: Record<RoleKind, number> = { exec: 0, svc: 0, anon: 0 };

function roleSettings(prepared: SchemaRole): Record<string, string> {
  const settings = Object.fromEntries(sessionSettings(prepared));
  // Quoted only when it must be, so current_setting('search_path') reads as people write it.
  if (!/^[a-z_][a-z0-9_]*$/.test(prepared.schema))
    settings.search_path = quoteIdent(prepared.schema, 'schema name');
  return settings;
}

/**
 * What a role pool's sessions log in with, as a key two bundles' configs (equal settings, other
 * objects) agree on: worked out once per config, not on every connect.
 */
const configKeys = new WeakMap<Config, string>();
function madeWith(config: Config, timeoutMs: number): string {
  let key = configKeys.get(config);
  if (key === undefined) {
    const settings = [
      config.DATABASE_URL,
      config.DBADMIN_SECRET,
      config.DB_POOL_MAX,
      config.DB_CONNECT_TIMEOUT_MS,
    ];
    key = createHash('sha256')
      .update(JSON.stringify([...settings, config.DB_PROCESS_CONNECTIONS]))
      .digest('base64url');
    configKeys.set(config, key);
  }
  return `${key}:${timeoutMs}`;
}

/** The process's pool for the role, made with these settings: the one there, or a new one. */
function poolFor(config: Config, role: SchemaRole, timeoutMs: number): SessionPool {
  const made = madeWith(config, timeoutMs);
  const known = rolePools.get(role.role);
  if (known?.made === made && !known.pool.closed) return known.pool;
  const pool = sessionPool(config, {
    applicationName: `dbadmin-${role.kind}`,
    login: { user: role.role, password: rolePassword(config.DBADMIN_SECRET, role.role) },
    settings: roleSettings(role),
    statementTimeoutMs: timeoutMs,
  });
  rolePools.set(role.role, { pool, made });
  known?.pool.close().catch(() => undefined);
  return pool;
}

/** Openings in flight in this bundle, one per role: requests that arrive together share it. */
const opening = new Map<string, Promise<SessionPool>>();

/**
 * The role's pool, once the role is known ready (lib/db/schema-roles roleReady: one read), or
 * prepared (`repair`, or not ready: made, granted, its password reset, in one transaction).
 */
function openRole(schema: string, kind: RoleKind, timeoutMs: number, repair: boolean): Promise<SessionPool> {
  const role = roleName(schema, kind);
  let pending = opening.get(role);
  if (!pending) {
    pending = readyRole(schema, kind, timeoutMs, repair).finally(() => opening.delete(role));
    opening.set(role, pending);
  }
  return pending;
}

async function readyRole(
  schema: string,
  kind: RoleKind,
  timeoutMs: number,
  repair: boolean,
): Promise<SessionPool> {
  const [config, admin] = await Promise.all([getConfig(), getDatabase()]);
  if (repair || !(await roleReady(admin, config.DBADMIN_SECRET, schema, kind))) {
    roleSetups[kind]++;
    await withTransaction(admin, (client) => prepareSchemaRole(client, config.DBADMIN_SECRET, schema, kind));
  }
  return poolFor(config, schemaRole(schema, kind), timeoutMs);
}

/**
 * The login failed in PostgreSQL: refused (the role gone, disabled, its password changed), or the
 * session could not start as prepared (its membership of the owner taken away): worth a repair.
 * Not the server being full (53300), which a repair cannot help; nor a transaction pooler that is
 * full or cannot reach the server, which answers 08P01 for everything: of its refusals only a
 * failed authentication (PgBouncer's words) is the login's.
 */
const loginFailed = (error: unknown) =>
  isPgError(error) &&
  error.code !== '53300' &&
  (error.code !== '08P01' || /authentication failed|no such user/.test(error.message));

/** No session came in time (busy), or its pool closed meanwhile (made again: try once more). */
function busy(error: unknown): unknown {
  if (!isNoSession(error)) return error;
  const why: Record<typeof error.full, string> = {
    login: "every session this process may hold for the schema's role is in use",
    process: 'every database connection this process may hold is in use',
    closed: "the schema's sessions were being made again (a key deleted, a quota changed)",
  };
  return new Busy(why[error.full]);
}

/**
 * A session of the schema's role, from the process's pool for it (made after the role is known
 * ready); a failed login is repaired once, then reported as a 503 (a tenant can change its role's
 * password in a loop, or its key was deleted this very moment). A pool closed under the request
 * (a key deleted, the pool made again) is looked up again.
 */
async function connect(schema: string, kind: RoleKind, timeoutMs: number): Promise<pg.PoolClient> {
  const config = await getConfig();
  let repaired = false;
  for (let attempt = 1; ; attempt++) {
    try {
      return await (await currentPool(config, schema, kind, timeoutMs)).connect();
    } catch (error) {
      if (isNoSession(error) && error.full === 'closed' && attempt < 3) continue;
      if (!loginFailed(error)) throw busy(error);
      if (repaired) throw loginRefused(schema, error);
      repaired = true;
      await openRole(schema, kind, timeoutMs, true);
    }
  }
}

/** The process's pool for the role as these settings make it, or one made after the role is known ready. */
async function currentPool(config: Config, schema: string, kind: RoleKind, timeoutMs: number) {
  const known = rolePools.get(roleName(schema, kind));
  if (known?.made === madeWith(config, timeoutMs) && !known.pool.closed) return known.pool;
  return openRole(schema, kind, timeoutMs, false);
}

const loginRefused = (schema: string, error: unknown) =>
  new ServiceUnavailable(
    'Database login refused',
    `the database refused the login of schema "${schema}"'s role; try again`,
    error,
  );

/** Where a principal's work in a schema runs: the admin as `<schema>_exec`, a key as its role. */
export async function schemaAccess(
  principal: Principal | undefined,
  schema: string,
  signal?: AbortSignal,
  audit?: AuditDraft,
): Promise<SchemaAccess> {
  assertTenantSchema(schema);
  if (principal?.kind === 'person' && !inScope(principal, schema)) throw outsideScope(principal, schema);
  const kind: RoleKind = principal?.kind === 'key' ? kindOfKey(principal.keyType) : 'exec';
  // A person who may not write works as an anon key does: read-only, always rolled back.
  const readOnly = kind === 'anon' || (principal?.kind === 'person' && !granted(principal, 'write'));
  const [catalog, config] = await Promise.all([getDatabase(), getConfig()]);
  const timeoutMs = statementTimeoutMs(await currentQuotas(catalog), schema, config.QUERY_TIMEOUT_MS);
  return {
    schema,
    catalog,
    readOnly,
    timeoutMs,
    audit,
    run: async (work) =>
      guarded(
        catalog,
        timeoutMs,
        () => connect(schema, kind, timeoutMs),
        readOnly ? rolledBack(work) : work,
        signal,
      ),
    cancel: (client) => stopBackend(catalog, client, 'cancel'),
  };
}

/**
 * An anon key's work, in a read-only transaction that is always rolled back, never committed:
 * before PostgreSQL 17 a READ ONLY transaction may still create large objects (lo_create,
 * lo_from_bytea), and on every major it may queue notifications (pg_notify, NOTIFY) that a commit
 * would deliver. Whatever the key's SQL, or code planted where it reads, did ends with its request.
 */
function rolledBack<T>(work: (client: pg.PoolClient) => Promise<T>) {
  return async (client: pg.PoolClient): Promise<T> => {
    await client.query(beginText(client, 'BEGIN READ ONLY'));
    try {
      return await work(client);
    } finally {
      if (client.getTransactionStatus() !== 'I') await client.query('ROLLBACK');
    }
  };
}

/**
 * Runs work on a session that may run code we did not write, under every ceiling a tenant
 * cannot raise: the session is terminated from outside past the query timeout (planted code can
 * switch statement_timeout off) or when the request is ending (a cancel can be caught); its
 * socket is cut past the wire limit (a single huge row, RETURNING, NOTICE or error); and errors
 * raised in it are the tenant's, so 400s.
 */
async function guarded<T>(
  catalog: pg.Pool,
  timeoutMs: number,
  open: () => Promise<pg.PoolClient>,
  work: (client: pg.PoolClient) => Promise<T>,
  signal: AbortSignal | undefined,
): Promise<T> {
  // A request that has already ended (it waited for a connection) starts nothing.
  const ended = () => new QueryTimeout("ran longer than the function's time allows");
  if (signal?.aborted) throw ended();
  const client = await open();
  if (signal?.aborted) {
    client.release();
    throw ended();
  }
  const terminate = () => stopBackend(catalog, client, 'terminate');
  let ending = false;
  const onAbort = () => {
    ending = true;
    terminate();
  };
  signal?.addEventListener('abort', onAbort, { once: true });
  const limits = resultLimits(await getConfig());
  let cutOff = false;
  let copyCutOff = false;
  try {
    return await withSession(
      client,
      (session) =>
        watchWire(
          session,
          wireLimit(limits),
          (copying) => {
            cutOff = true;
            copyCutOff = copying;
            discardAfterUse(session);
          },
          () => work(session),
        ),
      { afterMs: timeoutMs + 1000, terminate },
    );
  } catch (error) {
    if (copyCutOff) throw new CopyTooLarge();
    if (cutOff) throw new ResultTooLarge('QUERY_MAX_BYTES', limits.maxBytes);
    if (ending) throw new QueryTimeout("ran longer than the function's time allows", error);
    throw fromTenantCode(error);
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * An error raised in a schema's session is the tenant's doing (its SQL, or code it planted): a
 * 400 with PostgreSQL's message, whatever its SQLSTATE. Codes that would mean our own login was
 * refused (28) or the database went away (08, 53, 57P0x) are the tenant's too when raised by
 * code (they carry a context).
 */
function fromTenantCode(error: unknown): unknown {
  if (!isPgError(error)) return error;
  const mapped = fromDatabaseError(error);
  const raisedByCode = Boolean((error as { where?: string }).where);
  if (mapped && !error.code.startsWith('28') && (mapped.status < 500 || !raisedByCode)) return error;
  return new BadRequest('Query failed', `${error.message} (SQLSTATE ${error.code})`, error);
}

/**
 * Where the admin's ad-hoc SQL runs with the admin's own rights (`runAs: "admin"`): the query
 * pool, whose sessions are reset after each use like a schema role's.
 */
export async function adminAccess(
  schema: string,
  signal?: AbortSignal,
  audit?: AuditDraft,
): Promise<SchemaAccess> {
  const [catalog, pool, config] = await Promise.all([getDatabase(), getQueryPool(), getConfig()]);
  return {
    schema,
    catalog,
    readOnly: false,
    timeoutMs: config.QUERY_TIMEOUT_MS,
    audit,
    run: async (work) =>
      guarded(
        catalog,
        config.QUERY_TIMEOUT_MS,
        () => pool.connect().catch((error) => Promise.reject(busy(error))),
        work,
        signal,
      ),
    cancel: (client) => stopBackend(catalog, client, 'cancel'),
  };
}

/** The schema roles' pools of this bundle, together (for the metrics). */
export const rolePoolUse = () =>
  poolsUse(
    'schema roles',
    [...rolePools.values()].map(({ pool }) => pool),
  );

/** Forgets this process's pool for the role: the next request logs in afresh (key deleted). */
export async function dropRolePool(role: string): Promise<void> {
  const known = rolePools.get(role);
  rolePools.delete(role);
  await known?.pool.close();
}
