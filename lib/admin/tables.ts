import type pg from 'pg';
import { enumTypesAmong } from '#lib/admin/types';
import { assertSchemaExists, tableInfo } from '#lib/db/catalog';
import { columnTypeSql, defaultSql, type EnumTypes } from '#lib/db/column-types';
import type { SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName, quoteIdent, quoteLiteral } from '#lib/db/identifiers';
import { isPgError } from '#lib/db/pg-errors';
import { auditedStatement, inTransaction } from '#lib/db/transaction';
import { BadRequest } from '#lib/errors';

/**
 * Tables made, cloned and dropped, and columns added, as the schema's role (what it makes belongs
 * to the schema's owner), each the request's change with its audit entry. Reading a table's rows
 * is lib/admin/table-pages'; changing a table in place, lib/admin/schema-change's.
 */

export interface ColumnDefinition {
  name: string;
  type: string;
  length?: number | undefined;
  primaryKey?: boolean | undefined;
  nullable?: boolean | undefined;
  defaultValue?: string | number | boolean | null | undefined;
}

/** `"name" type [NOT NULL] [DEFAULT ...]`, from the allow-lists only. */
export function columnSql(
  column: ColumnDefinition,
  { inPrimaryKey = false, enums }: { inPrimaryKey?: boolean; enums?: EnumTypes } = {},
): string {
  const parts = [quoteIdent(column.name, 'column name'), columnTypeSql(column.type, column.length, enums)];
  if (column.nullable === false || inPrimaryKey) parts.push('NOT NULL');
  if (column.defaultValue !== undefined && column.defaultValue !== null) {
    parts.push(`DEFAULT ${defaultSql(column.defaultValue)}`);
  }
  return parts.join(' ');
}

async function assertNoTable(db: pg.Pool, schema: string, table: string) {
  const { rowCount } = await db.query(
    `SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = $2`,
    [schema, table],
  );
  if (rowCount)
    throw new BadRequest(
      'Table exists',
      `a table or other relation "${table}" already exists in schema "${schema}"`,
    );
}

export interface CreateTableInput {
  schema: string;
  tableName: string;
  columns: ColumnDefinition[];
}

/** Created as the schema's role, so the table belongs to the schema's owner. */
export async function createTable(access: SchemaAccess, { schema, tableName, columns }: CreateTableInput) {
  const seen = new Set<string>();
  for (const column of columns) {
    if (seen.has(column.name))
      throw new BadRequest('Invalid columns', `column "${column.name}" is defined twice`);
    seen.add(column.name);
  }
  const primaryKey = columns.filter((c) => c.primaryKey).map((c) => quoteIdent(c.name, 'column name'));
  const enums = await enumTypesAmong(
    access.catalog,
    schema,
    columns.map((c) => c.type),
  );
  const definitions = columns.map((c) => columnSql(c, { inPrimaryKey: Boolean(c.primaryKey), enums }));
  if (primaryKey.length > 0) definitions.push(`PRIMARY KEY (${primaryKey.join(', ')})`);

  await assertSchemaExists(access.catalog, schema);
  await assertNoTable(access.catalog, schema, tableName);
  await access.run((client) =>
    auditedStatement(
      client,
      `CREATE TABLE ${qualified(schema, tableName)} (${definitions.join(', ')})`,
      access.audit,
    ),
  );
  return { success: true, message: `Table "${tableName}" created in schema "${schema}"` };
}

export interface CloneTableInput {
  schema: string;
  table: string;
  newTableName: string;
  copyData: boolean;
}

/** Serial columns of the source whose default is nextval() of a sequence the source owns. */
const SERIAL_COLUMNS = `
  SELECT a.attname AS column_name, s.relname AS sequence_name
    FROM pg_depend d
    JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
    JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
   WHERE d.refobjid = (SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                        WHERE n.nspname = $1 AND c.relname = $2)
     AND d.deptype = 'a' AND d.classid = 'pg_class'::regclass`;

/**
 * A new table with the source's columns, defaults, constraints and indexes (LIKE ... INCLUDING
 * ALL), and optionally its rows. Serial columns get sequences of their own, set past the copied
 * values, so the clone and the source never hand out the same id.
 */
export async function cloneTable(
  access: SchemaAccess,
  { schema, table, newTableName, copyData }: CloneTableInput,
) {
  await tableInfo(access.catalog, schema, table);
  await assertNoTable(access.catalog, schema, newTableName);
  const from = qualified(schema, table);
  const to = qualified(schema, newTableName);
  // By name, not `::regclass`: resolving a qualified name needs USAGE on the schema, a right the
  // service's role does not hold in a tenant's (lib/db/role-admin).
  const serials = await access.catalog.query<{ column_name: string; sequence_name: string }>(SERIAL_COLUMNS, [
    schema,
    table,
  ]);
  // The copy evaluates the source's checks, domains and index expressions: as the schema's role.
  await access.run((client) =>
    inTransaction(
      client,
      async () => {
        await client.query(`CREATE TABLE ${to} (LIKE ${from} INCLUDING ALL)`);
        const copied = copyData
          ? await client.query(`INSERT INTO ${to} OVERRIDING SYSTEM VALUE SELECT * FROM ${from}`)
          : undefined;
        for (const { column_name: column } of serials.rows) {
          const sequence = `${newTableName}_${column}_seq`.slice(0, 63);
          const seq = `${quoteIdent(schema)}.${quoteCatalogName(sequence)}`;
          const col = quoteCatalogName(column);
          await client.query(`CREATE SEQUENCE ${seq} OWNED BY ${to}.${col}`);
          await client.query(
            `ALTER TABLE ${to} ALTER COLUMN ${col} SET DEFAULT nextval(${quoteLiteral(seq)}::regclass)`,
          );
          await client.query(
            `SELECT setval(${quoteLiteral(seq)}::regclass, coalesce(max(${col}), 0) + 1, false) FROM ${to}`,
          );
        }
        return copied?.rowCount ?? undefined;
      },
      { audit: access.audit, rows: (rows) => rows },
    ),
  );
  return {
    success: true,
    message: `Table "${table}" cloned to "${newTableName}"${copyData ? ' with its data' : ''}`,
  };
}

export interface DeleteTableInput {
  schema: string;
  table: string;
  cascade: boolean;
}

export async function deleteTable(access: SchemaAccess, { schema, table, cascade }: DeleteTableInput) {
  await tableInfo(access.catalog, schema, table);
  await access.run(async (client) => {
    try {
      await auditedStatement(
        client,
        `DROP TABLE ${qualified(schema, table)}${cascade ? ' CASCADE' : ''}`,
        access.audit,
      );
    } catch (error) {
      if (isPgError(error) && error.code === '2BP01') {
        throw new BadRequest(
          'Table has dependants',
          `table "${table}" cannot be deleted while other objects depend on it (${(error.detail ?? '').replace(/\n/g, '; ')}); pass cascade=true to delete them too`,
          error,
        );
      }
      throw error;
    }
  });
  return { success: true, message: `Table "${table}" deleted from schema "${schema}"` };
}

export interface AddColumnInput {
  schema: string;
  table: string;
  column: ColumnDefinition;
}

/** As the schema's role: a default that rewrites the table re-evaluates its index expressions. */
export async function addColumn(access: SchemaAccess, { schema, table, column }: AddColumnInput) {
  const info = await tableInfo(access.catalog, schema, table);
  if (info.columns.some((c) => c.name === column.name)) {
    throw new BadRequest('Column exists', `column "${column.name}" already exists in table "${table}"`);
  }
  const enums = await enumTypesAmong(access.catalog, schema, [column.type]);
  await access.run((client) =>
    auditedStatement(
      client,
      `ALTER TABLE ${qualified(schema, table)} ADD COLUMN ${columnSql(column, { enums })}`,
      access.audit,
    ),
  );
  return { success: true, message: `Column "${column.name}" added to table "${table}"` };
}
