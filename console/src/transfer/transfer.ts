import { ApiError, answer, api, type Query } from '../api';

/**
 * A whole file into a table, and a whole table into a file, in pieces the API takes: an import
 * sent in parts of 5 MiB (each retried on a network failure), committed at the end; an export read
 * page after page by its cursor and joined in the browser. Both report progress and stop on abort.
 */

/**
 * Lambda takes 6 MB a request, and API Gateway base64-encodes a body that is not text (NDJSON, a
 * part cut anywhere), or JSON-escapes one that is (a quote or a line break then takes two bytes):
 * 3 MiB parts fit either way. The API takes up to 5 MiB where nothing stands between.
 */
export const PART_BYTES = 3 * 1024 * 1024;
const RETRIES = 3;

export type FileFormat = 'csv' | 'json' | 'ndjson';

export const CONTENT_TYPES: Record<FileFormat, string> = {
  csv: 'text/csv',
  json: 'application/json',
  ndjson: 'application/x-ndjson',
};

/** A file's format by its name, else its type; CSV when neither says. */
export function formatOf(file: { name: string; type: string }): FileFormat {
  const name = file.name.toLowerCase();
  if (name.endsWith('.ndjson') || name.endsWith('.jsonl') || file.type.includes('ndjson')) return 'ndjson';
  if (name.endsWith('.json') || file.type === 'application/json') return 'json';
  return 'csv';
}

export interface ImportOptions {
  format: FileFormat;
  mode: 'insert' | 'upsert' | 'replace';
  header: boolean;
  delimiter: string;
  /** CSV: the table's columns in the file's order, when they are not the header's. */
  columns?: string[];
}

export interface ImportOutcome {
  rows: number;
  message: string;
}

const wait = (ms: number) => new Promise((done) => setTimeout(done, ms));
/** A failure worth sending again: the network, or the service busy or down for a moment. */
const passing = (error: unknown) =>
  error instanceof ApiError && (error.status === 0 || error.status >= 500 || error.status === 429);

/** What the console reads of an import's state (GET .../imports/:id). */
interface ImportState {
  state: 'open' | 'committing' | 'committed';
  outcome?: ImportOutcome;
}

/** How long a commit may run (QUERY_TIMEOUT_MS and 30 s by default, a host restart besides). */
const COMMIT_WAIT_MS = 90_000;
const POLL_MS = 1000;

export async function withRetries<T>(send: () => Promise<T>, signal: AbortSignal): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      if (signal.aborted || attempt >= RETRIES || !passing(error)) throw error;
      await wait(500 * attempt);
    }
  }
}

/**
 * The import's state once no commit of it runs, read every second while it is committing or the
 * service does not answer (restarting); undefined when that lasts past COMMIT_WAIT_MS.
 */
async function settledState(at: string, schema: string, signal: AbortSignal) {
  for (let waited = 0; waited <= COMMIT_WAIT_MS; waited += POLL_MS) {
    try {
      const read = await api<ImportState>('GET', at, { query: { schema }, signal });
      if (read.state !== 'committing') return read;
    } catch (error) {
      if (signal.aborted || !passing(error)) throw error;
    }
    await wait(POLL_MS);
  }
  return undefined;
}

/**
 * Commits the import. A commit whose answer never came (the network, the service restarted under
 * it) is not taken for failed: the import's state says what became of it once its transaction has
 * ended: committed, with its outcome; or open again, nothing written, to be committed again (up
 * to three times).
 */
async function commit(at: string, schema: string, parts: number, signal: AbortSignal) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await api<ImportOutcome>('POST', `${at}/commit`, { body: { schema, parts }, signal });
    } catch (error) {
      if (signal.aborted || attempt >= RETRIES || !passing(error)) throw error;
      const settled = await settledState(at, schema, signal);
      if (settled?.state === 'committed' && settled.outcome) return settled.outcome;
      if (settled?.state !== 'open') throw error;
    }
  }
}

/**
 * Imports the file: opens an import, sends its parts in turn (a failed one again, up to three
 * times), commits (an interrupted commit looked up, and sent again when it wrote nothing). Stopped
 * or refused, the import is abandoned: its parts do not wait out their expiry, nor count against
 * the schema's open imports.
 */
export async function importFile(
  file: Blob,
  where: { schema: string; table: string },
  options: ImportOptions,
  onProgress: (sentBytes: number) => void,
  signal: AbortSignal,
): Promise<ImportOutcome> {
  const path = `table/${encodeURIComponent(where.table)}/imports`;
  const { id } = await api<{ id: string }>('POST', path, {
    body: {
      schema: where.schema,
      format: options.format,
      mode: options.mode,
      header: options.header,
      delimiter: options.delimiter,
      ...(options.columns ? { columns: options.columns } : {}),
    },
    signal,
  });
  try {
    const parts = Math.max(1, Math.ceil(file.size / PART_BYTES));
    for (let part = 1; part <= parts; part++) {
      const blob = file.slice((part - 1) * PART_BYTES, part * PART_BYTES);
      await withRetries(
        () =>
          api('PUT', `${path}/${id}/parts/${part}`, {
            query: { schema: where.schema },
            body: { blob, contentType: CONTENT_TYPES[options.format] },
            signal,
          }),
        signal,
      );
      onProgress(Math.min(file.size, part * PART_BYTES));
    }
    return await commit(`${path}/${id}`, where.schema, parts, signal);
  } catch (error) {
    // Stopped or refused, its parts are deleted now rather than held (and counted) for an hour.
    await api('DELETE', `${path}/${id}`, { query: { schema: where.schema } }).catch(() => undefined);
    throw error;
  }
}

/** The rows of an export page's JSON as its text: `{"table":..,"count":N,("nextCursor":..,)"data":[ROWS]}`. */
function jsonRows(text: string): { rows: string; count: number; next: string | undefined } {
  const start = text.indexOf('"data":[') + '"data":['.length;
  const head = JSON.parse(`${text.slice(0, start - '"data":['.length).replace(/,$/, '')}}`) as {
    count: number;
    nextCursor?: string;
  };
  return { rows: text.slice(start, text.lastIndexOf(']')), count: head.count, next: head.nextCursor };
}

/**
 * Every row the export's query finds, page after page by its cursor, as one file: CSV with one
 * header line, or one JSON array. `onProgress` hears the rows read so far.
 */
export async function exportAll(
  where: { schema: string; table: string },
  format: 'csv' | 'json',
  query: Query,
  onProgress: (rows: number) => void,
  signal: AbortSignal,
): Promise<Blob> {
  const pieces: string[] = format === 'json' ? ['['] : [];
  let after: string | undefined;
  let rows = 0;
  do {
    const page = await withRetries(
      () =>
        answer('GET', `table/${encodeURIComponent(where.table)}/export`, {
          query: {
            ...query,
            schema: where.schema,
            format,
            limit: 10_000,
            ...(after ? { after, ...(format === 'csv' ? { header: false } : {}) } : {}),
          },
          signal,
        }),
      signal,
    );
    const text = await page.text();
    if (format === 'csv') {
      pieces.push(text);
      rows += text.split('\n').length - 1 - (after ? 0 : 1);
      after = page.headers.get('x-next-cursor') ?? undefined;
    } else {
      const { rows: found, count, next } = jsonRows(text);
      pieces.push(`${rows > 0 ? ',' : ''}${found}`);
      rows += count;
      after = next;
    }
    onProgress(rows);
  } while (after);
  if (format === 'json') pieces.push(']');
  return new Blob(pieces, { type: format === 'csv' ? 'text/csv' : 'application/json' });
}
