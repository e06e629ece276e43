import pg from 'pg';
import type { ConnectionBudget, IdleSession } from '#lib/db/connection-budget';

/**
 * The sessions of one login (a schema's role, or the admin's own SQL): at most `max` at once,
 * each connection paid for from the process's budget (lib/db/connection-budget), kept idle for
 * reuse until the budget needs the slot or `idleMs` passes. A pg.Pool per role could not give an
 * idle connection back when another role needs it; this can, so every tenant stays usable
 * however many there are, and the process never holds more connections than its budget.
 *
 * A pool may be used by every bundle of the process: it rejects only with pg's own errors and
 * with NoSession markers, never with an error class of ours.
 */

/** Answered by connect when no session came: not the database's fault. */
export interface NoSession {
  busy: true;
  /** What stood in the way: this login's own sessions, the process's budget, or the pool closed meanwhile. */
  full: 'login' | 'process' | 'closed';
}

export const isNoSession = (error: unknown): error is NoSession =>
  typeof error === 'object' && error !== null && (error as NoSession).busy === true;

const noSession = (full: NoSession['full']): NoSession => ({ busy: true, full });

export interface SessionPoolOptions {
  /** pg.Client's settings: connectionString, application_name, statement_timeout, options... */
  client: pg.ClientConfig;
  /** The client class (lib/db/pooler's through a transaction pooler); pg.Client by default. */
  Client?: typeof pg.Client;
  max: number;
  /** How long connect may wait for a session of this login and a slot of the budget. */
  waitMs: number;
  /** How long a login may take, once it has its slot. */
  loginMs: number;
  idleMs: number;
}

/**
 * Requests that may wait for one login's sessions, per session it may hold: past them one tenant's
 * flood is turned away at once (Busy) rather than filling the process's requests in flight.
 */
const WAITERS_PER_SESSION = 10;

/** How long a closing connection may take to say goodbye before its socket is cut. */
const GOODBYE_MS = 1000;

interface Idle extends IdleSession {
  client: pg.Client;
  timer: NodeJS.Timeout;
}

/** A waiter is handed a session, or `undefined`: a login slot was kept for it, open a connection. */
type Waiter = (client: pg.Client | undefined) => void;

export class SessionPool {
  /** Most recently used last. */
  private readonly idle: Idle[] = [];
  /** Connections of this login: open, opening, or a slot kept for a waiter about to open one. */
  private opened = 0;
  private readonly waiters: Waiter[] = [];
  private ended = false;

  constructor(
    private readonly budget: ConnectionBudget,
    private readonly options: SessionPoolOptions,
  ) {}

  get closed(): boolean {
    return this.ended;
  }

  /** A session, ready for work: an idle one, else a new login. Rejects with a NoSession when none comes in time. */
  async connect(): Promise<pg.PoolClient> {
    if (this.ended) throw noSession('closed');
    const reused = this.idle.pop();
    if (reused) {
      clearTimeout(reused.timer);
      this.budget.unpark(reused);
      return this.lend(reused.client);
    }
    const started = Date.now();
    if (this.opened < this.options.max) this.opened++;
    else if (this.waiters.length >= this.options.max * WAITERS_PER_SESSION) {
      // One login's flood queues no further: it is refused in its own line, not in everyone's.
      throw noSession('login');
    } else {
      const handed = await this.waitForRelease();
      if (handed) return this.lend(handed);
      // A login slot was kept for us (opened counts it already).
    }
    if (this.ended) {
      this.dropSlot();
      throw noSession('closed');
    }
    if (!(await this.budget.take(Math.max(this.options.waitMs - (Date.now() - started), 0)))) {
      this.dropSlot();
      throw noSession('process');
    }
    const Client = this.options.Client ?? pg.Client;
    const client = new Client({ ...this.options.client, connectionTimeoutMillis: this.options.loginMs });
    // A socket that dies while idle (server restart, frozen container) must not crash us.
    client.on('error', () => this.forget(client));
    try {
      await client.connect();
    } catch (error) {
      this.closedConnection();
      throw error;
    }
    if (this.ended) {
      this.end(client);
      throw noSession('closed');
    }
    return this.lend(client);
  }

  /** Waits for a session of this login to come back, or a login slot to be kept for us, within the deadline. */
  private waitForRelease(): Promise<pg.Client | undefined> {
    return new Promise((resolve, reject) => {
      const take: Waiter = (client) => {
        clearTimeout(timer);
        resolve(client);
      };
      const timer = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(take), 1);
        reject(noSession('login'));
      }, this.options.waitMs);
      this.waiters.push(take);
    });
  }

  private lend(client: pg.Client): pg.PoolClient {
    let released = false;
    const lent = client as pg.PoolClient;
    lent.release = (error?: Error | boolean) => {
      if (released) throw new Error('session released twice');
      released = true;
      this.release(client, error);
    };
    return lent;
  }

  private release(client: pg.Client, error: Error | boolean | undefined): void {
    const usable = !error && !this.ended && (client as unknown as { _queryable: boolean })._queryable;
    // Someone of any other login waits for a slot: this one goes back to the budget rather than
    // to this login's next request, so a login that floods never keeps its sessions from others.
    if (!usable || this.budget.wanted) {
      this.end(client);
      return;
    }
    const waiter = this.waiters.shift();
    if (waiter) {
      waiter(client);
      return;
    }
    const idle: Idle = {
      client,
      timer: setTimeout(() => {
        this.unidle(idle);
        this.end(client);
      }, this.options.idleMs),
      close: async () => {
        // The budget closes it to hand its slot on: the slot is not given back here.
        this.unidle(idle);
        this.dropSlot();
        await goodbye(client);
      },
    };
    idle.timer.unref();
    this.idle.push(idle);
    this.budget.park(idle);
  }

  private unidle(idle: Idle): void {
    clearTimeout(idle.timer);
    const at = this.idle.indexOf(idle);
    if (at >= 0) this.idle.splice(at, 1);
    this.budget.unpark(idle);
  }

  /** An idle session's socket failed: it is dropped, its slot given back. */
  private forget(client: pg.Client): void {
    const idle = this.idle.find((each) => each.client === client);
    if (!idle) return;
    this.unidle(idle);
    this.end(client);
  }

  private end(client: pg.Client): void {
    goodbye(client).then(() => this.closedConnection());
  }

  /** A connection of ours is gone: its budget slot goes back, and its login slot. */
  private closedConnection(): void {
    this.budget.give();
    this.dropSlot();
  }

  /** A login slot is free: kept for the longest waiter, who opens a connection of its own. */
  private dropSlot(): void {
    this.opened--;
    const waiter = this.opened < this.options.max ? this.waiters.shift() : undefined;
    if (waiter) {
      this.opened++;
      waiter(undefined);
    }
  }

  /** Closes the idle sessions now; sessions in use close when released, waiters are told. */
  async close(): Promise<void> {
    this.ended = true;
    const idle = this.idle.splice(0);
    for (const waiter of this.waiters.splice(0)) {
      this.opened++;
      waiter(undefined);
    }
    await Promise.all(
      idle.map(async (each) => {
        clearTimeout(each.timer);
        this.budget.unpark(each);
        await goodbye(each.client);
        this.closedConnection();
      }),
    );
  }

  get use(): { total: number; idle: number; waiting: number } {
    return { total: this.opened, idle: this.idle.length, waiting: this.waiters.length };
  }
}

/**
 * Ends a connection, cutting its socket if the server does not answer the goodbye in time (a
 * server that vanished without a FIN would otherwise hold its slot until TCP gives up). Never rejects.
 */
async function goodbye(client: pg.Client): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const cut = new Promise<void>((done) => {
    timer = setTimeout(() => {
      (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      done();
    }, GOODBYE_MS);
  });
  await Promise.race([client.end().catch(() => undefined), cut]);
  clearTimeout(timer);
}
