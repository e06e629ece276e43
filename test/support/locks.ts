import { loginAs } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';

/** pg_locks' names of PostgreSQL's table lock levels. */
export const LOCK_MODE: Record<string, string> = {
  'ACCESS SHARE': 'AccessShareLock',
  'ROW SHARE': 'RowShareLock',
  'ROW EXCLUSIVE': 'RowExclusiveLock',
  'SHARE UPDATE EXCLUSIVE': 'ShareUpdateExclusiveLock',
  SHARE: 'ShareLock',
  'SHARE ROW EXCLUSIVE': 'ShareRowExclusiveLock',
  EXCLUSIVE: 'ExclusiveLock',
  'ACCESS EXCLUSIVE': 'AccessExclusiveLock',
};

/**
 * The lock a change asks for on `schema.table` while the tenant's own login (freshSchema's
 * password) holds that table in ACCESS EXCLUSIVE mode: its waiting entry in pg_locks. Then the
 * holder lets go, and the change must complete.
 */
export async function waitingLock(
  schema: string,
  table: string,
  run: () => Promise<{ status: number; text?: string }>,
): Promise<string> {
  const holder = loginAs(`${schema}_user`, 'schema-pass-1');
  await holder.connect();
  await holder.query(`BEGIN; LOCK TABLE "${schema}"."${table}" IN ACCESS EXCLUSIVE MODE`);
  const running = run();
  let mode: string | undefined;
  try {
    mode = await firstWaitingMode(schema, table);
  } finally {
    await holder.query('ROLLBACK');
    await holder.end();
  }
  const done = await running;
  if (done.status !== 200) throw new Error(`the change answered ${done.status}: ${done.text ?? ''}`);
  if (!mode) throw new Error('the change never waited');
  return mode;
}

async function firstWaitingMode(schema: string, table: string): Promise<string | undefined> {
  for (let tries = 0; tries < 500; tries++) {
    const waiting = await withAdminClient(
      async (c) =>
        (
          await c.query(`SELECT l.mode FROM pg_locks l WHERE l.relation = $1::regclass AND NOT l.granted`, [
            `"${schema}"."${table}"`,
          ])
        ).rows,
    );
    if (waiting[0]) return waiting[0].mode as string;
  }
  return undefined;
}
