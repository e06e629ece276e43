import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of the test database that loses the answer to one statement: the statement
 * reaches PostgreSQL and runs to its end (its ReadyForQuery is seen), then the client's connection
 * is cut before a byte of the answer reaches it, as when the database or the network fails between
 * a COMMIT and its acknowledgement. With `crash`, every connection is cut and none is taken until
 * `up()` again: the service cannot even ask what became of its transaction.
 */
export class LosingProxy {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private losing: { pattern: RegExp; crash: boolean; lost: () => void } | undefined;
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  async up(): Promise<void> {
    const server = createServer((client) => this.pipe(client));
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    const address = server.address();
    if (address && typeof address === 'object') this.port = address.port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  /** The next statement whose text matches `pattern` runs, and its answer is lost; resolves once it was. */
  loseAnswerTo(pattern: RegExp, { crash = false } = {}): Promise<void> {
    return new Promise((lost) => {
      this.losing = { pattern, crash, lost };
    });
  }

  private pipe(client: Socket): void {
    const upstream = connect(this.targetPort, this.targetHost);
    for (const socket of [client, upstream]) {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => socket.destroy());
    }
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
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }
}

/** 'Z', length 5: the message that ends every answer (its status byte follows). */
const READY_FOR_QUERY = Buffer.from([0x5a, 0, 0, 0, 5]);
