import type pg from 'pg';
import { explainNulls, explainUnconvertible } from '#lib/admin/failing-rows';
import type { Change, TableLock } from '#lib/admin/schema-change';
import { qualified } from '#lib/admin/tables';
import { type TableInfo, tableInfo } from '#lib/db/catalog';
import { columnTypeSql, defaultSql } from '#lib/db/column-types';
import { quoteCatalogName, quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { BadRequest } from '#lib/errors';

/**
 * Changes to one column, planned as lib/admin/schema-change runs them: each subcommand with the
 * lock PostgreSQL's ALTER TABLE documentation gives it (ACCESS EXCLUSIVE unless it says
 * otherwise; COMMENT takes SHARE UPDATE EXCLUSIVE), and whether the table is rewritten (a type
 * change, unless the two types are binary-compatible) or scanned (SET NOT NULL, a USING, UNIQUE).
 * A type change or a NOT NULL that some rows would fail is a 400 saying how many and which.
 */

export interface ColumnChangeInput {
  schema: string;
  table: string;
  column: string;
  rename?: string | undefined;
  type?: string | undefined;
  length?: number | undefined;
  /** An expression the new value is computed by (SQL, as the schema's role). */
  using?: string | undefined;
  /** A new default (the allow-list of lib/db/column-types), or null to drop it. */
  default?: string | number | boolean | null | undefined;
  nullable?: boolean | undefined;
  /** A comment, or null to remove it. */
  comment?: string | null | undefined;
}

const column = (info: TableInfo, name: string) => {
  const found = info.columns.find((c) => c.name === name);
  if (!found) throw new BadRequest('Unknown column', `table "${info.table}" has no column "${name}"`);
  return found;
};

/** The ALTER TABLE subcommands of the change (type, default, nullability), and what they say. */
function alterations(input: ColumnChangeInput, name: string) {
  const subcommands: string[] = [];
  const said: string[] = [];
  let newType: string | undefined;
  if (input.type !== undefined) {
    newType = columnTypeSql(input.type, input.length);
    const using = input.using !== undefined ? ` USING ${input.using}` : '';
    subcommands.push(`ALTER COLUMN ${name} TYPE ${newType}${using}`);
    said.push(`type ${newType}`);
  }
  if (input.default === null) {
    subcommands.push(`ALTER COLUMN ${name} DROP DEFAULT`);
    said.push('no default');
  } else if (input.default !== undefined) {
    subcommands.push(`ALTER COLUMN ${name} SET DEFAULT ${defaultSql(input.default)}`);
    said.push(`default ${String(input.default)}`);
  }
  if (input.nullable !== undefined) {
    subcommands.push(`ALTER COLUMN ${name} ${input.nullable ? 'DROP' : 'SET'} NOT NULL`);
    said.push(input.nullable ? 'nullable' : 'NOT NULL');
  }
  // A type change writes every row anew (PostgreSQL skips it only between binary-compatible
  // types, such as varchar to text: reported as a rewrite all the same); SET NOT NULL reads them.
  return {
    subcommands,
    said,
    newType,
    rewrites: newType !== undefined,
    scans: newType !== undefined || input.nullable === false,
  };
}

export async function planColumnChange(catalog: pg.Pool, input: ColumnChangeInput): Promise<Change> {
  if (input.type === undefined && (input.using !== undefined || input.length !== undefined)) {
    throw new BadRequest('Type missing', 'using and length go with type: send the new type too');
  }
  const info = await tableInfo(catalog, input.schema, input.table);
  const target = column(info, input.column);
  const table = qualified(input.schema, input.table);
  const name = quoteCatalogName(target.name);
  const { subcommands, said, newType, rewrites, scans } = alterations(input, name);
  const statements = subcommands.length > 0 ? [`ALTER TABLE ${table} ${subcommands.join(', ')}`] : [];
  if (input.comment !== undefined) {
    const text = input.comment === null ? 'NULL' : quoteLiteral(input.comment);
    statements.push(`COMMENT ON COLUMN ${table}.${name} IS ${text}`);
    said.push(input.comment === null ? 'no comment' : 'a comment');
  }
  if (input.rename !== undefined) {
    if (info.columns.some((c) => c.name === input.rename)) {
      throw new BadRequest('Column exists', `table "${input.table}" already has a column "${input.rename}"`);
    }
    statements.push(
      `ALTER TABLE ${table} RENAME COLUMN ${name} TO ${quoteIdent(input.rename, 'column name')}`,
    );
    said.push(`renamed to "${input.rename}"`);
  }
  if (statements.length === 0) {
    throw new BadRequest(
      'Nothing to change',
      'name at least one of rename, type, default, nullable, comment',
    );
  }
  // COMMENT takes SHARE UPDATE EXCLUSIVE; every ALTER TABLE subcommand here, ACCESS EXCLUSIVE.
  const onlyComment = subcommands.length === 0 && input.rename === undefined;
  const locks: TableLock[] = [
    {
      schema: input.schema,
      table: input.table,
      level: onlyComment ? 'SHARE UPDATE EXCLUSIVE' : 'ACCESS EXCLUSIVE',
    },
  ];
  return {
    summary: `column "${target.name}" of "${input.table}": ${said.join(', ')}`,
    statements,
    locks,
    rewrites,
    scans,
    // NULLs for NOT NULL (23502), else values the new type refuses; either explainer leaves any
    // other error as it is.
    explain: async (client, error) =>
      newType === undefined || (isPgError(error) && error.code === '23502')
        ? explainNulls(client, info, [target.name], error)
        : explainUnconvertible(client, info, { column: target.name, newType, using: input.using }, error),
  };
}

export async function planDropColumn(
  catalog: pg.Pool,
  input: { schema: string; table: string; column: string; cascade: boolean },
): Promise<Change> {
  const info = await tableInfo(catalog, input.schema, input.table);
  const target = column(info, input.column);
  return {
    summary: `column "${target.name}" dropped from "${input.table}"`,
    statements: [
      `ALTER TABLE ${qualified(input.schema, input.table)} DROP COLUMN ${quoteCatalogName(target.name)}${input.cascade ? ' CASCADE' : ''}`,
    ],
    locks: [{ schema: input.schema, table: input.table, level: 'ACCESS EXCLUSIVE' }],
    rewrites: false,
    scans: false,
  };
}
