import pg from 'pg';
import type { ConnectionBudget, IdleSession } from '#lib/db/connection-budget';

/**
 * The sessions of one login (a schema's role, or the admin's own SQL): at most `max` at once,
 * each connection paid for from the process's budget (lib/db/connection-budget), kept idle for
 * reuse until the budget needs the slot or `idleMs` passes. A pg.Pool per role could not give an
 * idle connection back when another role needs it; this can, so every tenant stays usable
 * however many there are, and the process never holds more connections than its budget.
 */

/** Answered by connect when no connection could be had in time: not the database's fault. */
export interface NoSession {
  busy: true;
  /** What was full: this login's own sessions, or the process's budget. */
  full: 'login' | 'process';
}

export const isNoSession = (error: unknown): error is NoSession =>
  typeof error === 'object' && error !== null && (error as NoSession).busy === true;

export interface SessionPoolOptions {
  /** pg.Client's settings: connectionString, application_name, statement_timeout, options... */
  client: pg.ClientConfig;
  max: number;
  /** How long connect may wait for a session, a slot and a login together. */
  waitMs: number;
  idleMs: number;
}

interface Idle extends IdleSession {
  client: pg.Client;
  timer: NodeJS.Timeout;
}

export class SessionPool {
  /** Most recently used last. */
  private readonly idle: Idle[] = [];
  private opened = 0;
  private readonly waiters: Array<(client: pg.Client | undefined) => void> = [];
  private ended = false;

  constructor(
    private readonly budget: ConnectionBudget,
    private readonly options: SessionPoolOptions,
  ) {}

  /** A session, ready for work: an idle one, else a new login. Rejects with a NoSession when none comes in time. */
  async connect(): Promise<pg.PoolClient> {
    if (this.ended) throw new Error('the session pool was closed');
    const reused = this.idle.pop();
    if (reused) {
      clearTimeout(reused.timer);
      this.budget.unpark(reused);
      return this.lend(reused.client);
    }
    const started = Date.now();
    if (this.opened >= this.options.max) {
      const handed = await this.waitForRelease();
      if (handed) return this.lend(handed);
      if (this.ended) throw new Error('the session pool was closed');
    }
    this.opened++;
    const left = this.options.waitMs - (Date.now() - started);
    if (!(await this.budget.take(Math.max(left, 0)))) {
      this.opened--;
      throw noSession('process');
    }
    const client = new pg.Client({
      ...this.options.client,
      connectionTimeoutMillis: Math.max(this.options.waitMs - (Date.now() - started), 1),
    });
    // A socket that dies while idle (server restart, frozen container) must not crash us.
    client.on('error', () => this.forget(client));
    try {
      await client.connect();
    } catch (error) {
      this.closed();
      throw error;
    }
    return this.lend(client);
  }

  /** Waits for a session of this login to come back, within the deadline; undefined: open one. */
  private waitForRelease(): Promise<pg.Client | undefined> {
    return new Promise((resolve, reject) => {
      const take = (client: pg.Client | undefined) => {
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
    const queryable = (client as unknown as { _queryable: boolean })._queryable;
    const waiter = error || !queryable || this.ended ? undefined : this.waiters.shift();
    if (waiter) {
      waiter(client);
      return;
    }
    // Broken, or someone (of any role) waits for a slot: given back rather than kept.
    if (error || !queryable || this.ended || this.budget.wanted) {
      this.end(client);
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
        this.opened--;
        this.wakeWaiter();
        await client.end().catch(() => undefined);
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
    client.end().then(
      () => this.closed(),
      () => this.closed(),
    );
  }

  /** A connection of ours is gone: its slot goes back, and a waiter of this login may open one. */
  private closed(): void {
    this.opened--;
    this.budget.give();
    this.wakeWaiter();
  }

  /** A login slot freed: the longest waiter opens a connection of its own. */
  private wakeWaiter(): void {
    if (this.opened < this.options.max) this.waiters.shift()?.(undefined);
  }

  /** Closes the idle sessions now; sessions in use close when released. */
  async close(): Promise<void> {
    this.ended = true;
    const idle = this.idle.splice(0);
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
    await Promise.all(
      idle.map(async (each) => {
        clearTimeout(each.timer);
        this.budget.unpark(each);
        await each.client.end().catch(() => undefined);
        this.closed();
      }),
    );
  }

  get use(): { total: number; idle: number; waiting: number } {
    return { total: this.opened, idle: this.idle.length, waiting: this.waiters.length };
  }
}

const noSession = (full: NoSession['full']): NoSession => ({ busy: true, full });
