import { withAdminClient } from '#test/support/db';
import type { Reply } from '#test/support/http';

/** The audit entries of one request (by its answer's x-request-id), as the table holds them. */
export const entriesOf = (reply: Reply) =>
  withAdminClient(
    async (c) =>
      (
        await c.query('SELECT * FROM _dbadmin.audit_log WHERE request_id = $1', [
          reply.headers['x-request-id'],
        ])
      ).rows,
  );

/** How many entries the log holds. */
export const entryCount = () =>
  withAdminClient(async (c) =>
    Number((await c.query('SELECT count(*) AS n FROM _dbadmin.audit_log')).rows[0].n),
  );
