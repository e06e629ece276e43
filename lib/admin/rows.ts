import { columnOf, type TableInfo, tableInfo } from '#lib/db/catalog';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName, quoteIdent } from '#lib/db/identifiers';
import { boundedQuery, type ResultLimits } from '#lib/db/result-limits';
import { inTransaction } from '#lib/db/transaction';
import { BadRequest, NotFound } from '#lib/errors';

/** The single-column primary key `:rowId` (and SPEC's bulk delete's rowIds) are matched against. */
export function rowKey(info: TableInfo) {
  const [key, ...rest] = info.primaryKey;
  if (!key || rest.length > 0) {
    throw new BadRequest(
      'No single-column primary key',
      `table "${info.table}" has ${key ? 'a composite' : 'no'} primary key; rows are addressed by a single-column primary key`,
    );
  }
  const column = info.columns.find((c) => c.name === key);
  // The type without its modifier: a cast to varchar(3) would cut 'abcd' to a key it does not name.
  return { column: quoteCatalogName(key), type: column?.valueType ?? 'text' };
}

/**
 * A JSON value as a bind parameter. A string is PostgreSQL's text for the value, which the
 * column's type reads: what a read gave (lib/db/json-rows) writes back unchanged, a json or jsonb
 * column's JSON text included. json/jsonb columns also take any other JSON as that JSON (pg would
 * send a JS array as a PostgreSQL array literal); other objects go as JSON text for PostgreSQL to
 * judge, arrays as PostgreSQL's array literal.
 */
export function parameter(type: string, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (type === 'json' || type === 'jsonb') return JSON.stringify(value);
  if (typeof value === 'object' && !Array.isArray(value)) return JSON.stringify(value);
  return value;
}

/**
 * An insert or update that answers the row as stored, under the result limits like any read: a
 * tenant's trigger can make the stored row huge, and then the answer is a 413 and the change is
 * rolled back, so a 413 always means nothing was written.
 */
export function writeReturning(
  access: SchemaAccess,
  limits: ResultLimits,
  text: string,
  values: unknown[],
  /** What to answer when it wrote no row: thrown inside, so nothing (no audit entry) commits. */
  none?: () => Error,
) {
  return access.run((client) =>
    inTransaction(
      client,
      async () => {
        const [result] = await boundedQuery(client, { text, values }, limits, () => access.cancel(client));
        const rows = result?.rows ?? [];
        if (rows.length === 0 && none) throw none();
        return rows;
      },
      { audit: access.audit, rows: (rows) => rows.length },
    ),
  );
}

export interface InsertRowInput {
  schema: string;
  table: string;
  data: Record<string, unknown>;
}

/**
 * Inserts one row and returns it as stored, defaults filled in. Like every row operation it runs
 * as the schema's role: the table's triggers, defaults, rules and checks are the tenant's code.
 */
export async function insertRow(
  access: SchemaAccess,
  limits: ResultLimits,
  { schema, table, data }: InsertRowInput,
) {
  const info = await tableInfo(access.catalog, schema, table);
  const entries = Object.entries(data);
  const names = entries.map(([name]) => quoteIdent(columnOf(info, name).name, 'column name'));
  const values = entries.map(([name, value]) => parameter(columnOf(info, name).type, value));
  const sql =
    entries.length === 0
      ? `INSERT INTO ${qualified(schema, table)} DEFAULT VALUES RETURNING *`
      : `INSERT INTO ${qualified(schema, table)} (${names.join(', ')}) VALUES (${values.map((_, i) => `$${i + 1}`).join(', ')}) RETURNING *`;
  const rows = await writeReturning(access, limits, sql, values);
  return { success: true, row: rows[0], message: `Row inserted into "${table}"` };
}

const rowNotFound = (table: string, rowId: string) =>
  new NotFound('Row not found', `no row with primary key ${JSON.stringify(rowId)} in table "${table}"`);

export interface UpdateRowInput {
  schema: string;
  table: string;
  rowId: string;
  column: string;
  value: unknown;
}

export async function updateRow(access: SchemaAccess, limits: ResultLimits, input: UpdateRowInput) {
  const info = await tableInfo(access.catalog, input.schema, input.table);
  const key = rowKey(info);
  const target = columnOf(info, input.column);
  const rows = await writeReturning(
    access,
    limits,
    `UPDATE ${qualified(input.schema, input.table)} SET ${quoteIdent(target.name, 'column name')} = $1
      WHERE ${key.column} = $2 RETURNING *`,
    [parameter(target.type, input.value), input.rowId],
    () => rowNotFound(input.table, input.rowId),
  );
  return { row: rows[0] };
}

export interface DeleteRowInput {
  schema: string;
  table: string;
  rowId: string;
}

export async function deleteRow(access: SchemaAccess, { schema, table, rowId }: DeleteRowInput) {
  const key = rowKey(await tableInfo(access.catalog, schema, table));
  await access.run((client) =>
    inTransaction(
      client,
      async () => {
        const { rowCount } = await client.query(
          `DELETE FROM ${qualified(schema, table)} WHERE ${key.column} = $1`,
          [rowId],
        );
        if (!rowCount) throw rowNotFound(table, rowId);
        return rowCount;
      },
      { audit: access.audit, rows: (count) => count },
    ),
  );
  return { success: true, message: `Row ${JSON.stringify(rowId)} deleted from "${table}"` };
}
