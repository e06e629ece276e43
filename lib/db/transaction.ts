import type pg from 'pg';
import {
  type AuditDraft,
  auditing,
  commitAudited,
  needsXid,
  SELECT_XID,
  sealFor,
  xidOf,
} from '#lib/db/audit-log';
import { beginText, isPooled } from '#lib/db/pooler';

/**
 * One transaction on one session, all or nothing, with a bounded lock wait when asked; the request's
 * audit entry (lib/db/audit-log) commits with the transaction that is its change.
 */

export interface TransactionOptions<T = unknown> {
  /**
   * How long a statement in it may wait for a lock (`SET LOCAL lock_timeout`, sent with the BEGIN
   * in one round trip) before it fails with 55P03: for our own SQL that may meet a tenant's lock.
   */
  lockTimeout?: `${number}ms` | `${number}s`;
  /**
   * The transaction is the request's change: the request's audit entry (lib/db/audit-log), when
   * it is audited, commits with it, and it binds itself to the request's Idempotency-Key claim
   * (the draft's `binding`) at its COMMIT, or rolls back when its request has given up.
   */
  audit?: AuditDraft;
  /** The rows the change affected, for its audit entry. */
  rows?: (result: T) => number | undefined;
}

/** One statement as the request's change, its audit entry committed with it. */
export const auditedStatement = (client: pg.ClientBase, text: string, audit: AuditDraft | undefined) =>
  inTransaction(client, () => client.query(text), { audit });

/**
 * `work` as it is on a session of its own; through a transaction pooler, outside a transaction,
 * in one begun with the session's settings (lib/db/pooler), which a statement alone would run
 * without (the role it works as, its search path, its statement timeout).
 */
export function withSessionSettings<T>(client: pg.ClientBase, work: () => Promise<T>): Promise<T> {
  if (!isPooled(client) || client.getTransactionStatus() !== 'I') return work();
  return inPlainTransaction(client, 'BEGIN', work);
}

/**
 * `work` in a transaction of its own, begun by `begin` (with the session's settings through a
 * transaction pooler), committed after it, rolled back if it fails. No audit entry: a read's.
 */
export async function inPlainTransaction<T>(
  client: pg.ClientBase,
  begin: string,
  work: () => Promise<T>,
): Promise<T> {
  await client.query(beginText(client, begin));
  try {
    const result = await work();
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** Runs `work` in one transaction: all of it commits, or none of it. */
export function inTransaction<T>(
  client: pg.ClientBase,
  work: () => Promise<T>,
  { lockTimeout, audit, rows }: TransactionOptions<T> = {},
): Promise<T> {
  // Inside another transaction our COMMIT would commit that one too (an anon key's, which is
  // only ever rolled back): refused, so such a mistake fails closed.
  if (client.getTransactionStatus() !== 'I') {
    return Promise.reject(new Error('inTransaction called inside an open transaction'));
  }
  const sealed = auditing(audit);
  const binding = audit?.binding;
  const begin = [
    beginText(client),
    ...(needsXid(audit) ? [SELECT_XID] : []),
    ...(lockTimeout ? [`SET LOCAL lock_timeout = '${lockTimeout}'`] : []),
  ];
  return client.query(begin.join('; ')).then(async (started) => {
    const xid = needsXid(audit) ? xidOf(started as unknown as pg.QueryResult[]) : undefined;
    if (sealed) sealFor(audit, xid);
    if (binding) binding.xid = xid;
    try {
      const result = await work();
      await commitAudited(client, audit, rows?.(result));
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      // The request's next transaction has an id of its own.
      if (binding) binding.xid = undefined;
    }
  });
}
