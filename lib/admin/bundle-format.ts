import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { once } from 'node:events';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants, createBrotliCompress, createBrotliDecompress } from 'node:zlib';
import type { SchemaDdl } from '#lib/admin/schema-ddl';
import { ApiError, BadRequest } from '#lib/errors';

/**
 * A tenant's bundle, as it travels: one stream of bytes, cut into parts, and a manifest that
 * describes it.
 *
 * - The stream opens with a header line: the schema's structure as the statements that make it
 *   again under any name (lib/admin/schema-ddl, OPEN_TARGET), as JSON.
 * - Then each table's rows follow as COPY writes them, one table after the other: in its binary
 *   form where every column's type is PostgreSQL's own, else in text (lib/admin/clone, copyOut).
 *   The manifest says how many bytes each table takes.
 * - The stream is compressed with Brotli at quality 1 (rows shrink to a quarter or a third, at
 *   twice gzip's fastest speed), and the compressed bytes are cut into parts of PART_BYTES, the
 *   last shorter: a fraction of the bytes to store, send and read back. Each part fits one Lambda
 *   response as base64.
 * - The manifest holds each part's SHA-256 and the whole stream's (before compression), and is
 *   signed with a key derived from the service's secret (HMAC-SHA-256). A damaged part fails its checksum. A part or
 *   manifest edited by hand fails the signature, even with its checksums written again. So a
 *   bundle restores only where DBADMIN_SECRET is the one it was made under.
 */

export const BUNDLE_FORMAT = 'dbadmin-bundle';
/** 2: the stream is compressed, binary rows among it (1 held text alone). */
export const BUNDLE_VERSION = 2;
/** Under Lambda's 6 MB response as base64 (5.6 MB), with room for its headers. */
export const PART_BYTES = 4 * 1024 * 1024;
/** What the writer may hand the compressor ahead of it: the rows are read while it works. */
const WRITE_AHEAD = 4 * 1024 * 1024;
/** Handed to the compressor this much at a time: it works twice as fast on a block as on COPY's chunks. */
const BATCH_BYTES = 1024 * 1024;
/** Quality 1: a sixth smaller than 0, for a few more milliseconds a megabyte. */
const COMPRESSION = { params: { [constants.BROTLI_PARAM_QUALITY]: 1 }, chunkSize: 256 * 1024 };

export interface BundleHeader {
  ddl: SchemaDdl;
}

export interface BundleTable {
  /** As the catalog quotes it, unqualified. */
  table: string;
  rows: number;
  /** Its rows' bytes in the stream (before compression). */
  bytes: number;
}

/** A part as stored and sent: compressed bytes. */
export interface BundlePart {
  bytes: number;
  sha256: string;
}

export interface BundleManifest {
  format: typeof BUNDLE_FORMAT;
  version: typeof BUNDLE_VERSION;
  id: string;
  /** The schema it was made from. */
  schema: string;
  createdAt: string;
  /** The server's version (server_version_num) it was made on. */
  postgres: number;
  /** The structure's fingerprint (lib/admin/drift): a restore replacing a schema's data needs the same. */
  fingerprint: string;
  /**
   * What in the schema names it (a function body's `shop.items`): such a bundle restores as a new
   * schema only under its own name. Empty: under any name.
   */
  selfNamed: string[];
  /** The header line's bytes, its newline included (before compression). */
  header: number;
  tables: BundleTable[];
  rows: number;
  /** The stream's bytes, and their SHA-256, before compression. */
  bytes: number;
  sha256: string;
  parts: BundlePart[];
  /** HMAC-SHA-256 of the rest, in canonical JSON, under the service's bundle key. */
  mac: string;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** JSON with every object's keys sorted: the same text for the same manifest, however it was sent. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

const macOf = (secret: string, unsigned: Omit<BundleManifest, 'mac'>) =>
  createHmac('sha256', createHmac('sha256', secret).update('dbadmin tenant bundle').digest())
    .update(canonical(unsigned))
    .digest('hex');

export const sign = (secret: string, unsigned: Omit<BundleManifest, 'mac'>): BundleManifest => ({
  ...unsigned,
  mac: macOf(secret, unsigned),
});

const refused = (why: string) =>
  new BadRequest('Bundle refused', `${why}: send the manifest and parts exactly as the backup gave them`);

/** The manifest a caller sent, checked: its shape, and its signature under this service's secret. */
export function verifiedManifest(secret: string, sent: unknown): BundleManifest {
  const manifest = sent as Partial<BundleManifest> | null;
  if (manifest?.format !== BUNDLE_FORMAT) throw refused('this is not a dbadmin bundle manifest');
  if (manifest.version !== BUNDLE_VERSION) {
    throw new BadRequest(
      'Bundle version',
      `the bundle is version ${manifest.version}; this service restores version ${BUNDLE_VERSION}`,
    );
  }
  const { mac, ...unsigned } = manifest as BundleManifest;
  const expected = Buffer.from(macOf(secret, unsigned), 'hex');
  const given = Buffer.from(typeof mac === 'string' ? mac : '', 'hex');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw refused(
      'the manifest does not carry this service’s signature: it was edited, or made under another DBADMIN_SECRET',
    );
  }
  return manifest as BundleManifest;
}

/** Refuses a part that is not the manifest's part `n` (from 1). */
export function checkPart(manifest: BundleManifest, n: number, bytes: Buffer): void {
  const expected = manifest.parts[n - 1];
  if (!expected) {
    throw new BadRequest('No such part', `the bundle has parts 1 to ${manifest.parts.length}, not ${n}`);
  }
  if (bytes.length !== expected.bytes || sha256(bytes) !== expected.sha256) {
    throw refused(
      `part ${n} is not the bundle's (${bytes.length} bytes, expected ${expected.bytes} with SHA-256 ${expected.sha256}): it was damaged or edited`,
    );
  }
}

/**
 * Compresses a stream as it is written (on zlib's own threads, while the rows are read) and
 * cuts the compressed bytes into parts of `partBytes`, handing each to `store` in order, one at a
 * time. Counts the stream's bytes, and hashes each part and the whole stream. The writer waits for
 * the store once two parts are queued: at most three parts in memory.
 */
export class PartWriter {
  readonly parts: BundlePart[] = [];
  /** The stream's bytes (before compression). */
  bytes = 0;
  private readonly whole = createHash('sha256');
  private readonly compress = createBrotliCompress(COMPRESSION);
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private compressed: Buffer[] = [];
  private compressedBytes = 0;
  private storing: Promise<void> = Promise.resolve();
  private queued = 0;
  private failed: Error | undefined;

  constructor(
    private readonly store: (n: number, bytes: Buffer) => Promise<void>,
    private readonly partBytes = PART_BYTES,
  ) {
    this.compress.on('data', (chunk: Buffer) => this.cut(chunk));
    this.compress.on('error', (error) => {
      this.failed = error;
    });
  }

  /** Takes a copy of `chunk`: a stream may reuse its memory (pg's reader does) once this returns. */
  async write(chunk: Buffer): Promise<void> {
    if (this.failed) throw this.failed;
    this.bytes += chunk.length;
    this.whole.update(chunk);
    this.batch.push(Buffer.from(chunk));
    this.batchBytes += chunk.length;
    if (this.batchBytes >= BATCH_BYTES) this.flushBatch();
    if (this.compress.writableLength >= WRITE_AHEAD) await once(this.compress, 'drain');
    if (this.queued > 1) await this.storing;
  }

  /** The last part, and the whole stream's hash, once every part is stored. */
  async end(): Promise<string> {
    if (this.failed) throw this.failed;
    this.flushBatch();
    const ended = once(this.compress, 'end');
    this.compress.end();
    await ended;
    if (this.compressedBytes > 0) this.emit(Buffer.concat(this.compressed));
    this.compressed = [];
    this.compressedBytes = 0;
    await this.storing;
    return this.whole.digest('hex');
  }

  /** Stops a writer whose stream will not end (its rows failed): the compressor's memory is let go. */
  abandon(): void {
    this.compress.destroy();
  }

  private flushBatch() {
    if (this.batchBytes === 0) return;
    this.compress.write(Buffer.concat(this.batch, this.batchBytes));
    this.batch = [];
    this.batchBytes = 0;
  }

  private cut(chunk: Buffer) {
    this.compressed.push(chunk);
    this.compressedBytes += chunk.length;
    if (this.compressedBytes < this.partBytes) return;
    let rest = Buffer.concat(this.compressed);
    while (rest.length >= this.partBytes) {
      this.emit(rest.subarray(0, this.partBytes));
      rest = rest.subarray(this.partBytes);
    }
    this.compressed = [rest];
    this.compressedBytes = rest.length;
  }

  private emit(part: Buffer) {
    this.parts.push({ bytes: part.length, sha256: sha256(part) });
    const n = this.parts.length;
    this.queued += 1;
    const stored = this.storing.then(async () => {
      await this.store(n, part);
      this.queued -= 1;
    });
    // Awaited by write() or end(); should the writer be abandoned first, not unhandled.
    stored.catch(() => undefined);
    this.storing = stored;
  }
}

/**
 * Reads a bundle's stream again from its parts, each checked against the manifest as it is loaded
 * (the next while this one is read), decompressed, and the whole checked against its hash at the
 * end: `take(n)` the next n bytes of the stream.
 */
export class BundleReader {
  private readonly stream: AsyncGenerator<Buffer>;
  private buffered: Buffer = Buffer.alloc(0);
  private readonly whole = createHash('sha256');
  /** The part being loaded, ahead of its turn. */
  private loading: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly manifest: BundleManifest,
    private readonly load: (n: number) => Promise<Buffer>,
  ) {
    this.stream = this.decompressed();
  }

  /** The next `n` bytes, in chunks as they are decompressed. */
  async *take(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buffered.length === 0) {
        const next = await this.stream.next();
        if (next.done) throw refused('the bundle ends before its tables do');
        this.whole.update(next.value);
        this.buffered = next.value;
      }
      const chunk = this.buffered.subarray(0, left);
      this.buffered = this.buffered.subarray(chunk.length);
      left -= chunk.length;
      yield chunk;
    }
  }

  async header(): Promise<BundleHeader> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.take(this.manifest.header)) chunks.push(chunk);
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8')) as BundleHeader;
    } catch {
      throw refused('the bundle’s header is not the structure it should hold');
    }
  }

  /**
   * Stops reading, read to its end or not: no part is loaded after this answers, so the caller may
   * hand its connection on.
   */
  async close(): Promise<void> {
    await this.stream.return(undefined);
    await this.loading.catch(() => undefined);
  }

  /** Refuses a stream that is not the manifest's whole (read to its end, every part loaded). */
  async end(): Promise<void> {
    if (this.buffered.length > 0 || !(await this.stream.next()).done) {
      throw refused('the bundle holds more than its tables');
    }
    if (this.whole.digest('hex') !== this.manifest.sha256)
      throw refused('the bundle’s checksum does not match');
  }

  private async *decompressed(): AsyncGenerator<Buffer> {
    const decompress = createBrotliDecompress({ chunkSize: 256 * 1024 });
    const feeding = pipeline(Readable.from(this.parts()), decompress);
    // Its failure (a part refused) is the iteration's too, which throws it; awaited below.
    feeding.catch(() => undefined);
    try {
      for await (const chunk of decompress) yield chunk as Buffer;
      await feeding;
    } catch (error) {
      // zlib's errors (ERR__ERROR_FORMAT_..., Z_BUF_ERROR) mean the parts; any other (a part's
      // load: the connection, a timeout) is the database's, as it is.
      const code = String((error as { code?: unknown }).code ?? '');
      throw (code.startsWith('ERR_') || code.startsWith('Z_')) && !(error instanceof ApiError)
        ? refused('the bundle’s parts do not decompress')
        : error;
    } finally {
      decompress.destroy();
    }
  }

  /** The parts in order, each checked; the next one loading while this one is decompressed. */
  private async *parts(): AsyncGenerator<Buffer> {
    const count = this.manifest.parts.length;
    const checked = async (n: number) => {
      const bytes = await this.load(n);
      checkPart(this.manifest, n, bytes);
      return bytes;
    };
    let next = count > 0 ? checked(1) : undefined;
    for (let n = 1; next; n++) {
      this.loading = next;
      const bytes = await next;
      next = n < count ? checked(n + 1) : undefined;
      next?.catch(() => undefined);
      if (next) this.loading = next;
      yield bytes;
    }
  }
}
