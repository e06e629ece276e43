import type { SchemaAccess } from '#lib/db/executor';
import { isPgError } from '#lib/db/pg-errors';
import { inTransaction } from '#lib/db/transaction';

/**
 * Definitions PostgreSQL can only print by opening the tables they name (pg_get_viewdef,
 * pg_get_constraintdef of a check): read in the schema's own session, never on the service's
 * pool, waiting at most 50 ms for a lock, so a tenant holding its table cannot stall the read.
 * `sql` answers rows of (name, definition); undefined when a table stayed locked past the wait.
 */
export function printedInSchemaSession(
  access: SchemaAccess,
  sql: string,
  values: unknown[],
): Promise<Map<string, string> | undefined> {
  return access.run(async (client) => {
    const read = () => client.query<{ name: string; definition: string }>(sql, values);
    try {
      // An anon key's work runs in its read-only transaction, already open (and rolled back).
      const { rows } = access.readOnly
        ? await client.query(`SET LOCAL lock_timeout = '50ms'`).then(read)
        : await inTransaction(client, read, { lockTimeout: '50ms' });
      return new Map(rows.map((r) => [r.name, r.definition]));
    } catch (error) {
      if (isPgError(error) && error.code === '55P03') return undefined;
      throw error;
    }
  });
}
