import type pg from 'pg';
import { isPgError } from '#lib/db/pg-errors';
import { ApiError } from '#lib/errors';
import { loggedError, logger } from '#lib/log';

/**
 * The tenants' quotas as this process applies them (the admin sets them: lib/admin/quotas):
 * read from `_dbadmin.tenant_quotas` at most every QUOTA_READ_EVERY_MS, in the background once
 * known, so a request never waits on them but a new process's first (one quick read). The
 * storage each schema uses is measured in the background too, one schema at a time, by whichever
 * process finds its measurement older than MEASURE_EVERY_MS: never on a request's path.
 */

export interface Quota {
  statementTimeoutMs: number | null;
  connectionLimit: number | null;
  storageBytes: number | null;
  usedBytes: number | null;
  measuredAt: Date | null;
}

export const QUOTA_READ_EVERY_MS = 10_000;
export const MEASURE_EVERY_MS = 30_000;

/**
 * What a schema's tables (with their indexes and TOAST) take on disk, each measured without
 * waiting on a tenant's lock (_dbadmin.relation_size, migration 10). A table it could not
 * measure counts at the catalog's estimate, and the schema at no less than its last measurement:
 * holding a lock never makes a schema smaller than it was.
 */
const MEASURE_ONE = `
  UPDATE _dbadmin.tenant_quotas q
     SET used_bytes = CASE WHEN m.locked THEN greatest(m.bytes, q.used_bytes) ELSE m.bytes END,
         measured_at = pg_catalog.now()
    FROM (SELECT coalesce(pg_catalog.sum(CASE WHEN t.size >= 0 THEN t.size ELSE t.estimate END), 0)::int8 AS bytes,
                 coalesce(pg_catalog.bool_or(t.size < 0), false) AS locked
            FROM (SELECT _dbadmin.relation_size(c.oid) AS size,
                         (c.relpages::int8 + coalesce(toast.relpages, 0)
                          + coalesce((SELECT pg_catalog.sum(i.relpages) FROM pg_catalog.pg_index x
                                        JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
                                       WHERE x.indrelid = c.oid), 0))
                         * pg_catalog.current_setting('block_size')::int8 AS estimate
                    FROM pg_catalog.pg_class c
                    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    LEFT JOIN pg_catalog.pg_class toast ON toast.oid = c.reltoastrelid
                   WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')) t) m
   WHERE q.schema_name = $1 AND q.storage_bytes IS NOT NULL`;

/** A schema whose measurement ran past its time counts as full. */
const MEASURE_FAILED = `
  UPDATE _dbadmin.tenant_quotas SET used_bytes = greatest(used_bytes, storage_bytes), measured_at = pg_catalog.now()
   WHERE schema_name = $1 AND storage_bytes IS NOT NULL`;

/**
 * Measures one schema's storage now (the admin's change, and the background's): one statement,
 * in no transaction of its own, so nothing is held between round trips. One that runs past the
 * service's statement timeout (hundreds of tables held locked, 50 ms each) counts the schema full.
 */
export async function measureSchema(db: pg.Pool, schema: string): Promise<void> {
  try {
    await db.query(MEASURE_ONE, [schema]);
  } catch (error) {
    if (!(isPgError(error) && error.code === '57014')) throw error;
    await db.query(MEASURE_FAILED, [schema]);
  }
}

const DUE = `
  SELECT schema_name FROM _dbadmin.tenant_quotas
   WHERE storage_bytes IS NOT NULL
     AND (measured_at IS NULL OR measured_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1::float8 / 1000))
   ORDER BY measured_at NULLS FIRST LIMIT 50`;

/**
 * Measures the schemas whose measurement is older than `olderThanMs`, one statement each, so one
 * tenant's locks cost the others nothing. Two processes may both measure a schema: harmless.
 */
export async function measureDue(db: pg.Pool, olderThanMs = MEASURE_EVERY_MS): Promise<void> {
  const { rows } = await db.query<{ schema_name: string }>(DUE, [olderThanMs]);
  for (const { schema_name: schema } of rows) {
    // One schema's failure is logged and the others still measured.
    await measureSchema(db, schema).catch((error: unknown) =>
      logger.warn('quota not measured', { schema, error: loggedError(error) }),
    );
  }
}

const READ = `
  SELECT schema_name, statement_timeout_ms, connection_limit, storage_bytes, used_bytes, measured_at
    FROM _dbadmin.tenant_quotas`;

interface QuotaRow {
  schema_name: string;
  statement_timeout_ms: number | null;
  connection_limit: number | null;
  storage_bytes: number | null;
  used_bytes: number | null;
  measured_at: Date | null;
}

let known: { db: pg.Pool; quotas: Map<string, Quota>; readAt: number } | undefined;
let reading: Promise<Map<string, Quota>> | undefined;
let measuring: Promise<void> | undefined;

/** Reads every quota again, now (the admin's own change, and tests). */
export async function refreshQuotas(db: pg.Pool) {
  const { rows } = await db.query<QuotaRow>(READ);
  const quotas = new Map(
    rows.map((r) => [
      r.schema_name,
      {
        statementTimeoutMs: r.statement_timeout_ms,
        connectionLimit: r.connection_limit,
        storageBytes: r.storage_bytes === null ? null : Number(r.storage_bytes),
        usedBytes: r.used_bytes === null ? null : Number(r.used_bytes),
        measuredAt: r.measured_at,
      },
    ]),
  );
  known = { db, quotas, readAt: performance.now() };
  return quotas;
}

/** The background's turn: what is due measured, one at a time per process, never awaited. */
function measureInBackground(db: pg.Pool): void {
  if (measuring) return;
  measuring = measureDue(db)
    .catch((error: unknown) => logger.warn('quotas not measured', { error: loggedError(error) }))
    .finally(() => {
      measuring = undefined;
    });
}

/**
 * Every schema's quota; read again in the background once older than QUOTA_READ_EVERY_MS (a new
 * process waits for its first read, a quick one), and what is due measured behind it.
 */
export async function currentQuotas(db: pg.Pool): Promise<Map<string, Quota>> {
  if (known?.db === db && performance.now() - known.readAt < QUOTA_READ_EVERY_MS) return known.quotas;
  measureInBackground(db);
  reading ??= refreshQuotas(db).finally(() => {
    reading = undefined;
  });
  if (known?.db !== db) return reading;
  reading.catch((error: unknown) => logger.warn('quotas not read again', { error: loggedError(error) }));
  return known.quotas;
}

/** The statement timeout a schema's roles run under: the quota's when lower than the service's. */
export function statementTimeoutMs(quotas: Map<string, Quota>, schema: string, serviceMs: number): number {
  const quota = quotas.get(schema)?.statementTimeoutMs;
  return quota ? Math.min(quota, serviceMs) : serviceMs;
}

/** Over its storage quota as last measured: what adds data is refused (507), reads go on. */
export function overStorageQuota(quota: Quota | undefined): Quota | undefined {
  if (!quota?.storageBytes || quota.usedBytes === null) return undefined;
  return quota.usedBytes >= quota.storageBytes ? quota : undefined;
}

export class StorageQuotaExceeded extends ApiError {
  constructor(schema: string, quota: Quota) {
    super(
      507,
      'Storage quota exceeded',
      `schema "${schema}" uses ${quota.usedBytes} bytes of its ${quota.storageBytes}-byte storage quota (measured ${quota.measuredAt?.toISOString() ?? 'recently'}): reads still work; delete rows or tables, or ask the admin to raise the quota`,
    );
  }
}
