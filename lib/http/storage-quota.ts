import { getDatabase } from '#lib/db/pool';
import { currentQuotas, overStorageQuota, StorageQuotaExceeded } from '#lib/db/quotas';
import { type RequestInput, requestSchema } from '#lib/http/request-schema';
import type { AnyRoute } from '#lib/http/route';

/**
 * A route that adds data (`addsData`) answers 507 for a schema over its storage quota, as last
 * measured in the background (lib/db/quotas); reads, deletes and drops go on, so a tenant can
 * get back under it. The admin's ad-hoc SQL is the operator's way out and is not refused; a
 * key's runs read-only (functions/query).
 */
export async function refuseOverQuota(route: AnyRoute, input: RequestInput): Promise<void> {
  if (!route.addsData) return;
  const schema = requestSchema(input);
  if (schema === undefined) return;
  const over = overStorageQuota((await currentQuotas(await getDatabase())).get(schema));
  if (over) throw new StorageQuotaExceeded(schema, over);
}
