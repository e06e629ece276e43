import type pg from 'pg';
import { castUsing, explainNulls, explainUnconvertible } from '#lib/admin/failing-rows';
import type { Change, Dropped, NeedsUsing, TableLock } from '#lib/admin/schema-change';
import { enumTypesAmong } from '#lib/admin/types';
import { type ColumnInfo, columnOf, tableInfo } from '#lib/db/catalog';
import { columnTypeSql, defaultSql, type EnumTypes } from '#lib/db/column-types';
import { qualified, quoteCatalogName, quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { beginText } from '#lib/db/pooler';
import { BadRequest } from '#lib/errors';

/**
 * Changes to one column, planned as lib/admin/schema-change runs them: each subcommand with the
 * lock PostgreSQL's ALTER TABLE documentation gives it (ACCESS EXCLUSIVE unless it says
 * otherwise; COMMENT takes SHARE UPDATE EXCLUSIVE), and whether the table is rewritten (a type
 * change, unless the two types are binary-compatible) or scanned (SET NOT NULL, a USING, UNIQUE).
 * A type change or a NOT NULL that some rows would fail is a 400 saying how many and which; a
 * type change that needs USING and was not given one is said by its dry run already.
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

/** The ALTER TABLE subcommands of the change (type, default, nullability), and what they say. */
function alterations(input: ColumnChangeInput, name: string, enums: EnumTypes) {
  const subcommands: string[] = [];
  const said: string[] = [];
  let newType: string | undefined;
  if (input.type !== undefined) {
    newType = columnTypeSql(input.type, input.length, enums);
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

/**
 * Whether PostgreSQL converts the column to `newType` by itself, asked of PostgreSQL: the same
 * ALTER on an empty temporary table holding a column of the old type, on the schema's session, in
 * a transaction rolled back. No row is read and the table is not locked. Only a conversion that
 * needs USING (42804) is reported; anything else is left to the run, which explains it.
 */
async function conversionNeedsUsing(
  client: pg.ClientBase,
  column: ColumnInfo,
  newType: string,
): Promise<NeedsUsing | undefined> {
  const name = quoteCatalogName(column.name);
  try {
    await client.query(beginText(client));
    // A row type as the old type locks its table while the probe is made: never wait for that.
    await client.query("SET LOCAL lock_timeout = '50ms'");
    // The old type as the catalog printed it, pg_catalog alone on its search path: qualified.
    await client.query(`CREATE TEMPORARY TABLE dbadmin_type_probe (${name} ${column.type}) ON COMMIT DROP`);
    await client.query(`ALTER TABLE pg_temp.dbadmin_type_probe ALTER COLUMN ${name} TYPE ${newType}`);
    return undefined;
  } catch (error) {
    if (!isPgError(error) || error.code !== '42804') return undefined;
    const using = castUsing(column.name, newType);
    return {
      message: `PostgreSQL does not convert ${column.type} to ${newType} by itself (${error.message}): a USING expression must compute each new value, such as ${using}`,
      using,
    };
  } finally {
    await client.query('ROLLBACK').catch(() => undefined);
  }
}

/** A type change sent without USING: its dry run asks whether it needs one. */
const usingCheck = (
  column: ColumnInfo,
  newType: string | undefined,
  using: string | undefined,
): Pick<Change, 'needsUsing'> =>
  newType !== undefined && using === undefined
    ? { needsUsing: (client) => conversionNeedsUsing(client, column, newType) }
    : {};

/** The schema's enum types the new type may name (none looked up without a type change). */
const enumsFor = (catalog: pg.Pool, input: ColumnChangeInput): Promise<EnumTypes> =>
  input.type === undefined ? Promise.resolve(new Map()) : enumTypesAmong(catalog, input.schema, [input.type]);

export async function planColumnChange(catalog: pg.Pool, input: ColumnChangeInput): Promise<Change> {
  if (input.type === undefined && (input.using !== undefined || input.length !== undefined)) {
    throw new BadRequest('Type missing', 'using and length go with type: send the new type too');
  }
  const info = await tableInfo(catalog, input.schema, input.table);
  const target = columnOf(info, input.column);
  const table = qualified(input.schema, input.table);
  const name = quoteCatalogName(target.name);
  const { subcommands, said, newType, rewrites, scans } = alterations(
    input,
    name,
    await enumsFor(catalog, input),
  );
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
    ...usingCheck(target, newType, input.using),
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
  const target = columnOf(info, input.column);
  const dependents = await columnDependents(catalog, input);
  const locks: TableLock[] = [{ schema: input.schema, table: input.table, level: 'ACCESS EXCLUSIVE' }];
  // CASCADE drops views and other tables' keys: each of their relations is locked as it goes.
  for (const d of input.cascade ? dependents : []) {
    if (d.rel_schema === null || d.rel_name === null || !d.cascade) continue;
    if (locks.some((l) => l.schema === d.rel_schema && l.table === d.rel_name)) continue;
    locks.push({ schema: d.rel_schema, table: d.rel_name, level: 'ACCESS EXCLUSIVE' });
  }
  return {
    summary: `column "${target.name}" dropped from "${input.table}"`,
    statements: [
      `ALTER TABLE ${qualified(input.schema, input.table)} DROP COLUMN ${quoteCatalogName(target.name)}${input.cascade ? ' CASCADE' : ''}`,
    ],
    locks,
    rewrites: false,
    scans: false,
    drops: dependents.map(({ what, cascade }) => ({ what, cascade })),
  };
}

interface Dependent extends Dropped {
  /** The relation it belongs to (a view's, a constraint's table), which CASCADE locks. */
  rel_schema: string | null;
  rel_name: string | null;
}

/**
 * What depends on the column (pg_depend): automatic dependents (its indexes, constraints, owned
 * sequence) go with it; normal ones (views, other tables' foreign keys) only with CASCADE. Its own
 * default is left out. One level: CASCADE also drops what depends on those in turn.
 */
async function columnDependents(
  catalog: pg.Pool,
  input: { schema: string; table: string; column: string },
): Promise<Dependent[]> {
  const { rows } = await catalog.query<Dependent>(
    `SELECT CASE WHEN d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                 THEN 'view ' || vn.nspname || '.' || v.relname
                 ELSE pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) END AS what,
            -- A constraint over the column depends on it both ways: automatic wins.
            NOT pg_catalog.bool_or(d.deptype = 'a') AS cascade,
            coalesce(vn.nspname, kn.nspname)::text AS rel_schema,
            coalesce(v.relname, k.relname)::text AS rel_name
       FROM pg_catalog.pg_namespace n
       JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = $2
       JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attname = $3
       JOIN pg_catalog.pg_depend d ON d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
                                  AND d.refobjid = c.oid AND d.refobjsubid = a.attnum AND d.deptype IN ('n', 'a')
       LEFT JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND r.oid = d.objid
       LEFT JOIN pg_catalog.pg_class v ON v.oid = r.ev_class
       LEFT JOIN pg_catalog.pg_namespace vn ON vn.oid = v.relnamespace
       LEFT JOIN pg_catalog.pg_constraint con ON d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass AND con.oid = d.objid
       LEFT JOIN pg_catalog.pg_class k ON k.oid = con.conrelid
       LEFT JOIN pg_catalog.pg_namespace kn ON kn.oid = k.relnamespace
       LEFT JOIN pg_catalog.pg_attrdef ad ON d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass AND ad.oid = d.objid
      WHERE n.nspname = $1
        -- Its own default goes with it; another column's (a generated column's) is a dependent.
        AND (ad.oid IS NULL OR ad.adrelid <> c.oid OR ad.adnum <> a.attnum)
      GROUP BY 1, 3, 4
      ORDER BY 2, 1`,
    [input.schema, input.table, input.column],
  );
  return rows;
}
