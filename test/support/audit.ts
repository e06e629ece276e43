import type pg from 'pg';
import { drainInbox } from '#lib/db/audit-inbox';
import { readSealKey } from '#lib/db/audit-log';
import { withAdminClient } from '#test/support/db';
import type { Reply } from '#test/support/http';

/**
 * The log as a reader sees it: the inbox drained into it first (lib/db/audit-inbox), as GET
 * /api/audit does; `read` runs on the same connection after.
 */
export const drained = <T>(read: (client: pg.Client) => Promise<T>) =>
  withAdminClient(async (c) => {
    await drainInbox(c, await readSealKey(c), { batches: 100, wait: true });
    return read(c);
  });

/** The audit entries of one request (by its answer's x-request-id), as the table holds them. */
export const entriesOf = (reply: Reply) =>
  drained(
    async (c) =>
      (
        await c.query('SELECT * FROM _dbadmin.audit_log WHERE request_id = $1', [
          reply.headers['x-request-id'],
        ])
      ).rows,
  );

/** How many entries the log holds. */
export const entryCount = () =>
  drained(async (c) => Number((await c.query('SELECT count(*) AS n FROM _dbadmin.audit_log')).rows[0].n));
