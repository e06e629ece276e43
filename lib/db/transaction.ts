import type pg from 'pg';

/** Runs `work` in one transaction: all of it commits, or none of it. */
export function inTransaction<T>(client: pg.ClientBase, work: () => Promise<T>): Promise<T> {
  return client.query('BEGIN').then(async () => {
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
