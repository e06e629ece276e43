import { createHmac } from 'node:crypto';
import type pg from 'pg';
import { ownerOf, type Principal } from '#lib/principal';

/**
 * Cancelling the SQL editor's running statement (POST /api/query/cancel). The statement's session
 * carries a tag in `application_name` while it runs (SET LOCAL, with our transaction's settings),
 * made from who sent it and the `queryId` they chose: the cancel finds the backend by the tag it
 * makes from its own sender and that id, so only the person (or key, or admin) who ran a
 * statement can cancel it, from any instance of the service, through a transaction pooler too
 * (pg_cancel_backend by process id, from the service's own session). The tag is a MAC: seeing it
 * in pg_stat_activity tells a tenant neither whose statement it is nor how to make another.
 */

/** The tag of `principal`'s statement `queryId`, as application_name holds it (63 bytes at most). */
export function runningTag(secret: string, principal: Principal | undefined, queryId: string): string {
  const mac = createHmac('sha256', secret).update(`dbadmin running query\n${ownerOf(principal)}\n${queryId}`);
  return `dbadmin q ${mac.digest('base64url').slice(0, 32)}`;
}

/** Cancels the statement running under the tag; whether one was. */
export async function cancelRunning(db: pg.Pool, tag: string): Promise<boolean> {
  const { rows } = await db.query<{ cancelled: number }>(
    `SELECT count(*) FILTER (WHERE pg_catalog.pg_cancel_backend(a.pid))::int AS cancelled
       FROM pg_catalog.pg_stat_activity a
      WHERE a.application_name = $1 AND a.datname = pg_catalog.current_database()
        AND a.state = 'active' AND a.pid <> pg_catalog.pg_backend_pid()`,
    [tag],
  );
  return (rows[0]?.cancelled ?? 0) > 0;
}
