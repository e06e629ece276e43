import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { readSchemaDdl, type SchemaDdl, type TableData } from '#lib/admin/schema-ddl';
import { type CreateSchemaInput, createSchema, deleteSchema } from '#lib/admin/schemas';
import type { AuditDraft } from '#lib/db/audit-log';
import type { SchemaAccess } from '#lib/db/executor';
import { quoteIdent } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { streamingCopy } from '#lib/db/result-limits';
import { LOCK_WAIT } from '#lib/db/schema-roles';
import { inPlainTransaction, inTransaction } from '#lib/db/transaction';
import { BadRequest } from '#lib/errors';
import { loggedError, logger } from '#lib/log';

/**
 * A new schema started from a template: made as any schema is (its own owner, login and keys,
 * lib/admin/schemas), then filled with the template's structure (lib/admin/schema-ddl), and its
 * rows when asked. The template is read on a session of its own role, in one snapshot; the copy
 * is made on a session of the new schema's role, in one transaction with the request's audit
 * entry. Neither ever runs as the admin, so nothing the template's tenant planted (a trigger, a
 * default, a function) runs with more than a tenant's rights. All or nothing: a copy that fails
 * deletes the new schema again.
 */

export interface CloneInput extends CreateSchemaInput {
  template: string;
  withData: boolean;
}

export interface CloneSummary {
  template: string;
  withData: boolean;
  counts: SchemaDdl['counts'];
  /** Rows copied, when withData. */
  rows?: number;
  notCopied: string[];
}

/** Where a principal's SQL in a schema runs (the route's accessTo). */
type AccessTo = (schema: string) => Promise<SchemaAccess>;

export async function cloneSchema(
  db: pg.Pool,
  secret: string,
  { template, withData, ...schema }: CloneInput,
  accessTo: AccessTo,
  audit: AuditDraft | undefined,
  /** The most a copy with rows moves (IMPORT_MAX_BYTES). */
  maxBytes: number,
) {
  if (template === schema.schemaName) {
    throw new BadRequest('Invalid template', 'a schema cannot be its own template; name another schema');
  }
  const source = await accessTo(template);
  return source.run((from) =>
    inPlainTransaction(from, 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', async () => {
      await beginSnapshotRead(from);
      // The snapshot the copy is read in: the template's migrations committed in it are the copy's.
      const { rows: snapshot } = await from.query<{ snapshot: string }>(
        'SELECT pg_catalog.pg_current_snapshot()::text AS snapshot',
      );
      // The schema is made while the template is read (another connection); a refused template
      // deletes it again, like a failed copy.
      const [read, made] = await Promise.allSettled([
        readSchemaDdl(from, template, schema.schemaName, withData),
        createSchema(db, secret, schema, undefined, {
          template,
          withData,
          snapshot: snapshot[0]?.snapshot as string,
        }),
      ]);
      if (made.status === 'rejected') throw made.reason;
      let rows: number | undefined;
      try {
        if (read.status === 'rejected') throw read.reason;
        const ddl = read.value;
        if (withData) {
          await holdTables(from, ddl.tables);
          streamingCopy(from, maxBytes);
        }
        const target = await accessTo(schema.schemaName);
        const rowsInto = withData
          ? (to: pg.PoolClient, table: TableData) => copyRows(from, to, table)
          : undefined;
        rows = await target.run((to) =>
          inTransaction(to, () => fillSchema(to, schema.schemaName, ddl, rowsInto), { audit }),
        );
      } catch (error) {
        await deleteSchema(db, { schemaName: schema.schemaName, cascade: true }, undefined).catch(
          (cleanup: unknown) =>
            logger.error('a failed clone left its schema behind', {
              schema: schema.schemaName,
              error: loggedError(cleanup),
            }),
        );
        throw error;
      }
      const { counts, notCopied } = read.value;
      const clone: CloneSummary = { template, withData, counts, rows, notCopied };
      return { ...made.value, message: `${made.value.message} from template "${template}"`, clone };
    }),
  );
}

/**
 * Settles the transaction a schema is read in (a template, a bundle's source): a tenant's lock
 * answers 409 in seconds, not at the query timeout. Rows are read as the schema's own role sees
 * them: through its policies, where it forced row-level security on itself.
 */
export async function beginSnapshotRead(from: pg.ClientBase): Promise<void> {
  await from.query(`SET LOCAL lock_timeout = '${LOCK_WAIT}'`);
}

/**
 * Holds the tables read against TRUNCATE and ALTER, which a snapshot does not see through, until
 * the read ends, as pg_dump does; a tenant's lock answers 409 after the snapshot read's wait.
 */
export async function holdTables(from: pg.ClientBase, tables: TableData[]): Promise<void> {
  if (tables.length === 0) return;
  await from.query(`LOCK TABLE ${tables.map((t) => t.table).join(', ')} IN ACCESS SHARE MODE`);
}

/** Puts one table's rows into the copy (on `to`, its session): answers how many. */
export type RowsInto = (to: pg.PoolClient, table: TableData) => Promise<number>;

/**
 * The copy's statements on `to` (in its transaction), and between them its rows when `rowsInto`
 * brings them: answers how many rows came in. Refuses a copy that reaches outside its schema.
 */
export async function fillSchema(
  to: pg.PoolClient,
  copy: string,
  ddl: SchemaDdl,
  rowsInto: RowsInto | undefined,
): Promise<number | undefined> {
  // Bodies naming tables made later in the copy are checked when they run, as PostgreSQL's dump does.
  await to.query('SET LOCAL check_function_bodies = off');
  // The template's code runs as rows come in (checks, generated columns) and may move the search
  // path: each batch starts on the copy's own again.
  const home = `SET LOCAL search_path TO ${quoteIdent(copy, 'schema name')}`;
  await batch(to, [home, ...ddl.before]);
  let rows: number | undefined;
  if (rowsInto) {
    rows = 0;
    for (const table of ddl.tables) rows += await rowsInto(to, table);
    await batch(to, [home, ...ddl.materialized.map((view) => `REFRESH MATERIALIZED VIEW ${view}`)]);
    // Keys and indexes are built over the rows now: with PostgreSQL's parallel workers
    // (max_parallel_maintenance_workers) from tables of 1 MB, not its default 8 MB, as a tenant's
    // tables mostly are. A fifth faster on two cores; none where the server has no workers free.
    await to.query(`SET LOCAL min_parallel_table_scan_size = '1MB'`);
  }
  await batch(to, [home, ...ddl.after, ...(rowsInto ? ddl.sequenceValues : [])]);
  await assertSelfContained(to, copy);
  return rows;
}

/**
 * Refuses a copy whose objects depend on another tenant's (a default, a view, a trigger bound to
 * a function elsewhere): the template's code may have moved the search path while it ran. Only
 * the copy itself, PostgreSQL's catalog and public may be reached. Objects made in this copy have
 * oids after its schema's.
 */
async function assertSelfContained(to: pg.PoolClient, copy: string): Promise<void> {
  const { rows } = await to.query<{ what: string; uses: string }>(
    `WITH n AS (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = $1),
     made (classid, objid) AS (
       SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid FROM pg_catalog.pg_class c, n
        WHERE c.oid > n.oid AND c.relnamespace = n.oid
       UNION ALL SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid FROM pg_catalog.pg_type t, n
        WHERE t.oid > n.oid AND t.typnamespace = n.oid
       UNION ALL SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid FROM pg_catalog.pg_proc p, n
        WHERE p.oid > n.oid AND p.pronamespace = n.oid
       UNION ALL SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass, k.oid FROM pg_catalog.pg_constraint k, n
        WHERE k.oid > n.oid AND k.connamespace = n.oid
       UNION ALL SELECT 'pg_catalog.pg_attrdef'::pg_catalog.regclass, a.oid
         FROM pg_catalog.pg_attrdef a JOIN pg_catalog.pg_class c ON c.oid = a.adrelid, n
        WHERE a.oid > n.oid AND c.relnamespace = n.oid
       UNION ALL SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass, g.oid
         FROM pg_catalog.pg_trigger g JOIN pg_catalog.pg_class c ON c.oid = g.tgrelid, n
        WHERE g.oid > n.oid AND c.relnamespace = n.oid
       UNION ALL SELECT 'pg_catalog.pg_rewrite'::pg_catalog.regclass, r.oid
         FROM pg_catalog.pg_rewrite r JOIN pg_catalog.pg_class c ON c.oid = r.ev_class, n
        WHERE r.oid > n.oid AND c.relnamespace = n.oid
       UNION ALL SELECT 'pg_catalog.pg_policy'::pg_catalog.regclass, p.oid
         FROM pg_catalog.pg_policy p JOIN pg_catalog.pg_class c ON c.oid = p.polrelid, n
        WHERE p.oid > n.oid AND c.relnamespace = n.oid)
     -- pg_identify_object names a schema as an identifier: quoted where it must be.
     SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) AS what,
            pg_catalog.pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) AS uses
       FROM made m JOIN pg_catalog.pg_depend d ON d.classid = m.classid AND d.objid = m.objid
      WHERE (pg_catalog.pg_identify_object(d.refclassid, d.refobjid, 0)).schema
            NOT IN (pg_catalog.quote_ident($1), 'pg_catalog', 'public', 'information_schema')
      LIMIT 5`,
    [copy],
  );
  if (rows.length > 0) {
    throw new BadRequest(
      'Template not supported',
      `the copy would reach outside its schema: ${rows.map((r) => `${r.what} uses ${r.uses}`).join('; ')}; nothing was created`,
    );
  }
}

/**
 * COPY of a table's columns, as the catalog quoted their names (lib/admin/schema-ddl). In binary
 * when every column's type is PostgreSQL's own, else in text: a binary array or row value carries
 * its element type's oid, the template's, not the copy's.
 */
const copyOf = ({ table, columns, binary }: TableData, direction: 'TO STDOUT' | 'FROM STDIN') => {
  // A table of no columns but generated ones (or none) copies its rows' count: no list at all.
  const list = columns.length > 0 ? ` (${columns.join(', ')})` : '';
  return `COPY ${table}${list} ${direction}${binary ? ' (FORMAT binary)' : ''}`;
};
export const copyOut = (table: TableData) => copyOf(table, 'TO STDOUT');
export const copyIn = (table: TableData) => copyOf(table, 'FROM STDIN');

/** A table's rows from the template's session into the copy's. */
async function copyRows(from: pg.PoolClient, to: pg.PoolClient, table: TableData) {
  const sink = to.query(copyFrom(copyIn(table)));
  await pipeline(from.query(copyTo(copyOut(table))), sink);
  return sink.rowCount;
}

/** Errors that are the statement's (the template's content), not the database's state. */
const STATEMENT_CLASSES = ['0A', '22', '23', '2B', '39', '42', '44', 'P0'];
const isStatementError = (error: unknown) =>
  isPgError(error) && STATEMENT_CLASSES.includes(error.code.slice(0, 2));

/**
 * The statements in one round trip. Should they fail, they are run again one by one from before
 * them, so the answer names the statement that failed.
 */
async function batch(to: pg.PoolClient, statements: string[]) {
  if (statements.length === 0) return;
  await to.query('SAVEPOINT copy');
  try {
    await to.query(statements.join(';\n'));
  } catch (error) {
    if (!isStatementError(error)) throw error;
    await to.query('ROLLBACK TO SAVEPOINT copy');
    for (const sql of statements) await step(to, sql);
    throw error;
  }
  await to.query('RELEASE SAVEPOINT copy');
}

async function step(to: pg.PoolClient, sql: string) {
  try {
    await to.query(sql);
  } catch (error) {
    if (!isStatementError(error)) throw error;
    const pgError = error as Error & { code: string };
    const statement = (sql.split('\n')[0] ?? sql).slice(0, 200);
    throw new BadRequest(
      'Template not supported',
      `the copy could not run "${statement}": ${pgError.message} (SQLSTATE ${pgError.code}); nothing was created`,
      error,
    );
  }
}
