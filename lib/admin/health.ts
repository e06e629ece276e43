import type pg from 'pg';
import { logger } from '#lib/log';

/** Said once per process: the same warning on every health check would bury the log. */
let warned = false;

/**
 * The service and its database answer. A database that does not keep text as UTF-8 still works,
 * but stores bytes (`length('é')` is 2, `upper('é')` is 'é', sorting and ILIKE go wrong for
 * anything but ASCII): the answer and the log say so.
 */
export async function checkHealth(db: pg.Pool) {
  const { rows } = await db.query<{ database: string; encoding: string }>(
    `SELECT pg_catalog.current_database() AS database, pg_catalog.current_setting('server_encoding') AS encoding`,
  );
  const { database, encoding } = rows[0] as { database: string; encoding: string };
  const warnings =
    encoding === 'UTF8'
      ? []
      : [
          `the database stores text as ${encoding}, not UTF8: non-ASCII text is kept as bytes, and its length, case, sorting and pattern matching are wrong; move the data to a database created with ENCODING 'UTF8'`,
        ];
  if (warnings.length > 0 && !warned) {
    warned = true;
    // The answer is public: the database's name goes to the log only.
    logger.warn('database encoding', { database, warning: warnings[0] });
  }
  return {
    status: 'ok' as const,
    database: 'up' as const,
    timestamp: new Date().toISOString(),
    ...(warnings.length > 0 ? { warnings } : {}),
  };
}
