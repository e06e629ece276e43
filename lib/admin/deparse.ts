import type { SchemaAccess } from '#lib/db/executor';
import { isPgError } from '#lib/db/pg-errors';

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
    // An anon key's work runs in its read-only transaction, already open (and rolled back).
    const own = !access.readOnly;
    try {
      await client.query(`${own ? 'BEGIN; ' : ''}SET LOCAL lock_timeout = '50ms'`);
      const { rows } = await client.query<{ name: string; definition: string }>(sql, values);
      if (own) await client.query('COMMIT');
      return new Map(rows.map((r) => [r.name, r.definition]));
    } catch (error) {
      if (own) await client.query('ROLLBACK').catch(() => undefined);
      if (isPgError(error) && error.code === '55P03') return undefined;
      throw error;
    }
  });
}
