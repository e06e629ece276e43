import type pg from 'pg';

export interface TransactionOptions {
  /**
   * How long a statement in it may wait for a lock (`SET LOCAL lock_timeout`, sent with the BEGIN
   * in one round trip) before it fails with 55P03: for our own SQL that may meet a tenant's lock.
   */
  lockTimeout?: `${number}ms` | `${number}s`;
}

/** Runs `work` in one transaction: all of it commits, or none of it. */
export function inTransaction<T>(
  client: pg.ClientBase,
  work: () => Promise<T>,
  { lockTimeout }: TransactionOptions = {},
): Promise<T> {
  // Inside another transaction our COMMIT would commit that one too (an anon key's, which is
  // only ever rolled back): refused, so such a mistake fails closed.
  if (client.getTransactionStatus() !== 'I') {
    return Promise.reject(new Error('inTransaction called inside an open transaction'));
  }
  const begin = lockTimeout ? `BEGIN; SET LOCAL lock_timeout = '${lockTimeout}'` : 'BEGIN';
  return client.query(begin).then(async () => {
    try {
      const result = await work();
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}
