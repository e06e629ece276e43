import type pg from 'pg';

export async function checkHealth(db: pg.Pool) {
  await db.query('SELECT 1');
  return { status: 'ok' as const, database: 'up' as const, timestamp: new Date().toISOString() };
}
