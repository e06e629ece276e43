import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP relay in front of the test database: each client's connection gets one of its own to the
 * database, and `down()` drops them all and takes no more until `up()`, as a crash would. What it
 * does with the bytes between them is its subclass's (`pipe`).
 */
export abstract class TcpRelay {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  /** Relays between the client and its own connection to the database. */
  protected abstract pipe(client: Socket, upstream: Socket): void;

  async up(): Promise<void> {
    const server = createServer((client) => {
      const upstream = connect(this.targetPort, this.targetHost);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket));
        socket.on('error', () => socket.destroy());
      }
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      this.pipe(client, upstream);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    const address = server.address();
    if (address && typeof address === 'object') this.port = address.port;
    this.server = server;
  }

  /** Stops listening and drops every open connection, as a database crash would. */
  async down(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }
}

/** A TCP proxy in front of the test database that can be cut and restored, to play an outage. */
export class TcpProxy extends TcpRelay {
  /** Bytes the database sent towards its clients through this proxy. */
  bytesToClients = 0;

  constructor(
    targetHost: string,
    targetPort: number,
    /**
     * The database's messages reach the client one at a time, 50 ms apart: a client
     * then handles each message of a reply alone, as a slow network can deliver them.
     */
    private readonly dribble = false,
  ) {
    super(targetHost, targetPort);
  }

  protected pipe(client: Socket, upstream: Socket): void {
    upstream.on('data', (chunk: Buffer) => {
      this.bytesToClients += chunk.length;
    });
    client.pipe(upstream);
    if (this.dribble) dribbleInto(upstream, client);
    else upstream.pipe(client);
  }
}

/**
 * Writes what the database sends into `to` a protocol message at a time (type byte, then a length
 * counting itself), 50 ms apart, so the client reads and handles each alone.
 */
function dribbleInto(from: Socket, to: Socket): void {
  let buffered: Buffer = Buffer.alloc(0);
  const messages: Buffer[] = [];
  let writing = false;
  const next = () => {
    const message = messages.shift();
    if (!message || to.destroyed) {
      writing = false;
      return;
    }
    to.write(message);
    // Long enough for the client to have handled the message and what follows from it (5 ms was
    // not: pg's error path took longer, and the next message came first).
    setTimeout(next, 50);
  };
  from.on('data', (chunk: Buffer) => {
    const split = wholeMessages(Buffer.concat([buffered, chunk]));
    messages.push(...split.messages);
    buffered = split.rest;
    if (!writing && messages.length > 0) {
      writing = true;
      next();
    }
  });
}

/** The complete protocol messages at the start of `bytes`, and what is left of an incomplete one. */
function wholeMessages(bytes: Buffer): { messages: Buffer[]; rest: Buffer } {
  const messages: Buffer[] = [];
  let rest = bytes;
  while (rest.length > 0) {
    // SSL's one-byte answer (N or S) to an SSLRequest comes alone, before any message.
    const sslAnswer = rest.length === 1 && (rest[0] === 0x4e || rest[0] === 0x53);
    const length = sslAnswer ? 1 : rest.length >= 5 ? 1 + rest.readUInt32BE(1) : Number.POSITIVE_INFINITY;
    if (rest.length < length) break;
    messages.push(rest.subarray(0, length));
    rest = rest.subarray(length);
  }
  return { messages, rest };
}
