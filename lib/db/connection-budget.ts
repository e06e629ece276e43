/**
 * Every connection to PostgreSQL this process may open for sessions (the schema roles', and the
 * admin's own SQL), counted together against one budget, whichever function's bundle asks: the
 * local host and the container run every bundle in one process, so the budget lives on the
 * process's global object, not in a module. The service's own pool has its share set apart
 * (lib/db/pool), so a request holding a session can always still reach the catalog.
 *
 * A new connection takes a slot. As the budget fills, the session idle longest, of any role, is
 * closed in the background, so that a slot or two stay free (HEADROOM): a tenant whose session
 * was given back logs in without first waiting for another's goodbye. When no slot is free, the
 * session idle longest is closed and its slot passes on; when none is idle either, the request
 * waits in line until a slot is given back, or its deadline passes (lib/db/session-pool answers
 * 503 Busy then). While anyone waits, a session that goes idle is closed at once and its slot
 * handed over: idle connections are given back before anyone waits for long.
 *
 * Only plain values and promises that never reject cross it, since bundles do not share classes.
 */

/** A session kept open for reuse, which the budget may close to free its slot. */
export interface IdleSession {
  /** Closes the session; resolves once its connection is gone (never rejects). */
  close(): Promise<void>;
}

export interface BudgetUse {
  limit: number;
  /** Slots taken: connections open or opening. */
  open: number;
  /** Of those, sessions idle and reclaimable. */
  idle: number;
  /** Requests waiting for a slot. */
  waiting: number;
}

/**
 * Slots kept free ahead of need, by closing idle sessions early: two for a process's budget, none
 * for a small one (a Lambda container's few), whose every session is worth keeping warm.
 */
const headroom = (limit: number) => Math.min(2, Math.floor(limit / 16));

export class ConnectionBudget {
  private taken = 0;
  /** Of the slots taken, those of idle sessions closing to make headroom: free once closed. */
  private freeing = 0;
  private readonly queue: Array<() => void> = [];
  /** Least recently parked first (a Set keeps insertion order). */
  private readonly idle = new Set<IdleSession>();
  private readonly headroom: number;

  constructor(readonly limit: number) {
    this.headroom = headroom(limit);
  }

  /**
   * Takes a slot for a new connection, within `waitMs`: answers false when none came in time.
   * The caller gives it back (give) when that connection ends, or if it never opens.
   */
  async take(waitMs: number): Promise<boolean> {
    if (this.taken < this.limit) {
      this.taken++;
      this.makeHeadroom();
      return true;
    }
    const [oldest] = this.idle;
    if (oldest) {
      // Its slot passes straight to us: taken stays as it is.
      this.idle.delete(oldest);
      await oldest.close();
      this.makeHeadroom();
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const grant = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.queue.splice(this.queue.indexOf(grant), 1);
        resolve(false);
      }, waitMs);
      this.queue.push(grant);
    });
  }

  /** Closes the sessions idle longest, without waiting, until HEADROOM slots are free or freeing. */
  private makeHeadroom(): void {
    while (this.limit - this.taken + this.freeing < this.headroom) {
      const [oldest] = this.idle;
      if (!oldest) return;
      this.idle.delete(oldest);
      this.freeing++;
      oldest.close().then(() => {
        this.freeing--;
        this.give();
      });
    }
  }

  /** A connection ended (or never opened): its slot goes to the longest waiter, else back. */
  give(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.taken--;
  }

  /** Someone waits for a slot: a session going idle now should be closed instead (see park). */
  get wanted(): boolean {
    return this.queue.length > 0;
  }

  /** A session is idle: the budget may close it to free its slot for another role. */
  park(session: IdleSession): void {
    this.idle.add(session);
  }

  /** The session is in use again (or gone): no longer the budget's to close. */
  unpark(session: IdleSession): void {
    this.idle.delete(session);
  }

  get use(): BudgetUse {
    return { limit: this.limit, open: this.taken, idle: this.idle.size, waiting: this.queue.length };
  }
}

const BUDGET = Symbol.for('dbadmin.connection-budget');
const processGlobal = globalThis as { [BUDGET]?: ConnectionBudget };

/**
 * This process's budget for sessions, made by the first bundle that asks, with its limit; a
 * limit that changed (tests reading the settings afresh) makes a new one for the pools made after.
 */
export function sessionBudget(limit: number): ConnectionBudget {
  const current = processGlobal[BUDGET];
  if (current && current.limit === limit) return current;
  const budget = new ConnectionBudget(limit);
  processGlobal[BUDGET] = budget;
  return budget;
}

/** The process's budget as it is, if any bundle made one (for the metrics). */
export const currentSessionBudget = (): ConnectionBudget | undefined => processGlobal[BUDGET];
