import { answer, api } from './api';
import { withRetries } from './transfer/transfer';

/**
 * A tenant's backup as one file, and back: the manifest as one JSON line, then the parts' bytes
 * one after the other (`<schema>-<createdAt>.dbadmin-bundle`). Downloaded part by part
 * (GET /api/backups/...), restored by opening a restore with the manifest, sending each part as
 * the file holds it, and committing (POST /api/restores...); parts travel three at a time. Bytes
 * stay bytes all the way: parts are compressed, and the service checks each part's SHA-256.
 */

export const BUNDLE_EXTENSION = '.dbadmin-bundle';

/** One backup, as GET /api/backups lists it. */
export interface BackupSummary {
  id: string;
  schema: string;
  state: 'writing' | 'ready';
  createdAt: string;
  expiresAt: string;
  tables?: number;
  rows?: number;
  bytes?: number;
  parts?: number;
}

/** What the service signed (GET /api/backups/{id}): sent back as it is to open a restore. */
export interface Manifest {
  format: 'dbadmin-bundle';
  id: string;
  schema: string;
  createdAt: string;
  tables: { table: string; rows: number; bytes: number }[];
  rows: number;
  parts: { bytes: number; sha256: string }[];
}

export interface RestoreOutcome {
  schema: string;
  mode: 'new' | 'replace';
  from: string;
  tables: number;
  rows: number;
}

/** Where a restore goes: over this schema's rows, or into a new schema with its login's password. */
export type RestoreTarget =
  | { mode: 'replace'; schema: string }
  | { mode: 'new'; schema: string; password: string };

const NEWLINE = 0x0a;
/** Parts in flight at once, each way: the service takes them side by side. */
const TRANSFERS = 3;

/**
 * Runs `transfer` for parts 1 to `count`, TRANSFERS at a time, `onDone` after each; answers them in
 * order. The first to fail cancels the others (through the signal each is given), as does `signal`.
 */
async function eachPart<T>(
  count: number,
  transfer: (n: number, signal: AbortSignal) => Promise<T>,
  onDone: (done: number) => void,
  signal: AbortSignal,
): Promise<T[]> {
  const lanes = new AbortController();
  const stop = () => lanes.abort();
  signal.addEventListener('abort', stop, { once: true });
  const results: T[] = [];
  let next = 1;
  let done = 0;
  const lane = async () => {
    for (let n = next++; n <= count && !lanes.signal.aborted; n = next++) {
      results[n - 1] = await transfer(n, lanes.signal);
      onDone(++done);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(TRANSFERS, count) }, lane));
  } catch (error) {
    lanes.abort();
    throw error;
  } finally {
    signal.removeEventListener('abort', stop);
  }
  return results;
}

/** The manifest line is read this much at a time: a few KB, unless the bundle has thousands of parts. */
const HEAD_CHUNK = 64 * 1024;

const backupPath = (id: string) => `backups/${encodeURIComponent(id)}`;

/** The backup as one file: its manifest line, then each part's bytes, read as bytes. */
export async function downloadBackup(
  backup: BackupSummary,
  onPart: (done: number, total: number) => void,
  signal: AbortSignal,
): Promise<{ file: Blob; name: string }> {
  const query = { schema: backup.schema };
  const manifest = await api<Manifest>('GET', backupPath(backup.id), { query, signal });
  const total = manifest.parts.length;
  onPart(0, total);
  const parts = await eachPart(
    total,
    async (n, lane) =>
      (await answer('GET', `${backupPath(backup.id)}/parts/${n}`, { query, signal: lane })).arrayBuffer(),
    (done) => onPart(done, total),
    signal,
  );
  return {
    file: new Blob([`${JSON.stringify(manifest)}\n`, ...parts], { type: 'application/octet-stream' }),
    name: `${manifest.schema}-${manifest.createdAt}${BUNDLE_EXTENSION}`,
  };
}

/** A bundle file read back: its manifest, and each part as a slice of the file's bytes. */
export interface BundleFile {
  manifest: Manifest;
  parts: Blob[];
}

const notABundle = (name: string, why: string) =>
  new Error(`${name} is not a dbadmin bundle (${why}): choose a file the Download button saved`);

/** The bytes before the file's first newline: read a chunk at a time, so a large file stays on disk. */
async function firstLine(file: Blob): Promise<{ line: Uint8Array; end: number } | undefined> {
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < file.size; at += HEAD_CHUNK) {
    const chunk = new Uint8Array(await file.slice(at, at + HEAD_CHUNK).arrayBuffer());
    const newline = chunk.indexOf(NEWLINE);
    chunks.push(newline < 0 ? chunk : chunk.subarray(0, newline));
    if (newline >= 0) {
      const line = new Uint8Array(at + newline);
      let offset = 0;
      for (const piece of chunks) {
        line.set(piece, offset);
        offset += piece.length;
      }
      return { line, end: at + newline + 1 };
    }
  }
  return undefined;
}

function parseManifest(name: string, line: Uint8Array): Manifest {
  let manifest: Partial<Manifest>;
  try {
    manifest = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(line)) as Partial<Manifest>;
  } catch {
    throw notABundle(name, 'its first line is not a manifest');
  }
  const sized = (part: unknown) =>
    Number.isSafeInteger((part as { bytes?: unknown })?.bytes) && (part as { bytes: number }).bytes >= 0;
  if (manifest?.format !== 'dbadmin-bundle' || !Array.isArray(manifest.parts) || !manifest.parts.every(sized))
    throw notABundle(name, 'its first line is not a manifest');
  return manifest as Manifest;
}

/** Splits a bundle file at its first newline byte; the rest is cut into parts by the manifest's byte counts. */
export async function readBundle(file: File): Promise<BundleFile> {
  const head = await firstLine(file);
  if (!head) throw notABundle(file.name, 'no manifest line');
  const manifest = parseManifest(file.name, head.line);
  const parts: Blob[] = [];
  let offset = head.end;
  for (const part of manifest.parts) {
    parts.push(file.slice(offset, offset + part.bytes));
    offset += part.bytes;
  }
  if (offset !== file.size) {
    const off =
      offset > file.size ? `${offset - file.size} bytes short` : `${file.size - offset} bytes too long`;
    throw new Error(`${file.name} is ${off} of what its manifest lists: it was cut or changed`);
  }
  return { manifest, parts };
}

/** Opens a restore of the bundle into `target`, sends its parts, and commits it. */
export async function restoreBundle(
  bundle: BundleFile,
  target: RestoreTarget,
  onPart: (sent: number, total: number) => void,
  signal: AbortSignal,
): Promise<RestoreOutcome> {
  const { schema } = target;
  const opened = await api<{ id: string; parts: number }>('POST', 'restores', {
    body: { schema, mode: target.mode, manifest: bundle.manifest },
    signal,
  });
  const at = `restores/${encodeURIComponent(opened.id)}`;
  const total = bundle.parts.length;
  onPart(0, total);
  try {
    await eachPart(
      total,
      // A part that did not get through (the service restarting) is sent again, as an import's is.
      (n, lane) =>
        withRetries(
          () =>
            api('PUT', `${at}/parts/${n}`, {
              query: { schema },
              body: { blob: bundle.parts[n - 1] as Blob, contentType: 'application/octet-stream' },
              signal: lane,
            }),
          lane,
        ),
      (done) => onPart(done, total),
      signal,
    );
    return await api<RestoreOutcome>('POST', `${at}/commit`, {
      body: target.mode === 'new' ? { schema, password: target.password } : { schema },
      signal,
    });
  } catch (error) {
    // Not left open, counting against the schema's four: abandoned, whatever stopped it.
    await api('DELETE', at, { query: { schema } }).catch(() => undefined);
    throw error;
  }
}
