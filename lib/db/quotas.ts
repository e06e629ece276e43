import type pg from 'pg';
import { ApiError } from '#lib/errors';
import { loggedError, logger } from '#lib/log';

/**
 * The tenants' quotas as this process applies them (the admin sets them: lib/admin/quotas):
 * read from `_dbadmin.tenant_quotas` at most every QUOTA_READ_EVERY_MS, in the background once
 * known, so a request never waits on them but a new container's first. The storage each
 * schema uses is measured with that read, by whichever container finds the measurement older
 * than MEASURE_EVERY_MS: never per request.
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
 * What a schema's tables (with their indexes and TOAST) take on disk: each measured without
 * waiting on a tenant's lock (_dbadmin.relation_size, migration 10), else the catalog's estimate.
 */
export const schemaSizeSql = (schema: string) => `(
  SELECT coalesce(pg_catalog.sum(_dbadmin.relation_size(c.oid,
           (c.relpages::int8 + coalesce(t.relpages, 0)
            + coalesce((SELECT pg_catalog.sum(i.relpages) FROM pg_catalog.pg_index x
                          JOIN pg_catalog.pg_class i ON i.oid = x.indexrelid
                         WHERE x.indrelid = c.oid), 0))
           * pg_catalog.current_setting('block_size')::int8)), 0)::int8
    FROM pg_catalog.pg_class c
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_catalog.pg_class t ON t.oid = c.reltoastrelid
   WHERE n.nspname = ${schema} AND c.relkind IN ('r', 'm'))`;

const MEASURE = `
  UPDATE _dbadmin.tenant_quotas q
     SET used_bytes = ${schemaSizeSql('q.schema_name')}, measured_at = pg_catalog.now()
   WHERE q.storage_bytes IS NOT NULL
     AND (q.measured_at IS NULL OR q.measured_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1::float8 / 1000))`;

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

/**
 * Measures what is due (or everything older than `measureOlderThanMs`) and reads every quota
 * again, now: the admin's own change, and tests.
 */
export async function refreshQuotas(db: pg.Pool, measureOlderThanMs = MEASURE_EVERY_MS) {
  await db.query(MEASURE, [measureOlderThanMs]);
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

/** Every schema's quota; read again in the background once older than QUOTA_READ_EVERY_MS. */
export async function currentQuotas(db: pg.Pool): Promise<Map<string, Quota>> {
  const fresh = known?.db === db && performance.now() - known.readAt < QUOTA_READ_EVERY_MS;
  if (known?.db === db && fresh) return known.quotas;
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
export function overStorageQuota(quotas: Map<string, Quota>, schema: string): Quota | undefined {
  const quota = quotas.get(schema);
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
