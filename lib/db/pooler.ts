import pg from 'pg';

/**
 * dbadmin behind a pooler in transaction mode (PgBouncer's `pool_mode = transaction`,
 * DATABASE_POOL_MODE=transaction): each transaction, and each statement outside one, may run on
 * another of the pooler's server connections, which the pooler resets between them
 * (`server_reset_query_always`). Nothing may then rely on a session outliving its transaction:
 *
 * - Settings fixed at connection start (`-c name=value`, `statement_timeout`) never reach the
 *   server (PgBouncer 1.18 forwards five parameters and refuses the rest). A session's settings
 *   are sent again, `SET LOCAL`, in the round trip of each BEGIN (its prologue, see `begin`); a
 *   schema role also has them as its own defaults (lib/db/schema-roles), which a pooler's reset
 *   restores, for what runs outside a transaction (CREATE INDEX CONCURRENTLY).
 * - Named prepared statements would be looked for on a server connection that never saw them:
 *   sent unnamed (parsed each time).
 * - A connection's process id and cancel key are the pooler's, not a backend's: a statement is
 *   cancelled by the protocol's CancelRequest, which the pooler forwards to the backend running
 *   it, and a backend is found for termination by its login and the statement it runs
 *   (lib/db/pool stopBackend), never by the pooler's process id, which may be any backend's.
 *
 * Direct connections (`session`) keep their startup settings and names: nothing here applies.
 */

export type PoolMode = 'session' | 'transaction';

/** A connection through a transaction pooler, with what each of its transactions starts with. */
export class PooledClient extends pg.Client {
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
      if (config.name && typeof config.submit !== 'function') config = { ...config, name: undefined };
    }
    // biome-ignore lint/suspicious/noExplicitAny: see above
    return (super.query as (...args: any[]) => any)(config, ...rest);
  }

  /**
   * Sends PostgreSQL's CancelRequest with this connection's key: the pooler forwards it to the
   * backend that runs this connection's statement now, or drops it when none does.
   */
  cancelOnWire(): void {
    const active = (this as unknown as { activeQuery?: unknown }).activeQuery;
    if (!active) return;
    const canceller = new pg.Client(this.settings);
    // The pooler closes the request's connection when it is done with it (or knows no such key).
    canceller.on('error', () => undefined);
    (canceller as unknown as { cancel(client: pg.Client, query: unknown): void }).cancel(this, active);
  }

  private get settings(): pg.ClientConfig {
    const { host, port, ssl } = this as unknown as {
      host: string;
      port: number;
      ssl: pg.ClientConfig['ssl'];
    };
    return { host, port, ssl };
  }
}

/** A client class for connections in this mode, whose transactions start with `prologue`. */
export function clientFor(mode: PoolMode, prologue: readonly string[]): typeof pg.Client {
  if (mode === 'session') return pg.Client;
  return class extends PooledClient {
    override prologue = prologue;
  };
}

/**
 * Settings as `SET LOCAL` statements, sent in the round trip of the BEGIN before them. Values are
 * literals, but search_path's, which is a list of identifiers as startup options take it
 * (`pg_catalog, pg_temp`, `"My Schema"`): our own names, already quoted where they must be.
 */
export const setLocal = (settings: Record<string, string>): string[] =>
  Object.entries(settings).map(
    ([name, value]) =>
      `SET LOCAL ${pg.escapeIdentifier(name)} = ${name === 'search_path' ? value : pg.escapeLiteral(value)}`,
  );

/**
 * BEGIN (or `BEGIN READ ONLY`, `BEGIN ISOLATION LEVEL ...`), followed through a transaction
 * pooler by the session's prologue: statements for one round trip, each with its own result.
 */
export const beginStatements = (client: pg.ClientBase, begin = 'BEGIN'): string[] =>
  client instanceof PooledClient ? [begin, ...client.prologue] : [begin];

/** beginStatements as one string. */
export const beginText = (client: pg.ClientBase, begin = 'BEGIN'): string =>
  beginStatements(client, begin).join('; ');

export const isPooled = (client: pg.ClientBase): client is PooledClient => client instanceof PooledClient;
