import type pg from 'pg';
import type { Change } from '#lib/admin/schema-change';
import { columnOf, schemaNotFound, tableInfo, tableNotFound } from '#lib/db/catalog';
import { IDENTIFIER_MAX_LENGTH, qualified, quoteCatalogName, quoteIdent } from '#lib/db/identifiers';
import { isPgError, schemaBusy } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { BadRequest, NotFound } from '#lib/errors';

/**
 * A table's indexes: listed from the catalog, built and dropped as lib/admin/schema-change runs a
 * change. Locks as PostgreSQL's CREATE INDEX and DROP INDEX documentation gives them: a build
 * takes SHARE (writes wait, the table is read through), CONCURRENTLY SHARE UPDATE EXCLUSIVE (and
 * waits out writers and older snapshots, outside a transaction); a drop ACCESS EXCLUSIVE,
 * CONCURRENTLY SHARE UPDATE EXCLUSIVE.
 */

export const INDEX_METHODS = ['btree', 'hash', 'gin', 'gist', 'brin'] as const;
export type IndexMethod = (typeof INDEX_METHODS)[number];

/**
 * The reads run on the service's pool and must not wait on a lock a tenant holds, nor run its
 * code. The catalog rows take no lock: sizes come from relpages (pg_relation_size would lock the
 * index), plain key columns from pg_attribute. Deparsing does: pg_get_indexdef and pg_get_expr
 * open the table (AccessShareLock), so a tenant holding it in ACCESS EXCLUSIVE would stall them.
 * Definitions, expressions and predicates are therefore read apart, waiting at most 50 ms, and
 * answered null while the table is locked.
 */
const TABLE = `
    FROM pg_namespace n
    LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $2 AND c.relkind IN ('r', 'p', 'm')
   WHERE n.nspname = $1`;

const INDEXES = `
  SELECT c.oid IS NOT NULL AS table_exists,
         (SELECT coalesce(json_agg(json_build_object(
                    'name', ic.relname,
                    'columns', (SELECT coalesce(json_agg(a.attname ORDER BY k.ord), '[]')
                                  FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
                                  LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum AND k.attnum > 0
                                 WHERE k.ord <= i.indnkeyatts),
                    'include', (SELECT coalesce(json_agg(a.attname ORDER BY k.ord), '[]')
                                  FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
                                  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                                 WHERE k.ord > i.indnkeyatts),
                    'method', am.amname,
                    'unique', i.indisunique,
                    'primary', i.indisprimary,
                    'constraint', con.conname,
                    'partial', i.indpred IS NOT NULL,
                    'sizeBytes', ic.relpages::int8 * current_setting('block_size')::int8,
                    'valid', i.indisvalid,
                    'scans', s.idx_scan
                  ) ORDER BY ic.relname), '[]')
            FROM pg_index i
            JOIN pg_class ic ON ic.oid = i.indexrelid
            JOIN pg_am am ON am.oid = ic.relam
            LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
                                       AND con.contype IN ('p', 'u', 'x')
            LEFT JOIN pg_stat_user_indexes s ON s.indexrelid = i.indexrelid
           WHERE i.indrelid = c.oid) AS indexes
  ${TABLE}`;

/** Deparsed, which opens the table: the definition and each key column's text, by index name. */
const DEFINITIONS = `
  SELECT coalesce(json_object_agg(ic.relname, json_build_object(
           'definition', pg_get_indexdef(i.indexrelid),
           'keys', (SELECT json_agg(pg_get_indexdef(i.indexrelid, k.ord::int, false) ORDER BY k.ord)
                      FROM generate_series(1, i.indnkeyatts) AS k(ord)))), '{}') AS definitions
    FROM pg_index i
    JOIN pg_class ic ON ic.oid = i.indexrelid
    JOIN pg_class c ON c.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = $1 AND c.relname = $2`;

interface IndexRow {
  name: string;
  /** Key columns in order; null for an expression. */
  columns: (string | null)[];
  include: string[];
  method: string;
  unique: boolean;
  primary: boolean;
  constraint: string | null;
  partial: boolean;
  sizeBytes: number;
  valid: boolean;
  scans: number | null;
}

type Definitions = Record<string, { definition: string; keys: string[] }>;

/** A missing schema or table is a 404. */
function aboutTable<T>(rows: ({ table_exists: boolean } & T)[], schema: string, table: string) {
  const row = rows[0];
  if (!row) throw schemaNotFound(schema);
  if (!row.table_exists) throw tableNotFound(schema, table);
  return row;
}

/**
 * The table's indexes, and their definitions unless the table is locked: the deparse waits at
 * most 50 ms (the transaction's lock timeout), then the definitions are null.
 */
export async function listIndexes(db: pg.Pool, schema: string, table: string) {
  const values = [schema, table];
  const { row, definitions } = await withTransaction(
    db,
    async (client) => {
      const listed = await client.query<{ table_exists: boolean; indexes: IndexRow[] }>({
        name: 'dbadmin.indexes',
        text: INDEXES,
        values,
      });
      const found = aboutTable(listed.rows, schema, table);
      await client.query('SAVEPOINT deparse');
      const deparsed = await client
        .query<{ definitions: Definitions }>({ name: 'dbadmin.index-definitions', text: DEFINITIONS, values })
        .then((r) => r.rows[0]?.definitions ?? {})
        .catch(async (error: unknown) => {
          if (!isPgError(error) || error.code !== '55P03') throw error;
          await client.query('ROLLBACK TO SAVEPOINT deparse');
          return undefined;
        });
      return { row: found, definitions: deparsed };
    },
    { lockTimeout: '50ms' },
  ).catch((error: unknown) => {
    throw schemaBusy(schema, error);
  });
  return {
    definitionsRead: definitions !== undefined,
    indexes: row.indexes.map((index) => described(index, definitions?.[index.name])),
  };
}

/** An index as answered: each key a column or an expression, the predicate cut from the definition. */
function described(index: IndexRow, deparsed: Definitions[string] | undefined) {
  const definition = deparsed?.definition ?? null;
  return {
    ...index,
    columns: index.columns.map((column, at) => ({
      column,
      expression: column === null ? (deparsed?.keys[at] ?? null) : null,
    })),
    where: index.partial && definition !== null ? predicateOf(definition) : null,
    definition,
  };
}

/**
 * The WHERE clause pg_get_indexdef ends with: the first ` WHERE ` outside parentheses, string
 * literals and quoted names (the key columns and WITH options are in parentheses; names that
 * would read as WHERE are quoted; backslashes in E'' literals come doubled, so `''` is the only
 * escape of a quote).
 */
export function predicateOf(definition: string): string | null {
  let depth = 0;
  let quote: string | undefined;
  for (let at = 0; at < definition.length; at++) {
    const char = definition[at] ?? '';
    if (quote !== undefined) {
      if (char === quote) quote = undefined;
      continue;
    }
    if (depth === 0 && definition.startsWith(' WHERE ', at)) return definition.slice(at + ' WHERE '.length);
    if (char === "'" || char === '"') quote = char;
    depth += NESTING[char] ?? 0;
  }
  return null;
}

const NESTING: Record<string, number> = { '(': 1, ')': -1 };

const PROGRESS = `
  SELECT c.oid IS NOT NULL AS table_exists,
         (SELECT coalesce(json_agg(json_build_object(
                    'pid', p.pid, 'index', ic.relname, 'command', p.command, 'phase', p.phase,
                    'lockersDone', p.lockers_done, 'lockersTotal', p.lockers_total,
                    'blocksDone', p.blocks_done, 'blocksTotal', p.blocks_total,
                    'tuplesDone', p.tuples_done, 'tuplesTotal', p.tuples_total
                  ) ORDER BY p.pid), '[]')
            FROM pg_stat_progress_create_index p
            LEFT JOIN pg_class ic ON ic.oid = p.index_relid
           WHERE p.relid = c.oid AND p.datname = current_database()) AS builds
  ${TABLE}`;

interface BuildRow {
  pid: number;
  index: string | null;
  command: string | null;
  phase: string | null;
  lockersDone: number | null;
  lockersTotal: number | null;
  blocksDone: number | null;
  blocksTotal: number | null;
  tuplesDone: number | null;
  tuplesTotal: number | null;
}

/** How far the current phase is: blocks read, else tuples loaded, else old transactions waited out. */
function percentOf(build: BuildRow): number | null {
  const pairs: [number | null, number | null][] = [
    [build.blocksDone, build.blocksTotal],
    [build.tuplesDone, build.tuplesTotal],
    [build.lockersDone, build.lockersTotal],
  ];
  const [done, total] = pairs.find(([, total]) => (total ?? 0) > 0) ?? [null, null];
  if (done === null || total === null) return null;
  return Math.round((1000 * done) / total) / 10;
}

/**
 * Index builds running on the table (pg_stat_progress_create_index): the service's role sees the
 * phase and counts of the schema roles' builds, being a member of each.
 */
export async function indexBuildProgress(db: pg.Pool, schema: string, table: string) {
  const { rows } = await db.query<{ table_exists: boolean; builds: BuildRow[] }>({
    name: 'dbadmin.index-progress',
    text: PROGRESS,
    values: [schema, table],
  });
  const row = aboutTable(rows, schema, table);
  return { builds: row.builds.map((build) => ({ ...build, percent: percentOf(build) })) };
}

export interface CreateIndexInput {
  schema: string;
  table: string;
  name?: string | undefined;
  columns: string[];
  unique: boolean;
  method: IndexMethod;
  /** A predicate (SQL, run as the schema's role) for a partial index. */
  where?: string | undefined;
  concurrently: boolean;
}

/** Names of the schema's relations that start with `stem`: an index's name must differ from all. */
async function namesLike(catalog: pg.Pool, schema: string, stem: string): Promise<string[]> {
  const { rows } = await catalog.query<{ relname: string }>({
    name: 'dbadmin.relation-names-like',
    text: `SELECT c.relname::text AS relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = $1 AND left(c.relname, length($2)) = $2`,
    values: [schema, stem],
  });
  return rows.map((r) => r.relname);
}

/** PostgreSQL's own choice, `table_col_idx` (cut to 63 bytes, then numbered past the names taken). */
async function indexName(catalog: pg.Pool, input: CreateIndexInput): Promise<string> {
  const taken = await namesLike(catalog, input.schema, input.name ?? input.table);
  if (input.name !== undefined) {
    if (taken.includes(input.name)) {
      throw new BadRequest(
        'Already exists',
        `schema "${input.schema}" already has a relation "${input.name}"`,
      );
    }
    return input.name;
  }
  const stem = `${input.table}_${input.columns.join('_')}`.slice(0, IDENTIFIER_MAX_LENGTH - 6);
  for (let n = 0; ; n++) {
    const candidate = `${stem}_idx${n === 0 ? '' : n}`;
    if (!taken.includes(candidate)) return candidate;
  }
}

export async function planCreateIndex(catalog: pg.Pool, input: CreateIndexInput): Promise<Change> {
  const info = await tableInfo(catalog, input.schema, input.table);
  for (const name of input.columns) columnOf(info, name);
  const name = await indexName(catalog, input);
  const table = qualified(input.schema, input.table);
  const keys = input.columns.map((c) => quoteIdent(c, 'column name')).join(', ');
  const where = input.where !== undefined ? ` WHERE ${input.where}` : '';
  const statement = `CREATE ${input.unique ? 'UNIQUE ' : ''}INDEX ${input.concurrently ? 'CONCURRENTLY ' : ''}${quoteIdent(name, 'index name')} ON ${table} USING ${input.method} (${keys})${where}`;
  return {
    summary: `${input.unique ? 'unique ' : ''}index "${name}" on "${input.table}" (${input.columns.join(', ')})${input.concurrently ? ', built concurrently' : ''}`,
    statements: [statement],
    locks: [
      input.concurrently
        ? { schema: input.schema, table: input.table, level: 'SHARE UPDATE EXCLUSIVE', waitsLike: 'SHARE' }
        : { schema: input.schema, table: input.table, level: 'SHARE' },
    ],
    rewrites: false,
    scans: true,
    outsideTransaction: input.concurrently,
    explain: async (_client, error) => duplicates(error, input, name),
    ...(input.concurrently ? { undo: (client, error) => dropLeftover(client, input, name, error) } : {}),
  };
}

/** A unique build over duplicate values: a 400 naming one of them. */
function duplicates(error: unknown, input: CreateIndexInput, name: string): unknown {
  if (!isPgError(error) || error.code !== '23505') return error;
  const which = error.detail ? `: ${error.detail}` : '';
  const changed = input.concurrently ? '' : '; nothing was changed';
  return new BadRequest(
    'Duplicate values',
    `"${input.table}" holds duplicate values in (${input.columns.join(', ')}), so the unique index "${name}" cannot be built${which}${changed}`,
    error,
  );
}

/**
 * A failed concurrent build leaves its index behind, INVALID: dropped, so nothing is half-made.
 * Not when the name was taken already (that index is not ours), nor when none was left.
 */
async function dropLeftover(
  client: pg.ClientBase,
  input: CreateIndexInput,
  name: string,
  error: unknown,
): Promise<string | undefined> {
  if (isPgError(error) && error.code === '42P07') return undefined;
  const index = `${quoteIdent(input.schema, 'schema name')}.${quoteIdent(name, 'index name')}`;
  const { rows } = await client.query<{ valid: boolean }>({
    text: 'SELECT i.indisvalid AS valid FROM pg_catalog.pg_index i WHERE i.indexrelid = pg_catalog.to_regclass($1)',
    values: [index],
  });
  if (!rows[0] || rows[0].valid) return 'no index was left behind';
  try {
    // Concurrently: a plain DROP takes ACCESS EXCLUSIVE, the very lock a concurrent build avoids.
    await client.query(`DROP INDEX CONCURRENTLY ${index}`);
    return `the invalid index "${name}" the failed build left was dropped, so nothing is half-made`;
  } catch {
    return `the invalid index "${name}" the failed build left could not be dropped now: drop it with DELETE /api/table/${input.table}/indexes/${name}`;
  }
}

const INDEX_OF_TABLE = `
  SELECT c.oid IS NOT NULL AS table_exists,
         (SELECT json_build_object('primary', i.indisprimary, 'constraint', con.conname, 'kind', con.contype)
            FROM pg_index i
            JOIN pg_class ic ON ic.oid = i.indexrelid
            LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid
                                       AND con.contype IN ('p', 'u', 'x')
           WHERE i.indrelid = c.oid AND ic.relname = $3) AS index
  ${TABLE}`;

const CONSTRAINT_KINDS: Record<string, string> = { u: 'unique', x: 'exclusion', p: 'primary key' };

export async function planDropIndex(
  catalog: pg.Pool,
  input: { schema: string; table: string; index: string; concurrently: boolean },
): Promise<Change> {
  const { rows } = await catalog.query<{
    table_exists: boolean;
    index: { primary: boolean; constraint: string | null; kind: string | null } | null;
  }>({
    name: 'dbadmin.index-of-table',
    text: INDEX_OF_TABLE,
    values: [input.schema, input.table, input.index],
  });
  const row = rows[0];
  if (!row) throw schemaNotFound(input.schema);
  if (!row.table_exists) throw tableNotFound(input.schema, input.table);
  if (!row.index) {
    throw new NotFound('Index not found', `table "${input.table}" has no index "${input.index}"`);
  }
  if (row.index.primary) {
    throw new BadRequest(
      'Primary key index',
      `"${input.index}" is the primary key of "${input.table}": change the table's primary key instead, which replaces its index`,
    );
  }
  if (row.index.constraint) {
    throw new BadRequest(
      'Constraint index',
      `"${input.index}" backs the ${CONSTRAINT_KINDS[row.index.kind ?? ''] ?? ''} constraint "${row.index.constraint}" of "${input.table}": drop the constraint instead, which drops its index`,
    );
  }
  const index = `${quoteIdent(input.schema, 'schema name')}.${quoteCatalogName(input.index)}`;
  return {
    summary: `index "${input.index}" dropped from "${input.table}"${input.concurrently ? ', concurrently' : ''}`,
    statements: [`DROP INDEX ${input.concurrently ? 'CONCURRENTLY ' : ''}${index}`],
    locks: [
      {
        schema: input.schema,
        table: input.table,
        level: input.concurrently ? 'SHARE UPDATE EXCLUSIVE' : 'ACCESS EXCLUSIVE',
      },
    ],
    rewrites: false,
    scans: false,
    outsideTransaction: input.concurrently,
  };
}
