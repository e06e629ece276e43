import { withAdminClient } from '#test/support/db';

/**
 * A session's start (and its statement's, to cancel), as GET /api/tenants/{schema} shows them:
 * what cancel and terminate name a session by. A pid with no session gets a start of long ago.
 */
export const sessionIdentity = (pid: number, how: 'cancel' | 'terminate') =>
  withAdminClient(async (c) => {
    const { rows } = await c.query(
      'SELECT backend_start::text AS "backendStart", query_start::text AS "queryStart" FROM pg_stat_activity WHERE pid = $1',
      [pid],
    );
    const found = rows[0] ?? { backendStart: '2000-01-01 00:00:00+00', queryStart: null };
    return how === 'cancel' && found.queryStart ? found : { backendStart: found.backendStart };
  });
