import type { Socket } from 'node:net';
import pg from 'pg';
import { TcpRelay } from '#test/support/tcp-proxy';

/**
 * A TCP proxy in front of the test database that loses the answer to one statement: the statement
 * reaches PostgreSQL and runs to its end (its ReadyForQuery is seen), then the client's connection
 * is cut before a byte of the answer reaches it, as when the database or the network fails between
 * a COMMIT and its acknowledgement. With `crash`, every connection is cut and none is taken until
 * `up()` again: the service cannot even ask what became of its transaction.
 */
export class LosingProxy extends TcpRelay {
  private losing: { pattern: RegExp; crash: boolean; lost: () => void } | undefined;

  /** The next statement whose text matches `pattern` runs, and its answer is lost; resolves once it was. */
  loseAnswerTo(pattern: RegExp, { crash = false } = {}): Promise<void> {
    return new Promise((lost) => {
      this.losing = { pattern, crash, lost };
    });
  }

  protected pipe(client: Socket, upstream: Socket): void {
    let cutting: LosingProxy['losing'];
    client.on('data', (chunk: Buffer) => {
      const plan = this.losing;
      if (plan && !cutting && plan.pattern.test(chunk.toString('latin1'))) {
        this.losing = undefined;
        cutting = plan;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!cutting) {
        client.write(chunk);
        return;
      }
      // ReadyForQuery: the database has finished the statement (a COMMIT is durable by now).
      if (!chunk.includes(READY_FOR_QUERY)) return;
      const plan = cutting;
      client.destroy();
      upstream.destroy();
      void (plan.crash ? this.down() : Promise.resolve()).then(plan.lost);
    });
  }
}

/** 'Z', length 5: the message that ends every answer (its status byte follows). */
const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5]);

/**
 * Statements whose text `lose` picks never reach PostgreSQL: their connection is reported lost as
 * they are sent, as when the process or the network fails at that moment (the socket is left as
 * it is; the service discards a connection that failed). Answers the undo.
 */
export function losingStatements(lose: (text: string) => boolean): () => void {
  const query = pg.Client.prototype.query;
  const spy = jest.spyOn(pg.Client.prototype, 'query').mockImplementation(function (
    this: pg.Client,
    ...args: unknown[]
  ) {
    const first = args[0] as string | { text?: string };
    const text = typeof first === 'string' ? first : first?.text;
    if (text !== undefined && lose(text)) {
      const lost = new Error('Connection terminated unexpectedly');
      // pg-pool passes a callback; a client used directly answers with a promise.
      const callback = args.find((arg): arg is (error: Error) => void => typeof arg === 'function');
      if (!callback) return Promise.reject(lost);
      process.nextTick(() => callback(lost));
      return undefined;
    }
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as never);
  return () => spy.mockRestore();
}
