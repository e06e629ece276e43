import { connect } from 'node:net';
import pg from 'pg';

/**
 * dbadmin behind a pooler in transaction mode (PgBouncer's `pool_mode = transaction`,
 * DATABASE_POOL_MODE=transaction): each transaction, and each statement outside one, may run on
 * another of the pooler's server connections, which the pooler resets between them
 * (`server_reset_query_always`). Nothing may then rely on a session outliving its transaction:
 *
 * - Settings fixed at connection start (`-c name=value`, `statement_timeout`) never reach the
 *   server (PgBouncer 1.18 keeps five parameters per client, client_encoding, DateStyle, TimeZone,
 *   standard_conforming_strings and application_name, and refuses the rest). A session's settings
 *   are sent again, `SET LOCAL`, in the round trip of each BEGIN (its prologue, beginStatements),
 *   and reads that would run alone run in such a transaction (lib/db/transaction
 *   withSessionSettings). For what cannot run in a transaction (CREATE INDEX CONCURRENTLY), a
 *   schema role has them as its own defaults in this mode (lib/db/schema-roles), which the
 *   pooler's reset restores.
 * - Named prepared statements would be looked for on a server connection that never saw them:
 *   sent unnamed (parsed each time).
 * - A connection's process id and cancel key are the pooler's, not a backend's: a statement is
 *   cancelled by the protocol's CancelRequest, which the pooler forwards to the backend running
 *   it, and a backend is found for termination by its login and the statement it runs
 *   (lib/db/pool stopBackend), never by the pooler's process id, which may be any backend's.
 *
 * Direct connections (`session`) keep their startup settings and names: nothing here applies.
 */

/** A connection through a transaction pooler, with what each of its transactions starts with. */
/**
 * What marks a PooledClient, whichever bundle's copy of this module made it: the process's pools
 * are shared by every function's bundle in it (lib/db/pool, lib/db/executor), so `instanceof`
 * would hold only in the bundle that made the pool.
 */
const POOLED = Symbol.for('dbadmin.pooled-client');

export class PooledClient extends pg.Client {
  get [POOLED](): true {
    return true;
  }

  /** `SET LOCAL` statements that give a transaction the session's settings. */
  prologue: readonly string[] = [];
  /** The text of the statement last sent, as pg_stat_activity shows it while it runs. */
  lastStatement: string | undefined;

  // pg's query has many overloads: this one passes each on, unnamed.
  // biome-ignore lint/suspicious/noExplicitAny: forwards pg.Client#query's overloads unchanged
  override query(config: any, ...rest: any[]): any {
    if (typeof config === 'string') this.lastStatement = config;
    else if (config && typeof config === 'object' && typeof config.text === 'string') {
      this.lastStatement = config.text;
      // A Submittable (cursor, COPY stream) is passed as itself; a plain config is copied unnamed.
      if (config.name && typeof config.submit === 'function') config.name = undefined;
      else if (config.name) config = { ...config, name: undefined };
    }
    // biome-ignore lint/suspicious/noExplicitAny: see above
    return (super.query as (...args: any[]) => any)(config, ...rest);
  }

  /**
   * Sends PostgreSQL's CancelRequest with this connection's key: the pooler forwards it to the
   * backend that runs this connection's statement now, or drops it when none does.
   */
  cancelOnWire(): void {
    const { processID, secretKey, host, port } = this as unknown as {
      processID: number | null;
      secretKey: number | null;
      host: string;
      port: number;
    };
    if (processID === null || secretKey === null) return;
    // CancelRequest: length 16, the code 80877102, the connection's key. Whatever becomes of the
    // socket (the pooler gone, a reset) is nobody's error: a cancel is best effort.
    const request = Buffer.alloc(16);
    request.writeInt32BE(16, 0);
    request.writeInt32BE(80877102, 4);
    request.writeInt32BE(processID, 8);
    request.writeInt32BE(secretKey, 12);
    // A Unix socket's directory, else a host and a port (pg may keep the port as a string).
    const socket = host.startsWith('/') ? connect(`${host}/.s.PGSQL.${port}`) : connect(Number(port), host);
    socket.setTimeout(CANCEL_MS, () => socket.destroy());
    socket.on('error', () => socket.destroy());
    // Written, not ended: the pooler closes the connection once it has passed the request on.
    // PgBouncer 1.18 exits ("bad client state") when the requester hangs up first.
    socket.on('connect', () => socket.write(request));
    socket.on('end', () => socket.destroy());
  }
}

/** How long a CancelRequest's connection may take: the pooler closes it once it has read it. */
const CANCEL_MS = 5_000;

/** A client class for connections through a transaction pooler, whose transactions start with `prologue`. */
export function pooledClient(prologue: readonly string[]): typeof pg.Client {
  return class extends PooledClient {
    override prologue = prologue;
  };
}

/**
 * Settings as `SET LOCAL` statements, sent in the round trip of the BEGIN before them, each value
 * a literal. search_path is written as startup options take it (`pg_catalog, pg_temp`, `"My
 * Schema"`); here each of its names is a literal of its own, which PostgreSQL quotes as it must
 * (a schema named `user` too).
 */
export const setLocal = (settings: Record<string, string>): string[] =>
  Object.entries(settings).map(
    ([name, value]) =>
      `SET LOCAL ${pg.escapeIdentifier(name)} = ${(name === 'search_path' ? namesIn(value) : [value]).map(pg.escapeLiteral).join(', ')}`,
  );

/** The names of a search_path as startup options take it: `a, "B c"` is `a` and `B c`. */
const namesIn = (path: string) =>
  path.split(/,\s*/).map((part) => (part.startsWith('"') ? part.slice(1, -1).replace(/""/g, '"') : part));

/**
 * BEGIN (or `BEGIN READ ONLY`, `BEGIN ISOLATION LEVEL ...`), followed through a transaction
 * pooler by the session's prologue: statements for one round trip, each with its own result.
 */
export const beginStatements = (client: pg.ClientBase, begin = 'BEGIN'): string[] =>
  isPooled(client) ? [begin, ...client.prologue] : [begin];

/** beginStatements as one string. */
export const beginText = (client: pg.ClientBase, begin = 'BEGIN'): string =>
  beginStatements(client, begin).join('; ');

export const isPooled = (client: pg.ClientBase): client is PooledClient =>
  (client as unknown as { [POOLED]?: true })[POOLED] === true;

/**
 * Whether a connection, or a pool's connections, go through a transaction pooler: a pool by the
 * client class it makes (pg.Pool's `options.Client`; not `instanceof pg.Pool`, which another
 * bundle's pool would fail).
 */
export function throughPooler(db: pg.ClientBase | pg.Pool): boolean {
  const made = (db as { options?: { Client?: { prototype: unknown } } }).options?.Client;
  if (made) return (made.prototype as { [POOLED]?: true })[POOLED] === true;
  return isPooled(db as pg.ClientBase);
}
