import type pg from 'pg';
import { type RowSearch, searchWhere } from '#lib/admin/row-search';
import { parameter, rowKey } from '#lib/admin/rows';
import { columnOf, type TableInfo, tableInfo } from '#lib/db/catalog';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName } from '#lib/db/identifiers';
import { boundedQuery, type ResultLimits } from '#lib/db/result-limits';
import { inTransaction } from '#lib/db/transaction';
import { ApiError, BadRequest } from '#lib/errors';

/**
 * Changes to every row a filter finds (lib/admin/row-filter's vocabulary): PATCH .../rows sets
 * columns on them, SPEC's bulk delete deletes them. One statement as the schema's role, in one
 * transaction: the table's triggers, rules and policies are the tenant's code and run with its
 * rights, and anything that fails (a value, a trigger, a deferred trigger at COMMIT, the result
 * limits, maxAffected) leaves every row as it was.
 *
 * maxAffected counts the rows the statement itself changes, read from the change (RETURNING, the
 * row count) in the same transaction, never from a count taken before it, which code answering
 * differently each time (a policy, a volatile function) could make disagree with the change.
 * Writes the tenant's own triggers make are not counted (PostgREST's meaning): they run with the
 * tenant's rights on its own data, which its own login could change at any time.
 */

export type RowFilter = Pick<RowSearch, 'filter' | 'or' | 'and' | 'q'>;

interface MatchingInput {
  schema: string;
  table: string;
  /** Which rows: filter, or, and, q. */
  where: RowFilter;
  /** Change every row when nothing says which: required then, so a forgotten filter is a 400. */
  all?: boolean | undefined;
  /** More rows than this would change: 409, and nothing is changed. */
  maxAffected?: number | undefined;
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

export class TooManyRows extends ApiError {
  constructor(verb: 'updated' | 'deleted', count: number, maxAffected: number) {
    super(
      409,
      'Too many rows',
      `${plural(count, 'row')} would have been ${verb}, more than maxAffected (${maxAffected}); nothing was changed: narrow the filter or raise maxAffected`,
    );
  }
}

/** The statement's WHERE over `r`, or a 400 when nothing says which rows and `all` is not given. */
function matching(info: TableInfo, input: MatchingInput, bind: (value: unknown) => string, extra = '') {
  const conditions = [searchWhere(info, input.where, 'r', bind), extra].filter(Boolean);
  if (conditions.length === 0 && !input.all) return undefined;
  return conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : '';
}

export interface UpdateRowsInput extends MatchingInput {
  /** Column to value: each a bind parameter, by the single-row update's rules. */
  set: Record<string, unknown>;
  /** false: answer the count alone (PostgREST's return=minimal), for changes too big to answer. */
  returnRows: boolean;
}

/**
 * Sets the columns on every matching row; answers them as stored (in primary-key order) with
 * their count, under the result limits: a 413, like a 409 or any error, means nothing changed.
 */
export async function updateRows(access: SchemaAccess, limits: ResultLimits, input: UpdateRowsInput) {
  const info = await tableInfo(access.catalog, input.schema, input.table);
  const values: unknown[] = [];
  const bind = (value: unknown) => `$${values.push(value)}`;
  const assignments = Object.entries(input.set).map(([name, value]) => {
    const target = columnOf(info, name);
    return `${quoteCatalogName(target.name)} = ${bind(parameter(target.type, value))}`;
  });
  const where = matching(info, input, bind);
  if (where === undefined) {
    throw new BadRequest(
      'Filter required',
      'say which rows to change with filter, or, and or q, or send all=true to change every row of the table',
    );
  }
  const update = `UPDATE ${qualified(input.schema, input.table)} AS r SET ${assignments.join(', ')}${where}`;
  const { maxAffected } = input;
  const overLimit = (count: number) => {
    if (maxAffected !== undefined && count > maxAffected)
      throw new TooManyRows('updated', count, maxAffected);
  };
  if (!input.returnRows) {
    return access.run((client) =>
      inTransaction(
        client,
        async () => {
          const count = (await client.query(update, values)).rowCount ?? 0;
          overLimit(count);
          return { count };
        },
        { audit: access.audit, rows: ({ count }) => count },
      ),
    );
  }
  // The count rides on every row; past maxAffected only the count comes back (one row), so a
  // refusal never ships the rows, and a 413 can only come from rows within it.
  const key = info.primaryKey.map((name) => `changed.${quoteCatalogName(name)}`);
  const text = [
    `WITH changed AS (${update} RETURNING r.*)`,
    'SELECT n.count, changed.* FROM (SELECT pg_catalog.count(*) AS count FROM changed) AS n',
    `LEFT JOIN changed ON ${maxAffected === undefined ? 'true' : `n.count <= ${bind(maxAffected)}`}`,
    key.length > 0 ? `ORDER BY ${key.join(', ')}` : '',
  ].join(' ');
  return access.run((client) =>
    inTransaction(
      client,
      async () => {
        const [result] = await boundedQuery(
          client,
          { text, values, rowMode: 'array' } as pg.QueryArrayConfig,
          limits,
          () => access.cancel(client),
        );
        const counted = countedRows(result);
        overLimit(counted.count);
        return counted;
      },
      { audit: access.audit, rows: ({ count }) => count },
    ),
  );
}

/** The count in the first column, the changed rows as objects in the others (none when count is 0). */
function countedRows(result: pg.QueryResult | undefined) {
  const all = (result?.rows ?? []) as unknown[][];
  const names = (result?.fields ?? []).slice(1).map((f) => f.name);
  const count = Number(all[0]?.[0] ?? 0);
  const rows =
    count === 0 ? [] : all.map((row) => Object.fromEntries(names.map((name, i) => [name, row[i + 1]])));
  return { rows, count };
}

export interface DeleteRowsInput extends MatchingInput {
  /** SPEC's: the single-column primary keys of the rows; with a filter, rows must match both. */
  rowIds?: Array<string | number> | undefined;
}

/** SPEC's bulk delete: the rows listed, the rows a filter finds, or the rows that are both. */
export async function deleteRows(access: SchemaAccess, input: DeleteRowsInput) {
  const info = await tableInfo(access.catalog, input.schema, input.table);
  const values: unknown[] = [];
  const bind = (value: unknown) => `$${values.push(value)}`;
  let listed = '';
  if (input.rowIds) {
    // The key's type comes from the catalog (format_type, schema-qualified), so the array binds
    // with the index usable; a domain's checks run in the cast, as the schema's role.
    const key = rowKey(info);
    listed = `r.${key.column} = ANY(${bind(input.rowIds.map(String))}::${key.type}[])`;
  }
  const where = matching(info, input, bind, listed);
  if (where === undefined) {
    throw new BadRequest(
      'Filter required',
      'say which rows to delete with rowIds, or with filter, or, and or q, or send all=true to delete every row of the table',
    );
  }
  const { maxAffected } = input;
  const deletedCount = await access.run((client) =>
    inTransaction(
      client,
      async () => {
        const { rowCount } = await client.query(
          `DELETE FROM ${qualified(input.schema, input.table)} AS r${where}`,
          values,
        );
        const count = rowCount ?? 0;
        if (maxAffected !== undefined && count > maxAffected)
          throw new TooManyRows('deleted', count, maxAffected);
        return count;
      },
      { audit: access.audit, rows: (count) => count },
    ),
  );
  return {
    success: true,
    deletedCount,
    message: `${plural(deletedCount, 'row')} deleted from "${input.table}"`,
  };
}
