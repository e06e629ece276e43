import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { StringDecoder } from 'node:string_decoder';
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import {
  type CsvOptions,
  csvRecords,
  type ImportFormat,
  type ImportMode,
  JsonRowSplitter,
  rowLine,
  type TargetColumn,
} from '#lib/admin/import-format';
import { columnNameFor } from '#lib/admin/import-infer';
import { tableInfoQuery, toTableInfo } from '#lib/db/catalog';
import { runCatalogRead } from '#lib/db/catalog-read';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName, quoteLiteral } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { inTransaction } from '#lib/db/transaction';
import { BadRequest } from '#lib/errors';

/**
 * An import: a file's rows streamed into a table with COPY ... FROM STDIN, as the schema's role,
 * in one transaction, so a bad value anywhere leaves nothing written and is a 400 naming its line
 * and column. CSV goes to COPY as it is (PostgreSQL parses it); JSON and NDJSON rows are written
 * as CSV lines as they arrive. `insert` adds the rows, `replace` deletes the table's rows first,
 * `upsert` copies into a temporary table and merges on the primary key.
 */

export interface ImportOptions {
  format: ImportFormat;
  mode: ImportMode;
  csv: CsvOptions;
  /** The table's columns in the file's order (CSV), or the keys taken (JSON); default: the header, the first part's keys. */
  columns?: string[] | undefined;
}

interface ImportColumn extends TargetColumn {
  /** GENERATED ALWAYS (a stored expression or an identity): COPY cannot write it. */
  generated: boolean;
}

interface ImportTable {
  columns: ImportColumn[];
  primaryKey: string[];
}

/** tableInfo (lib/db/catalog) and, per column, whether it is an array and GENERATED ALWAYS: one read. */
const IMPORT_TABLE = tableInfoQuery(`,
         (SELECT coalesce(json_agg(json_build_object(
                   'array', t.typcategory = 'A', 'generated', a.attgenerated <> '' OR a.attidentity = 'a')
                   ORDER BY a.attnum), '[]')
            FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
           WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS import_columns`);

const importTable = (catalog: pg.Pool, schema: string, table: string) =>
  runCatalogRead<ImportTable>(catalog, {
    name: 'dbadmin.import-target',
    text: IMPORT_TABLE,
    values: [schema, table],
    schema,
    decode: (row) => {
      const info = toTableInfo(row, schema, table);
      // Both lists are the table's live columns in attnum order.
      const more = (row?.import_columns ?? []) as Omit<ImportColumn, 'name'>[];
      const columns = info.columns.map((c, i) => ({
        name: c.name,
        ...(more[i] as Omit<ImportColumn, 'name'>),
      }));
      return { columns, primaryKey: info.primaryKey };
    },
  });

/**
 * A name in the file as the table's column: exactly, else the one column it matches ignoring
 * case, else the one named as lib/admin/import-infer would name it.
 */
function columnNamed(table: ImportTable, tableName: string, name: string, where: string): ImportColumn {
  const exact = table.columns.find((c) => c.name === name);
  const folded = table.columns.filter((c) => c.name.toLowerCase() === name.trim().toLowerCase());
  // As "new table from a file" names a column for it: `First Name` is first_name.
  const named = table.columns.filter((c) => c.name === columnNameFor(name));
  const found =
    exact ?? (folded.length === 1 ? folded[0] : undefined) ?? (named.length === 1 ? named[0] : undefined);
  if (!found) {
    throw new BadRequest(
      'Unknown column',
      `${where} "${name}" is not a column of "${tableName}" (${table.columns.map((c) => c.name).join(', ')}); name the columns with columns=`,
    );
  }
  if (found.generated) {
    throw new BadRequest(
      'Generated column',
      `column "${found.name}" of "${tableName}" is GENERATED ALWAYS: leave it out of the file (or name the others with columns=)`,
    );
  }
  return found;
}

/** The file's columns: named (`columns`), from the header or the first row, else every writable column. */
function fileColumns(table: ImportTable, tableName: string, names: string[] | undefined, where: string) {
  const columns = names
    ? names.map((name) => columnNamed(table, tableName, name, where))
    : table.columns.filter((c) => !c.generated);
  const seen = new Set<string>();
  for (const column of columns) {
    if (seen.has(column.name))
      throw new BadRequest('Duplicate column', `${where} names "${column.name}" twice`);
    seen.add(column.name);
  }
  if (columns.length === 0) throw new BadRequest('No columns', 'the import names no column to write');
  return columns;
}

/** The bytes of the file, one chunk at a time, with a first look at its start. */
class Source {
  private readonly iterator: AsyncIterator<Buffer>;
  private first: Buffer | undefined;

  constructor(chunks: AsyncIterable<Buffer>) {
    this.iterator = chunks[Symbol.asyncIterator]();
  }

  /** The first chunk, without its byte order mark; 400 when the file is empty. */
  async start(): Promise<Buffer> {
    let { value, done } = await this.iterator.next();
    while (!done && value.length === 0) ({ value, done } = await this.iterator.next());
    if (done || !value) throw new BadRequest('Empty file', 'the file holds nothing to import');
    const bom = value[0] === 0xef && value[1] === 0xbb && value[2] === 0xbf;
    const first = bom ? value.subarray(3) : value;
    this.first = first;
    return first;
  }

  async *chunks(): AsyncGenerator<Buffer> {
    if (this.first) yield this.first;
    for (;;) {
      const { value, done } = await this.iterator.next();
      if (done) return;
      yield value;
    }
  }
}

/** What a COPY error's `where` says: `COPY t, line 3, column age: "x"`. */
function copyPosition(error: unknown): { line: number; column?: string } | undefined {
  const where = isPgError(error) ? (error as { where?: unknown }).where : undefined;
  if (typeof where !== 'string') return undefined;
  // The COPY's own line: a trigger's error puts its function's context (with its line) first.
  const copying = where.split('\n').findLast((line) => line.startsWith('COPY '));
  const match = copying ? /, line (\d+)(?:, column ([^:]+))?/.exec(copying) : null;
  if (!match) return undefined;
  return { line: Number(match[1]), ...(match[2] ? { column: match[2] } : {}) };
}

interface Plan {
  columns: ImportColumn[];
  /** COPY's format: CSV as the file is, or text (a JSON row a line, escaped). */
  format: 'csv' | 'text';
  /** COPY's options after FORMAT. */
  copyOptions: string;
  /** The bytes COPY reads. */
  data: AsyncIterable<Buffer | string>;
  /** A COPY line number as the caller counts: the file's line (CSV), the row and its line (JSON). */
  where: (line: number) => string;
}

const BACKSLASH = 0x5c;
const DOT = 0x2e;
const LF = 0x0a;
const CR = 0x0d;

/** Where a CSV's bytes stand: in quotes or not, on which line, and how much of `\.` a line starts with. */
class EndMarkerWatch {
  private inQuotes = false;
  line = 1;
  /** 1: at a line's start; 2: after a `\` there; 3: after `\.` there; 0: elsewhere. */
  private state = 1;

  constructor(private readonly quote: number) {}

  /** Reads one byte; false when it ends a line that was `\.` alone. */
  step(byte: number): boolean {
    if (byte === LF || byte === CR) return this.lineEnds(byte);
    if (byte === this.quote) {
      this.inQuotes = !this.inQuotes;
      this.state = 0;
    } else if (this.state === 1 && byte === BACKSLASH) this.state = 2;
    else this.state = this.state === 2 && byte === DOT ? 3 : 0;
    return true;
  }

  private lineEnds(byte: number): boolean {
    if (this.state === 3) return false;
    if (byte === LF) this.line++;
    this.state = this.inQuotes ? 0 : 1;
    return true;
  }

  /** The data ended: false when its last line was `\.` alone. */
  end(): boolean {
    return this.state !== 3;
  }
}

/**
 * The CSV's bytes as they are, with one check on the way: COPY (PostgreSQL 13 to 17) takes a line
 * that is `\.` alone, outside quotes, for the end of the data and drops whatever follows, which
 * would import part of the file as if it were all of it. Such a line is a 400 naming it.
 */
async function* withoutEndMarker(chunks: AsyncIterable<Buffer>, quote: number): AsyncGenerator<Buffer> {
  const watch = new EndMarkerWatch(quote);
  const refuse = () =>
    new BadRequest(
      'Import failed',
      `line ${watch.line} is \\. alone, which COPY reads as the end of the data: quote it ("\\.") to import it as a value; nothing was imported`,
    );
  for await (const chunk of chunks) {
    for (const byte of chunk) if (!watch.step(byte)) throw refuse();
    yield chunk;
  }
  if (!watch.end()) throw refuse();
}

function csvPlan(
  source: Source,
  first: Buffer,
  table: ImportTable,
  tableName: string,
  options: ImportOptions,
): Plan {
  const csv = options.csv;
  let names = options.columns;
  if (!names && csv.header) {
    const [header] = csvRecords(first.toString('utf8'), csv, 1);
    if (!header) throw new BadRequest('No header', 'the first part holds no whole header line');
    names = header.map((name) => name ?? '');
  }
  const columns = fileColumns(table, tableName, names, options.columns ? 'columns=' : 'the header’s column');
  return {
    columns,
    format: 'csv',
    copyOptions: `, HEADER ${csv.header}, DELIMITER ${quoteLiteral(csv.delimiter)}, QUOTE ${quoteLiteral(csv.quote)}, NULL ${quoteLiteral(csv.null)}`,
    data: withoutEndMarker(source.chunks(), csv.quote.charCodeAt(0)),
    where: (line) => `line ${line}`,
  };
}

/** JSON rows as CSV lines, written as the bytes arrive. */
async function* jsonLines(
  source: Source,
  decoder: StringDecoder,
  splitter: JsonRowSplitter,
  firstRows: unknown[],
  columns: TargetColumn[],
) {
  let row = 0;
  const lines = (rows: unknown[]) =>
    rows.map((value) => rowLine(value as Record<string, unknown>, columns, `row ${++row}`)).join('');
  yield lines(firstRows);
  let started = false;
  for await (const chunk of source.chunks()) {
    // The first chunk was split already, for the column names.
    if (!started) {
      started = true;
      continue;
    }
    yield lines(splitter.push(decoder.write(chunk)));
  }
  yield lines(splitter.push(decoder.end()));
  yield lines(splitter.end());
}

async function jsonPlan(
  source: Source,
  first: Buffer,
  table: ImportTable,
  tableName: string,
  options: ImportOptions,
): Promise<Plan> {
  const splitter = new JsonRowSplitter(options.format === 'ndjson' ? 'ndjson' : 'json');
  // The first chunk's rows name the columns; a file of no rows at all imports nothing.
  const decoder = new StringDecoder('utf8');
  const firstRows = splitter.push(decoder.write(first));
  // Every key of the rows in the first part (the whole file, sent in one request), as they come.
  const found = options.columns ?? [...new Set(firstRows.flatMap((row) => Object.keys(row as object)))];
  const columns = fileColumns(
    table,
    tableName,
    found.length > 0 ? found : undefined,
    options.columns ? 'columns=' : 'the key',
  );
  // Each row's key as the file writes it (`Full Name`), for the column it goes to (full_name).
  const keys = columns.map((column, i) => ({ name: found[i] ?? column.name, array: column.array }));
  const lineOf = (row: number) => (options.format === 'ndjson' ? ` (line ${splitter.lineOf(row)})` : '');
  return {
    columns,
    format: 'text',
    copyOptions: '',
    data: jsonLines(source, decoder, splitter, firstRows, keys),
    where: (line) => `row ${line}${lineOf(line)}`,
  };
}

export interface ImportOutcome {
  success: true;
  message: string;
  rows: number;
  mode: ImportMode;
}

/** COPY the plan's data into `into` (columns in the file's order); answers how many rows. */
async function copyInto(client: pg.PoolClient, into: string, plan: Plan): Promise<number> {
  const columns = plan.columns.map((c) => quoteCatalogName(c.name)).join(', ');
  const stream = client.query(
    copyFrom(`COPY ${into} (${columns}) FROM STDIN WITH (FORMAT ${plan.format}${plan.copyOptions})`),
  );
  await pipeline(Readable.from(plan.data, { objectMode: false }), stream);
  return stream.rowCount;
}

/** The upsert's merge: the staged rows into the table, each key's row updated where it exists. */
function mergeSql(target: string, plan: Plan, primaryKey: string[]): string {
  const names = plan.columns.map((c) => quoteCatalogName(c.name));
  const others = plan.columns
    .filter((c) => !primaryKey.includes(c.name))
    .map((c) => quoteCatalogName(c.name));
  const update =
    others.length === 0
      ? 'DO NOTHING'
      : `DO UPDATE SET ${others.map((c) => `${c} = EXCLUDED.${c}`).join(', ')}`;
  return `INSERT INTO ${target} (${names.join(', ')}) SELECT ${names.join(', ')} FROM pg_temp.dbadmin_import
          ON CONFLICT (${primaryKey.map(quoteCatalogName).join(', ')}) ${update}`;
}

function assertUpsertable(table: ImportTable, tableName: string, plan: Plan) {
  if (table.primaryKey.length === 0) {
    throw new BadRequest(
      'No primary key',
      `upsert matches rows by primary key, and "${tableName}" has none: use insert or replace`,
    );
  }
  const missing = table.primaryKey.filter((key) => !plan.columns.some((c) => c.name === key));
  if (missing.length > 0) {
    throw new BadRequest(
      'Key missing',
      `upsert matches rows by primary key: the file needs its column(s) ${missing.join(', ')}`,
    );
  }
}

async function write(
  client: pg.PoolClient,
  target: string,
  table: ImportTable,
  plan: Plan,
  mode: ImportMode,
) {
  if (mode === 'replace') await client.query(`DELETE FROM ${target}`);
  if (mode !== 'upsert') return copyInto(client, target, plan);
  const names = plan.columns.map((c) => quoteCatalogName(c.name)).join(', ');
  await client.query(
    `CREATE TEMPORARY TABLE dbadmin_import ON COMMIT DROP AS SELECT ${names} FROM ${target} WITH NO DATA`,
  );
  await copyInto(client, 'pg_temp.dbadmin_import', plan);
  return (await client.query(mergeSql(target, plan, table.primaryKey))).rowCount ?? 0;
}

/**
 * An import in parts' commit (lib/admin/import-sessions), told of the import's transaction on its
 * session: either may throw, and then nothing is written.
 */
export interface ImportCommit {
  /** The transaction has begun, with this id (pg_current_xact_id), and nothing is read or written yet. */
  begun(client: pg.PoolClient, xid: string): Promise<void>;
  /** The rows are written; the transaction commits next. */
  written(client: pg.PoolClient, outcome: ImportOutcome): Promise<void>;
}

const VERB = {
  insert: 'imported',
  upsert: 'imported or updated',
  replace: 'imported in place of the table’s rows',
};

const outcomeOf = (rows: number, tableName: string, mode: ImportMode): ImportOutcome => ({
  success: true,
  message: `${rows} row${rows === 1 ? '' : 's'} ${VERB[mode]} into "${tableName}"`,
  rows,
  mode,
});

/**
 * Imports the file (its bytes as they arrive) into the table, all or nothing. A value PostgreSQL
 * refuses is a 400 naming the line (CSV) or row (JSON), the column and its reason. With `commit`,
 * the file is read and written only once the commit has been told the transaction.
 */
export async function importRows(
  access: SchemaAccess,
  tableName: string,
  options: ImportOptions,
  chunks: AsyncIterable<Buffer>,
  commit?: ImportCommit,
): Promise<ImportOutcome> {
  const target = qualified(access.schema, tableName);
  let plan: Plan | undefined;
  const work = async (client: pg.PoolClient) => {
    if (commit) {
      const { rows } = await client.query<{ xid: string }>(
        'SELECT pg_catalog.pg_current_xact_id()::pg_catalog.text AS xid',
      );
      await commit.begun(client, (rows[0] as { xid: string }).xid);
    }
    const table = await importTable(access.catalog, access.schema, tableName);
    const source = new Source(chunks);
    const first = await source.start();
    plan =
      options.format === 'csv'
        ? csvPlan(source, first, table, tableName, options)
        : await jsonPlan(source, first, table, tableName, options);
    if (options.mode === 'upsert') assertUpsertable(table, tableName, plan);
    const outcome = outcomeOf(
      await write(client, target, table, plan, options.mode),
      tableName,
      options.mode,
    );
    await commit?.written(client, outcome);
    return outcome;
  };
  // Explained inside the session's work: past it, the executor has made it a plain 400.
  return access.run((client) =>
    inTransaction(client, () => work(client), { audit: access.audit, rows: (o) => o.rows }).catch(
      (error: unknown) => {
        throw plan ? explained(error, plan) : error;
      },
    ),
  );
}

/** A database error during the import as a 400 that says where in the file; others as they are. */
function explained(error: unknown, plan: Plan): unknown {
  if (!isPgError(error)) return error;
  if (error.code === '21000') {
    return new BadRequest(
      'Import failed',
      'the file holds a primary key more than once, and upsert can write each key once; nothing was imported',
      error,
    );
  }
  const at = copyPosition(error);
  if (!at) return error;
  const column = at.column ? `, column ${at.column}` : '';
  const detail = error.detail ? ` (${error.detail})` : '';
  return new BadRequest(
    'Import failed',
    `${plan.where(at.line)}${column}: ${error.message}${detail}; nothing was imported`,
    error,
  );
}
