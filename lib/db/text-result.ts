import { StringDecoder } from 'node:string_decoder';
import type pg from 'pg';
import { type ResultLimits, ResultTooLarge } from '#lib/db/result-limits';

/** What a statement sent, as one string, and how many records (rows, or COPY lines) made it. */
export interface TextResult {
  text: string;
  records: number;
}

/** The driver's protocol messages this reader takes (pg-protocol's DataRow and CopyData). */
type DataRow = { fields: (string | null)[] };
type CopyData = { chunk: Buffer };
type Connection = pg.Connection & { sendCopyFail(message: string): void };

/**
 * Reads the output of one statement PostgreSQL renders as text, appending each record to one
 * string as it arrives: the first column of a SELECT's rows, joined by `separator` (a NULL is
 * `null`), or the lines of a COPY ... TO STDOUT (one CopyData message each). No row objects, no
 * type parsing, nothing kept twice. Past QUERY_MAX_BYTES what was read is dropped, `onExceeded`
 * cancels the statement, and the read fails with ResultTooLarge (a single huge record is cut off
 * earlier, by the session's wire limit: lib/db/result-limits watchWire).
 *
 * A pg Submittable (the interface pg-cursor and pg-query-stream use): it settles as pg's own
 * Query does, on the first error or at ReadyForQuery, and pg sends nothing else on the session
 * before ReadyForQuery.
 */
class TextReader implements pg.Submittable {
  private text = '';
  private bytes = 0;
  private records = 0;
  private readonly decoder = new StringDecoder('utf8');
  private exceeded = false;
  private settled = false;
  private resolve!: (result: TextResult) => void;
  private reject!: (error: unknown) => void;
  readonly done = new Promise<TextResult>((resolve, reject) => {
    this.resolve = resolve;
    this.reject = reject;
  });

  constructor(
    private readonly sql: string,
    private readonly separator: string,
    private readonly limits: ResultLimits,
    private readonly onExceeded: () => void,
  ) {}

  submit(connection: pg.Connection): void {
    connection.query(this.sql);
  }

  private append(text: string, bytes: number): void {
    if (this.exceeded) return;
    this.bytes += bytes;
    if (this.bytes > this.limits.maxBytes) {
      this.exceeded = true;
      this.text = '';
      this.onExceeded();
      return;
    }
    this.text += text;
    this.records += 1;
  }

  handleDataRow({ fields }: DataRow): void {
    const value = fields[0] ?? 'null';
    const text = this.records === 0 ? value : this.separator + value;
    this.append(text, Buffer.byteLength(text));
  }

  handleCopyData({ chunk }: CopyData): void {
    this.append(this.decoder.write(chunk), chunk.length);
  }

  handleError(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(this.exceeded ? new ResultTooLarge('QUERY_MAX_BYTES', this.limits.maxBytes) : error);
  }

  handleReadyForQuery(): void {
    if (this.settled) return;
    if (this.exceeded) {
      this.handleError(undefined);
      return;
    }
    this.settled = true;
    this.resolve({ text: this.text + this.decoder.end(), records: this.records });
  }

  handleCopyInResponse(connection: Connection): void {
    connection.sendCopyFail('dbadmin sends no COPY data');
  }

  handleRowDescription(): void {}
  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
}

export function readText(
  client: pg.ClientBase,
  sql: string,
  limits: ResultLimits,
  onExceeded: () => void,
  separator = ',',
): Promise<TextResult> {
  const reader = new TextReader(sql, separator, limits, onExceeded);
  client.query(reader);
  return reader.done;
}
