import type pg from 'pg';
import { schemaUser } from '#lib/admin/schemas';
import type { AuditDraft } from '#lib/db/audit-log';
import { assertSchemaExists } from '#lib/db/catalog';
import { assertTenantSchema } from '#lib/db/executor';
import { quoteIdent } from '#lib/db/identifiers';
import { withTransaction } from '#lib/db/pool';
import { measureSchema, overStorageQuota, type Quota, refreshQuotas } from '#lib/db/quotas';
import { withRoleAdmin } from '#lib/db/role-admin';
import { TENANT_CONNECTION_LIMIT } from '#lib/db/role-names';
import { lockSchema, roleExists } from '#lib/db/schema-locks';
import { loggedError, logger } from '#lib/log';

/**
 * The admin sets a tenant's quotas; PostgreSQL applies what it can:
 * - the statement timeout: the tenant's own login's default (ALTER ROLE ... SET), and the
 *   sessions the service opens as the schema's roles (lib/db/executor), which also end them from
 *   outside past it;
 * - the connection limit of the tenant's own login (ALTER ROLE ... CONNECTION LIMIT);
 * - the storage quota: measured in the background, and over it the API refuses what adds data
 *   with 507 (lib/http/storage-quota).
 * `null` takes a quota away (the login's connection limit goes back to the service's default).
 */
export interface QuotaInput {
  statementTimeoutMs: number | null;
  connectionLimit: number | null;
  storageBytes: number | null;
}

/** A quota as the API shows it, with what the schema uses. */
export const shownQuota = (quota: Quota | undefined) => ({
  statementTimeoutMs: quota?.statementTimeoutMs ?? null,
  connectionLimit: quota?.connectionLimit ?? null,
  storageBytes: quota?.storageBytes ?? null,
  usedBytes: quota?.usedBytes ?? null,
  measuredAt: quota?.measuredAt?.toISOString() ?? null,
  overStorage: overStorageQuota(quota) !== undefined,
});

export async function setQuota(
  db: pg.Pool,
  schema: string,
  input: QuotaInput,
  audit: AuditDraft | undefined,
) {
  assertTenantSchema(schema);
  await withTransaction(
    db,
    async (client) => {
      await lockSchema(client, schema);
      await assertSchemaExists(client, schema);
      await client.query(
        `INSERT INTO _dbadmin.tenant_quotas (schema_name, statement_timeout_ms, connection_limit, storage_bytes)
         VALUES ($1, $2, $3, $4)
         ON CONFLICT (schema_name) DO UPDATE
           SET statement_timeout_ms = EXCLUDED.statement_timeout_ms, connection_limit = EXCLUDED.connection_limit,
               storage_bytes = EXCLUDED.storage_bytes, updated_at = pg_catalog.now(),
               used_bytes = NULL, measured_at = NULL`,
        [schema, input.statementTimeoutMs, input.connectionLimit, input.storageBytes],
      );
      // The tenant's own login, when the schema has one (schemas made outside dbadmin may not).
      const login = schemaUser(schema);
      if (await roleExists(client, login)) {
        const role = quoteIdent(login);
        const timeout =
          input.statementTimeoutMs === null
            ? `ALTER ROLE ${role} RESET statement_timeout`
            : `ALTER ROLE ${role} SET statement_timeout = ${Math.trunc(input.statementTimeoutMs)}`;
        await withRoleAdmin(client, schema, (roles) =>
          roles.run(
            `ALTER ROLE ${role} CONNECTION LIMIT ${input.connectionLimit ?? TENANT_CONNECTION_LIMIT}; ${timeout}`,
          ),
        );
      }
    },
    { audit },
  );
  // Measured now, so the answer (and this process) knows where the schema stands. The quota is
  // set by then: a measurement that fails is the background's to retry, not the caller's error.
  await measureSchema(db, schema).catch((error: unknown) =>
    logger.warn('quota set, not yet measured', { schema, error: loggedError(error) }),
  );
  return shownQuota((await refreshQuotas(db)).get(schema));
}
