import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { SchemaDdl } from '#lib/admin/schema-ddl';
import { BadRequest } from '#lib/errors';

/**
 * A tenant's bundle, as it travels: one stream of bytes, cut into parts, and a manifest that
 * describes it.
 *
 * - The stream opens with a header line: the schema's structure as the statements that make it
 *   again under any name (lib/admin/schema-ddl, OPEN_TARGET), as JSON.
 * - Then each table's rows follow in COPY's text form, one table after the other. The manifest
 *   says how many bytes each table takes.
 * - The stream is cut into parts of at most PART_BYTES at line ends, so each part is whole UTF-8
 *   text and fits in one Lambda response. A single line longer than a part is cut between
 *   characters.
 * - The manifest holds each part's SHA-256 and the whole stream's, and is signed with a key
 *   derived from the service's secret (HMAC-SHA-256). A damaged part fails its checksum. A part or
 *   manifest edited by hand fails the signature, even with its checksums written again. So a
 *   bundle restores only where DBADMIN_SECRET is the one it was made under.
 */

export const BUNDLE_FORMAT = 'dbadmin-bundle';
export const BUNDLE_VERSION = 1;
/** Under Lambda's 6 MB response, with room for its headers. */
export const PART_BYTES = 4 * 1024 * 1024;

export interface BundleHeader {
  ddl: SchemaDdl;
}

export interface BundleTable {
  /** As the catalog quotes it, unqualified. */
  table: string;
  rows: number;
  bytes: number;
}

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
  /** The header line's bytes, its newline included. */
  header: number;
  tables: BundleTable[];
  rows: number;
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
 * Cuts a stream into parts at line ends as it is written, handing each to `store` (awaited: the
 * writer waits for the store). Counts the bytes, and hashes each part and the whole.
 */
export class PartWriter {
  readonly parts: BundlePart[] = [];
  bytes = 0;
  private readonly whole = createHash('sha256');
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private storing: Promise<void> = Promise.resolve();

  constructor(
    private readonly store: (n: number, bytes: Buffer) => Promise<void>,
    private readonly partBytes = PART_BYTES,
  ) {}

  /** Takes a copy of `chunk`: a stream may reuse its memory (pg's reader does) once this returns. */
  async write(chunk: Buffer): Promise<void> {
    this.bytes += chunk.length;
    this.whole.update(chunk);
    this.pending.push(Buffer.from(chunk));
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < this.partBytes) return;
    let rest = Buffer.concat(this.pending);
    while (rest.length >= this.partBytes) {
      const cut = cutAt(rest, this.partBytes);
      await this.emit(rest.subarray(0, cut));
      rest = rest.subarray(cut);
    }
    this.pending = [rest];
    this.pendingBytes = rest.length;
  }

  /** The last part, and the whole stream's hash, once every part is stored. */
  async end(): Promise<string> {
    if (this.pendingBytes > 0) await this.emit(Buffer.concat(this.pending));
    this.pending = [];
    this.pendingBytes = 0;
    await this.storing;
    return this.whole.digest('hex');
  }

  /** One part is stored while the next is read: at most two in memory. */
  private async emit(part: Buffer) {
    await this.storing;
    this.parts.push({ bytes: part.length, sha256: sha256(part) });
    this.storing = this.store(this.parts.length, part);
    // Awaited by the next part or by end(); should the writer be abandoned first, not unhandled.
    this.storing.catch(() => undefined);
  }
}

/** Where to cut a part of at most `max` bytes: after its last line end, else between characters. */
function cutAt(bytes: Buffer, max: number): number {
  const lineEnd = bytes.lastIndexOf(0x0a, max - 1);
  if (lineEnd >= 0) return lineEnd + 1;
  let cut = max;
  // Never inside a UTF-8 character: back off its continuation bytes (10xxxxxx).
  while (cut > 0 && ((bytes[cut] as number) & 0xc0) === 0x80) cut--;
  return cut;
}

/**
 * Reads a bundle's stream again from its parts, one part in memory at a time, each checked against
 * the manifest, and the whole against its hash at the end: `take(n)` the next n bytes.
 */
export class BundleReader {
  private part = 0;
  private buffered: Buffer = Buffer.alloc(0);
  private readonly whole = createHash('sha256');

  constructor(
    private readonly manifest: BundleManifest,
    private readonly load: (n: number) => Promise<Buffer>,
  ) {}

  /** The next `n` bytes, in chunks as the parts hold them. */
  async *take(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buffered.length === 0) await this.next();
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

  /** Refuses a stream that is not the manifest's whole (read to its end). */
  async end(): Promise<void> {
    if (this.buffered.length > 0 || this.part < this.manifest.parts.length) {
      throw refused('the bundle holds more than its tables');
    }
    if (this.whole.digest('hex') !== this.manifest.sha256)
      throw refused('the bundle’s checksum does not match');
  }

  private async next() {
    this.part += 1;
    if (this.part > this.manifest.parts.length) throw refused('the bundle ends before its tables do');
    const bytes = await this.load(this.part);
    checkPart(this.manifest, this.part, bytes);
    this.whole.update(bytes);
    this.buffered = bytes;
  }
}
