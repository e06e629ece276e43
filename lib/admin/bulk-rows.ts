import { parameter, writeReturning } from '#lib/admin/rows';
import { columnOf, type TableInfo, tableInfoQuery, toTableInfo } from '#lib/db/catalog';
import { runCatalogRead } from '#lib/db/catalog-read';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName } from '#lib/db/identifiers';
import { fromDatabaseError, isPgError } from '#lib/db/pg-errors';
import type { ResultLimits } from '#lib/db/result-limits';
import { ApiError, BadRequest } from '#lib/errors';

/**
 * Many rows in one INSERT, all or nothing, optionally an upsert (ON CONFLICT). Every cell is a
 * bind parameter; a cell a row leaves out is the column's DEFAULT. It runs as the schema's role,
 * so the table's triggers, defaults, rules and checks run with the tenant's rights.
 */

/** Rows one request may insert. */
export const MAX_BULK_ROWS = 1000;
/** Values one statement may bind: the protocol counts a statement's parameters in 16 bits. */
export const MAX_BULK_VALUES = 65_535;

export type OnConflict = 'update' | 'ignore';

export interface InsertRowsInput {
  schema: string;
  table: string;
  rows: Record<string, unknown>[];
  onConflict?: OnConflict | undefined;
  /** The conflict target; the primary key when not given. */
  conflictColumns?: string[] | undefined;
}

interface BulkTarget extends TableInfo {
  /** The column sets of the unique indexes ON CONFLICT can infer: immediate, valid, no predicate or expression. */
  uniqueKeys: string[][];
}

/** tableInfo (lib/db/catalog) and the table's unique keys, in one read of the catalog. */
const BULK_TARGET = tableInfoQuery(`,
         (SELECT coalesce(json_agg(k.columns ORDER BY k.columns), '[]')
            FROM (SELECT array_agg(a.attname::text ORDER BY a.attname) AS columns
                    FROM pg_index i
                    CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS u(attnum, ord)
                    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = u.attnum
                   WHERE i.indrelid = c.oid AND i.indisunique AND i.indimmediate AND i.indisvalid
                     AND u.ord <= i.indnkeyatts
                     AND i.indpred IS NULL AND i.indexprs IS NULL
                   GROUP BY i.indexrelid) AS k) AS unique_keys`);

const bulkTarget = (access: SchemaAccess, schema: string, table: string) =>
  runCatalogRead<BulkTarget>(access.catalog, {
    name: 'dbadmin.bulk-insert-target',
    text: BULK_TARGET,
    values: [schema, table],
    schema,
    decode: (row) => ({
      ...toTableInfo(row, schema, table),
      uniqueKeys: (row?.unique_keys as string[][] | undefined) ?? [],
    }),
  });

/** The columns the rows name, in the table's order; an unknown one is a 400 naming it. */
function namedColumns(info: TableInfo, rows: readonly Record<string, unknown>[]) {
  const named = new Set<string>();
  for (const row of rows) for (const name of Object.keys(row)) named.add(columnOf(info, name).name);
  return info.columns.filter((c) => named.has(c.name));
}

/** The conflict target, checked against the table's unique keys (as a set of columns). */
function conflictTarget(info: BulkTarget, given: string[] | undefined): string[] {
  if (!given) {
    if (info.primaryKey.length === 0) {
      throw new BadRequest(
        'No conflict target',
        `table "${info.table}" has no primary key; name the columns of one of its unique constraints in conflictColumns`,
      );
    }
    return info.primaryKey;
  }
  const target = [...new Set(given.map((name) => columnOf(info, name).name))];
  const sameSet = (key: string[]) => key.length === target.length && key.every((c) => target.includes(c));
  if (!info.uniqueKeys.some(sameSet)) {
    const keys = info.uniqueKeys.map((key) => `(${key.join(', ')})`).join(', ') || 'none';
    throw new BadRequest(
      'Invalid conflict target',
      `conflictColumns (${target.join(', ')}) are not the columns of a unique constraint or index of table "${info.table}"; its unique keys: ${keys}`,
    );
  }
  return target;
}

/**
 * ON CONFLICT for the upsert. "update" sets the inserted columns outside the target to EXCLUDED's
 * (the target's own when there are none, so a conflicting row still comes back as stored): so
 * every row must name the same columns, or a cell left out would overwrite a stored value with
 * the column's default.
 */
function onConflictClause(
  info: BulkTarget,
  input: InsertRowsInput,
  columns: readonly { name: string }[],
): string {
  if (!input.onConflict) {
    if (input.conflictColumns) {
      throw new BadRequest(
        'Invalid conflict target',
        'conflictColumns needs onConflict: "update" or "ignore"',
      );
    }
    return '';
  }
  const target = conflictTarget(info, input.conflictColumns);
  const on = `ON CONFLICT (${target.map(quoteCatalogName).join(', ')})`;
  if (input.onConflict === 'ignore') return `${on} DO NOTHING`;
  const partial = input.rows.findIndex((row) => Object.keys(row).length !== columns.length);
  if (partial >= 0) {
    const row = input.rows[partial] ?? {};
    const missing = columns.filter((c) => !Object.hasOwn(row, c.name)).map((c) => c.name);
    throw new BadRequest(
      'Invalid rows',
      `with onConflict "update" every row must name the same columns: rows[${partial}] leaves out ${missing.join(', ')}, whose stored value the column's default would overwrite`,
    );
  }
  const outside = columns.map((c) => c.name).filter((name) => !target.includes(name));
  const set = (outside.length > 0 ? outside : target).map(
    (name) => `${quoteCatalogName(name)} = EXCLUDED.${quoteCatalogName(name)}`,
  );
  return `${on} DO UPDATE SET ${set.join(', ')}`;
}

interface Statement {
  text: string;
  values: unknown[];
  /** Which row and column each parameter ($1 is [0]) holds, to say where a bad value is. */
  cells: { row: number; column: string }[];
}

/** VALUES with a parameter per cell the rows give and DEFAULT for the others. */
function valuesList(rows: readonly Record<string, unknown>[], columns: TableInfo['columns']) {
  const cells: Statement['cells'] = [];
  const values: unknown[] = [];
  if (columns.length === 0) {
    // No row names a column: every column takes its default, which a column list cannot say.
    return { columns: '', rows: `SELECT FROM pg_catalog.generate_series(1, ${rows.length})`, values, cells };
  }
  const tuples = rows.map((row, index) => {
    const items = columns.map((c) => {
      if (!Object.hasOwn(row, c.name)) return 'DEFAULT';
      values.push(parameter(c.type, row[c.name]));
      cells.push({ row: index, column: c.name });
      return `$${values.length}`;
    });
    return `(${items.join(', ')})`;
  });
  if (values.length > MAX_BULK_VALUES) {
    throw new BadRequest(
      'Too many values',
      `the rows hold ${values.length} values; one request may send at most ${MAX_BULK_VALUES} (PostgreSQL's limit on a statement's parameters): send fewer rows at a time`,
    );
  }
  return {
    columns: ` (${columns.map((c) => quoteCatalogName(c.name)).join(', ')})`,
    rows: `VALUES ${tuples.join(', ')}`,
    values,
    cells,
  };
}

function insertStatement(info: BulkTarget, input: InsertRowsInput): Statement {
  const columns = namedColumns(info, input.rows);
  const conflict = onConflictClause(info, input, columns);
  const list = valuesList(input.rows, columns);
  const text = [
    `INSERT INTO ${qualified(input.schema, input.table)}${list.columns} ${list.rows}`,
    conflict,
    'RETURNING *',
  ];
  return { text: text.filter(Boolean).join(' '), values: list.values, cells: list.cells };
}

/**
 * A value PostgreSQL refused while binding it (the type's input function, a domain's check) comes
 * with "unnamed portal parameter $n" as its context: said as the row and column it came from.
 */
function naming(error: unknown, cells: Statement['cells']): unknown {
  if (!isPgError(error)) return error;
  const where = (error as { where?: string }).where ?? '';
  const cell = cells[Number(/portal parameter \$(\d+)/.exec(where)?.[1]) - 1];
  const mapped = cell && fromDatabaseError(error);
  if (!cell || !mapped || mapped.status !== 400) return error;
  return new ApiError(400, mapped.title, `${mapped.message}, in rows[${cell.row}].${cell.column}`, {
    cause: error,
    details: mapped.details,
  });
}

/**
 * Inserts the rows in one statement and returns those written, as stored: with "ignore", only
 * those inserted. Nothing is written when any row fails, nor when the answer is over the result
 * limits (413).
 */
export async function insertRows(access: SchemaAccess, limits: ResultLimits, input: InsertRowsInput) {
  const info = await bulkTarget(access, input.schema, input.table);
  const statement = insertStatement(info, input);
  const rows = await writeReturning(access, limits, statement.text, statement.values).catch((error) => {
    throw naming(error, statement.cells);
  });
  return { rows, count: rows.length };
}
