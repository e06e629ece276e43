import type pg from 'pg';
import { shownQuota } from '#lib/admin/quotas';
import { schemaNotFound } from '#lib/db/catalog';
import { assertTenantSchema } from '#lib/db/executor';
import { INTERNAL_SCHEMA } from '#lib/db/migrations';
import { RESET_SESSION } from '#lib/db/pool';
import { currentQuotas } from '#lib/db/quotas';
import { ApiError, NotFound } from '#lib/errors';

/**
 * The operator's view of the tenants: every schema's size, tables, rows and sessions side by side
 * (one catalog query, cheap enough to refresh every few seconds with a thousand schemas), one
 * tenant's sessions with what they run, hold and block, and a way to cancel or end one of them.
 * Sizes come from the catalog (relpages: as of the last VACUUM or ANALYZE), which takes no lock,
 * where pg_total_relation_size would wait behind a tenant's ACCESS EXCLUSIVE.
 */

/** The suffixes of a schema's login roles (lib/db/schema-roles): a session's role names its tenant. */
const ROLE_OF_SCHEMA = `pg_catalog.regexp_replace(a.usename::text, '_(user|exec|svc|anon)$', '')`;

/**
 * `a` (pg_stat_activity) is a client session of a tenant's login role in this database: not the
 * service's own role, not this very session, not a parallel worker or other background process.
 */
const TENANT_CLIENT = `a.datname = pg_catalog.current_database() AND a.backend_type = 'client backend'
  AND a.usename ~ '_(user|exec|svc|anon)$' AND a.usename <> current_user
  AND a.pid <> pg_catalog.pg_backend_pid()`;

/**
 * `a` is one of the service's own pooled sessions of the schema (not the tenant's `_user` login),
 * idle since the reset it gets on its way back to the pool: its last statement is ours, not the
 * tenant's work, so it is shown as what it is. `$1` is the schema, `$2` the reset.
 */
const POOL_RESET = `a.state = 'idle' AND a.query = $2 AND a.usename::text <> $1 || '_user'`;

export const TENANT_SORTS = ['size', 'connections', 'active', 'name'] as const;
export type TenantSort = (typeof TENANT_SORTS)[number];

const ORDER: Record<TenantSort, string> = {
  size: 'size_bytes DESC, schema',
  connections: 'connections DESC, schema',
  active: 'active_seconds DESC, schema',
  name: 'schema',
};

/**
 * Per schema: its relations' pages (heap, indexes, TOAST and TOAST's indexes, each counted once),
 * its tables (a partitioned table once, not its partitions again), and its rows (the leaves', so a
 * partitioned table's own estimate is not added; live tuples where never analyzed).
 */
const SIZES = `
  SELECT c.relnamespace,
         pg_catalog.count(*) FILTER (WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition) AS tables,
         pg_catalog.sum(CASE WHEN c.reltuples >= 0 THEN c.reltuples
                             ELSE pg_catalog.pg_stat_get_live_tuples(c.oid) END)
           FILTER (WHERE c.relkind = 'r')::int8 AS rows,
         pg_catalog.sum(c.relpages::int8 + coalesce(t.relpages, 0)
           + coalesce((SELECT pg_catalog.sum(ti.relpages) FROM pg_catalog.pg_index x
                         JOIN pg_catalog.pg_class ti ON ti.oid = x.indexrelid
                        WHERE x.indrelid = c.reltoastrelid), 0))
           * pg_catalog.current_setting('block_size')::int8 AS size_bytes
    FROM pg_catalog.pg_class c
    LEFT JOIN pg_catalog.pg_class t ON t.oid = c.reltoastrelid
   WHERE c.relkind IN ('r', 'p', 'm', 'i')
   GROUP BY c.relnamespace`;

/** Per schema: its roles' sessions in this database, those running, and their statements' time so far. */
const SESSIONS = `
  SELECT ${ROLE_OF_SCHEMA} AS schema,
         pg_catalog.count(*) AS connections,
         pg_catalog.count(*) FILTER (WHERE a.state = 'active') AS active,
         coalesce(pg_catalog.sum(pg_catalog.date_part('epoch', pg_catalog.now() - a.query_start))
           FILTER (WHERE a.state = 'active'), 0)::float8 AS active_seconds
    FROM pg_catalog.pg_stat_activity a
   WHERE ${TENANT_CLIENT}
   GROUP BY 1`;

const TENANT_SCHEMAS = `
  SELECT n.oid, n.nspname::text AS schema FROM pg_catalog.pg_namespace n
   WHERE n.nspname ~ '^[A-Za-z][A-Za-z0-9_]*$' AND n.nspname !~* '^pg_'
     AND n.nspname <> 'information_schema'`;

interface TenantRow {
  schema: string;
  tables: string;
  rows: string | null;
  size_bytes: string | null;
  connections: string;
  active: string;
  active_seconds: number;
}

const tenant = (r: TenantRow) => ({
  schema: r.schema,
  tables: Number(r.tables),
  estimatedRows: Number(r.rows ?? 0),
  sizeBytes: Number(r.size_bytes ?? 0),
  connections: Number(r.connections),
  active: Number(r.active),
  activeSeconds: Math.round(r.active_seconds * 10) / 10,
});

export async function listTenants(
  db: pg.Pool,
  input: { sort: TenantSort; limit: number; schema?: string; within?: readonly string[] | null },
) {
  const { rows } = await db.query<TenantRow>(
    // Each part read once: left to the planner, pg_stat_activity (a function scan) may be read
    // again for every schema, a thousand times over.
    `WITH z AS MATERIALIZED (${SIZES}), a AS MATERIALIZED (${SESSIONS})
     SELECT s.schema, coalesce(z.tables, 0) AS tables, z.rows, z.size_bytes,
            coalesce(a.connections, 0) AS connections, coalesce(a.active, 0) AS active,
            coalesce(a.active_seconds, 0) AS active_seconds
       FROM (${TENANT_SCHEMAS}) s
       LEFT JOIN z ON z.relnamespace = s.oid
       LEFT JOIN a ON a.schema = s.schema
      WHERE ($1::text IS NULL OR s.schema = $1) AND ($3::text[] IS NULL OR s.schema = ANY ($3))
      ORDER BY ${ORDER[input.sort]} LIMIT $2`,
    [input.schema ?? null, input.limit, input.within ?? null],
  );
  const quotas = await currentQuotas(db);
  return {
    tenants: rows.map((r) => {
      const quota = quotas.get(r.schema);
      return { ...tenant(r), quota: quota ? shownQuota(quota) : null };
    }),
  };
}

interface SessionRow {
  pid: number;
  backend_start: string;
  query_start: string | null;
  role: string;
  application: string | null;
  state: string | null;
  transaction_seconds: number | null;
  query_seconds: number | null;
  wait: string | null;
  query: string | null;
  pool_reset: boolean;
  blocked_by: number[];
  locks: { mode: string; relation: string | null }[];
}

/** One tenant: its figures, its sessions (what each runs, waits for, holds, is blocked by), its keys. */
export async function describeTenant(db: pg.Pool, schema: string) {
  assertTenantSchema(schema);
  const [figures] = (await listTenants(db, { sort: 'name', limit: 1, schema })).tenants;
  if (!figures) throw schemaNotFound(schema);
  const { rows } = await db.query<SessionRow>(
    `SELECT a.pid, a.backend_start::text, a.query_start::text, a.usename::text AS role,
            a.application_name AS application, a.state,
            pg_catalog.date_part('epoch', pg_catalog.now() - a.xact_start)::float8 AS transaction_seconds,
            CASE WHEN a.state = 'active' THEN pg_catalog.date_part('epoch', pg_catalog.now() - a.query_start)::float8 END
              AS query_seconds,
            nullif(concat_ws(': ', a.wait_event_type, a.wait_event), '') AS wait,
            CASE WHEN ${POOL_RESET} THEN NULL ELSE pg_catalog.left(a.query, 200) END AS query,
            coalesce(${POOL_RESET}, false) AS pool_reset,
            pg_catalog.pg_blocking_pids(a.pid) AS blocked_by,
            (SELECT coalesce(pg_catalog.json_agg(pg_catalog.json_build_object('mode', l.mode,
                      'relation', CASE WHEN c.oid IS NOT NULL THEN rn.nspname || '.' || c.relname END)
                      ORDER BY l.mode, c.relname), '[]')
               FROM pg_catalog.pg_locks l
               LEFT JOIN pg_catalog.pg_class c ON c.oid = l.relation
               LEFT JOIN pg_catalog.pg_namespace rn ON rn.oid = c.relnamespace
              WHERE l.pid = a.pid AND l.granted AND l.locktype = 'relation') AS locks
       FROM pg_catalog.pg_stat_activity a
      WHERE ${TENANT_CLIENT} AND ${ROLE_OF_SCHEMA} = $1
      ORDER BY a.query_start NULLS LAST, a.pid`,
    [schema, RESET_SESSION],
  );
  const ours = new Set(rows.map((r) => r.pid));
  const blocked = await db.query<{ pid: number; role: string; blocked_by: number[] }>(
    `SELECT a.pid, a.usename::text AS role, pg_catalog.pg_blocking_pids(a.pid) AS blocked_by
       FROM pg_catalog.pg_stat_activity a
      WHERE a.datname = pg_catalog.current_database() AND pg_catalog.pg_blocking_pids(a.pid) && $1::int[]`,
    [[...ours]],
  );
  const keys = await db.query<{
    name: string;
    type: string;
    last_used_at: Date | null;
    active: boolean;
    requests: string;
  }>(
    `SELECT key_name AS name, key_type AS type, last_used_at, is_active AS active, request_count AS requests
       FROM ${INTERNAL_SCHEMA}.api_keys WHERE schema_name = $1 ORDER BY key_name`,
    [schema],
  );
  return {
    ...figures,
    sessions: rows.map((r) => ({
      pid: r.pid,
      backendStart: r.backend_start,
      queryStart: r.query_start,
      role: r.role,
      application: r.application,
      state: r.state,
      transactionSeconds: r.transaction_seconds === null ? null : Math.round(r.transaction_seconds * 10) / 10,
      querySeconds: r.query_seconds === null ? null : Math.round(r.query_seconds * 10) / 10,
      wait: r.wait,
      query: r.query,
      poolReset: r.pool_reset,
      blockedBy: r.blocked_by,
      locks: r.locks,
    })),
    blocking: blocked.rows
      .map((b) => ({ pid: b.pid, role: b.role, blockedBy: b.blocked_by.filter((pid) => ours.has(pid)) }))
      .filter((b) => !ours.has(b.pid)),
    keys: keys.rows.map((k) => ({
      name: k.name,
      type: k.type,
      active: k.active,
      lastUsedAt: k.last_used_at?.toISOString() ?? null,
      requests: Number(k.requests),
    })),
  };
}

/** Which session, and (to cancel) which statement of it, as the tenant's page showed them. */
export interface SessionTarget {
  pid: number;
  /** Its backend_start as the page showed it: a pid reused by a later session is not this one. */
  backendStart: string;
  /** Cancel only: its query_start, so a statement run since is not cancelled in its place. */
  queryStart?: string | undefined;
}

/**
 * Cancels the statement of one of the tenant's sessions, or ends the session: the one the page
 * showed (pid, backend start and, to cancel, statement start), checked and signalled in one
 * statement, so neither a reused pid nor a later statement is hit. Only the tenant's roles'
 * client sessions in this database: the service's own role is not a tenant's, its pooled
 * sessions of the tenant's roles may have their statement cancelled but are never ended; never a
 * superuser's, never another database's.
 */
export async function stopTenantSession(
  db: pg.Pool,
  schema: string,
  target: SessionTarget,
  how: 'cancel' | 'terminate',
) {
  assertTenantSchema(schema);
  const signal = how === 'cancel' ? 'pg_catalog.pg_cancel_backend' : 'pg_catalog.pg_terminate_backend';
  const allowed = how === 'cancel' ? "a.state = 'active'" : `a.usename::text = $3 || '_user'`;
  const { rows } = await db.query<{ role: string; superuser: boolean; allowed: boolean; ok: boolean | null }>(
    `SELECT a.usename::text AS role, r.rolsuper AS superuser, ${allowed} AS allowed,
            CASE WHEN ${allowed} AND NOT r.rolsuper THEN ${signal}(a.pid) END AS ok
       FROM pg_catalog.pg_stat_activity a JOIN pg_catalog.pg_roles r ON r.oid = a.usesysid
      WHERE a.pid = $1 AND a.backend_start::text = $2 AND ($4::text IS NULL OR a.query_start::text = $4)
        AND ${TENANT_CLIENT} AND ${ROLE_OF_SCHEMA} = $3`,
    [target.pid, target.backendStart, schema, how === 'cancel' ? (target.queryStart ?? null) : null],
  );
  const session = rows[0];
  if (!session) {
    throw new NotFound(
      'Session not found',
      `no session ${target.pid} of schema "${schema}"'s roles started at ${target.backendStart}${target.queryStart ? ` running the statement started at ${target.queryStart}` : ''}: it ended, or moved on; read the tenant again`,
    );
  }
  if (session.superuser) throw new ApiError(403, 'Forbidden', `session ${target.pid} is a superuser's`);
  if (!session.allowed) {
    throw how === 'cancel'
      ? new ApiError(409, 'Nothing to cancel', `session ${target.pid} runs no statement now`)
      : new ApiError(
          403,
          'Forbidden',
          `session ${target.pid} is the service's own (${session.role}, which runs the API's work in the schema): cancel its statement instead; only the tenant's own logins (${schema}_user) are ended`,
        );
  }
  if (session.ok !== true) {
    throw new ApiError(
      409,
      'Not signalled',
      `session ${target.pid} could not be signalled; read the tenant again`,
    );
  }
  return {
    success: true,
    message: `${how === 'cancel' ? 'cancelled the statement of' : 'ended'} session ${target.pid} (${session.role})`,
  };
}
