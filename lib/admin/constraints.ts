import type pg from 'pg';
import { printedInSchemaSession } from '#lib/admin/deparse';
import { explainDuplicates, explainFailingCheck } from '#lib/admin/failing-rows';
import type { Change, TableLock } from '#lib/admin/schema-change';
import { columnOf, type TableInfo, tableInfo } from '#lib/db/catalog';
import { assertTenantSchema, type SchemaAccess } from '#lib/db/executor';
import { qualified, quoteCatalogName, quoteIdent } from '#lib/db/identifiers';
import { schemaBusy } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { roleName } from '#lib/db/role-names';
import { BadRequest, Forbidden, NotFound } from '#lib/errors';

/**
 * A table's constraints: listed from the catalog, added and dropped as lib/admin/schema-change
 * runs changes, with the locks PostgreSQL's ALTER TABLE documentation gives each subcommand:
 * ADD FOREIGN KEY takes SHARE ROW EXCLUSIVE on both tables (it adds triggers to each), ADD UNIQUE
 * builds an index and ADD CHECK checks every row under ACCESS EXCLUSIVE, DROP CONSTRAINT takes
 * ACCESS EXCLUSIVE (a foreign key's also on the referenced table, whose triggers it drops).
 */

export const FK_ACTIONS = ['no action', 'restrict', 'cascade', 'set null', 'set default'] as const;
export type FkAction = (typeof FK_ACTIONS)[number];
export const CONSTRAINT_TYPES = ['primary key', 'unique', 'check', 'foreign key', 'exclusion'] as const;

/**
 * One catalog query on the service's pool, which opens no table: pg_get_constraintdef prints a
 * primary key, unique or foreign key from the catalog alone (the syscache), but a check's or an
 * exclusion's expression only with the table open (its deparse reads the table's layout under
 * ACCESS SHARE, waiting behind any ACCESS EXCLUSIVE). Those are printed in the schema's session
 * instead (expressionDefinitions). Nothing here runs a function of the schema.
 */
const CONSTRAINTS = `
  SELECT c.oid IS NOT NULL AS table_exists,
         (SELECT coalesce(json_agg(json_build_object(
                    'name', con.conname,
                    'type', CASE con.contype WHEN 'p' THEN 'primary key' WHEN 'u' THEN 'unique'
                                 WHEN 'c' THEN 'check' WHEN 'f' THEN 'foreign key' ELSE 'exclusion' END,
                    'columns', (SELECT coalesce(json_agg(a.attname ORDER BY k.ord), '[]')
                                  FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
                                  JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum),
                    'definition', CASE WHEN con.contype IN ('p', 'u', 'f') THEN pg_get_constraintdef(con.oid) END,
                    'validated', con.convalidated,
                    'references', CASE WHEN con.contype = 'f' THEN json_build_object(
                        'schema', rn.nspname, 'table', rc.relname,
                        'columns', (SELECT coalesce(json_agg(a.attname ORDER BY k.ord), '[]')
                                      FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, ord)
                                      JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum)) END,
                    'onDelete', CASE WHEN con.contype = 'f' THEN ${action('con.confdeltype')} END,
                    'onUpdate', CASE WHEN con.contype = 'f' THEN ${action('con.confupdtype')} END
                  ) ORDER BY con.conname), '[]')
            FROM pg_constraint con
            LEFT JOIN pg_class rc ON rc.oid = con.confrelid
            LEFT JOIN pg_namespace rn ON rn.oid = rc.relnamespace
           WHERE con.conrelid = c.oid AND con.contype IN ('p', 'u', 'c', 'f', 'x')) AS constraints
    FROM pg_namespace n
    LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = $2 AND c.relkind IN ('r', 'p')
   WHERE n.nspname = $1`;

function action(column: string): string {
  return `CASE ${column} WHEN 'a' THEN 'no action' WHEN 'r' THEN 'restrict' WHEN 'c' THEN 'cascade'
               WHEN 'n' THEN 'set null' WHEN 'd' THEN 'set default' END`;
}

export interface ConstraintInfo {
  name: string;
  type: (typeof CONSTRAINT_TYPES)[number];
  columns: string[];
  /** Null for a check or exclusion while another session holds the table in ACCESS EXCLUSIVE. */
  definition: string | null;
  validated: boolean;
  references: { schema: string; table: string; columns: string[] } | null;
  onDelete: FkAction | null;
  onUpdate: FkAction | null;
}

/**
 * Check and exclusion definitions, printed in the schema's session (PostgreSQL opens the table to
 * deparse them), waiting at most 50 ms for the table: while another session holds it in ACCESS
 * EXCLUSIVE (a schema change, LOCK TABLE), they are left out rather than waited for.
 */
async function expressionDefinitions(access: SchemaAccess, schema: string, table: string) {
  const printed = await printedInSchemaSession(
    access,
    `SELECT con.conname::text AS name, pg_catalog.pg_get_constraintdef(con.oid) AS definition
       FROM pg_catalog.pg_constraint con
       JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND con.contype IN ('c', 'x')`,
    [schema, table],
  );
  return printed ?? new Map<string, string>();
}

/** Every constraint of the table, by name: the catalog read first, then any expressions. */
export async function listConstraints(access: SchemaAccess, table: string) {
  const { schema } = access;
  // The catalog read opens nothing; a 50 ms bound all the same, as describeSchema's, in case.
  const { rows } = await withTransaction(
    access.catalog,
    (client) =>
      client.query<{ table_exists: boolean; constraints: ConstraintInfo[] }>({
        name: 'dbadmin.constraints',
        text: CONSTRAINTS,
        values: [schema, table],
      }),
    { lockTimeout: '50ms' },
  ).catch((error: unknown) => {
    throw schemaBusy(schema, error);
  });
  const found = rows[0];
  if (!found) throw new NotFound('Schema not found', `schema "${schema}" does not exist`);
  if (!found.table_exists) {
    throw new NotFound('Table not found', `table "${table}" does not exist in schema "${schema}"`);
  }
  const constraints = found.constraints;
  if (constraints.some((c) => c.definition === null)) {
    const printed = await expressionDefinitions(access, schema, table);
    for (const c of constraints) c.definition ??= printed.get(c.name) ?? null;
  }
  return { schema, table, constraints };
}

export interface AddConstraintInput {
  schema: string;
  table: string;
  name?: string | undefined;
  type: 'foreign key' | 'unique' | 'check';
  columns?: string[] | undefined;
  references?: { schema?: string | undefined; table: string; columns?: string[] | undefined } | undefined;
  onDelete?: FkAction | undefined;
  onUpdate?: FkAction | undefined;
  /** An SQL expression, run as the schema's role. */
  check?: string | undefined;
  notValid?: boolean | undefined;
}

const columnList = (columns: string[]) => columns.map((c) => quoteIdent(c, 'column name')).join(', ');

/** The constraint's columns, each a column of the table (400 before anything runs otherwise). */
function needColumns(input: AddConstraintInput, info: TableInfo): string[] {
  if (!input.columns?.length) {
    throw new BadRequest('Columns needed', `a ${input.type} constraint needs "columns"`);
  }
  for (const name of input.columns) columnOf(info, name);
  return input.columns;
}

/**
 * Whether the schema's role may reference the table (REFERENCES on it, USAGE on its schema), as
 * PostgreSQL will judge when the change runs: refused here first, so that a table in another
 * schema is neither read about nor locked for a caller who may not see it.
 */
async function assertMayReference(
  catalog: pg.Pool,
  schema: string,
  target: { schema: string; table: string },
) {
  // By the role's oid: a role that is not there (a schema made by hand) may do nothing, not fail.
  const { rows } = await catalog.query<{ usable: boolean | null; exists: boolean; may: boolean | null }>(
    `SELECT pg_catalog.has_schema_privilege(r.oid, n.oid, 'USAGE') AS usable, c.oid IS NOT NULL AS exists,
            c.oid IS NOT NULL AND pg_catalog.has_table_privilege(r.oid, c.oid, 'REFERENCES') AS may
       FROM pg_catalog.pg_namespace n
       LEFT JOIN pg_catalog.pg_roles r ON r.rolname = $1
       LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = $3 AND c.relkind IN ('r', 'p')
      WHERE n.nspname = $2`,
    [roleName(schema, 'owner'), target.schema, target.table],
  );
  const found = rows[0];
  const refused = new Forbidden(
    `schema "${schema}" may not reference "${target.schema}"."${target.table}": its owner has not granted REFERENCES on it to "${schema}_owner"`,
  );
  if (!found?.usable) throw refused;
  if (!found.exists) {
    throw new NotFound(
      'Table not found',
      `table "${target.table}" does not exist in schema "${target.schema}"`,
    );
  }
  if (!found.may) throw refused;
}

async function foreignKey(catalog: pg.Pool, input: AddConstraintInput, info: TableInfo) {
  const columns = needColumns(input, info);
  const references = input.references;
  if (!references) throw new BadRequest('References needed', 'a foreign key needs "references": {table}');
  const target = { schema: references.schema ?? input.schema, table: references.table };
  await assertMayReference(catalog, input.schema, target);
  if (references.columns?.length) {
    const referenced = await tableInfo(catalog, target.schema, target.table);
    for (const name of references.columns) columnOf(referenced, name);
  }
  const referenced = references.columns?.length ? ` (${columnList(references.columns)})` : '';
  const actions = [
    input.onDelete ? ` ON DELETE ${input.onDelete.toUpperCase()}` : '',
    input.onUpdate ? ` ON UPDATE ${input.onUpdate.toUpperCase()}` : '',
  ].join('');
  const locks: TableLock[] = [{ schema: input.schema, table: input.table, level: 'SHARE ROW EXCLUSIVE' }];
  if (target.schema !== input.schema || target.table !== input.table) {
    locks.push({ ...target, level: 'SHARE ROW EXCLUSIVE' });
  }
  return {
    sql: `FOREIGN KEY (${columnList(columns)}) REFERENCES ${qualified(target.schema, target.table)}${referenced}${actions}`,
    said: `foreign key (${columns.join(', ')}) to "${target.schema}"."${target.table}"`,
    locks,
  };
}

/** The constraint's clause of ADD CONSTRAINT, what it says, and the locks it takes. */
async function clause(catalog: pg.Pool, input: AddConstraintInput, info: TableInfo) {
  const own: TableLock[] = [{ schema: input.schema, table: input.table, level: 'ACCESS EXCLUSIVE' }];
  if (input.type === 'foreign key') return foreignKey(catalog, input, info);
  if (input.type === 'unique') {
    if (input.notValid)
      throw new BadRequest('Not possible', 'only a foreign key or a check can be NOT VALID');
    const columns = needColumns(input, info);
    return { sql: `UNIQUE (${columnList(columns)})`, said: `unique (${columns.join(', ')})`, locks: own };
  }
  if (!input.check)
    throw new BadRequest('Check needed', 'a check constraint needs "check": an SQL expression');
  return { sql: `CHECK (${input.check})`, said: `check (${input.check})`, locks: own };
}

export async function planAddConstraint(catalog: pg.Pool, input: AddConstraintInput): Promise<Change> {
  assertTenantSchema(input.schema);
  const info = await tableInfo(catalog, input.schema, input.table);
  const { sql, said, locks } = await clause(catalog, input, info);
  const name = input.name !== undefined ? `CONSTRAINT ${quoteIdent(input.name, 'constraint name')} ` : '';
  const notValid = input.notValid ? ' NOT VALID' : '';
  const columns = input.columns ?? [];
  return {
    summary: `${input.name ? `constraint "${input.name}": ` : ''}${said} on "${input.table}"${notValid}`,
    statements: [`ALTER TABLE ${qualified(input.schema, input.table)} ADD ${name}${sql}${notValid}`],
    locks,
    rewrites: false,
    // Every row is read: to build the unique index, or to check them (NOT VALID skips that).
    scans: !input.notValid,
    explain: (client, error) =>
      input.type === 'unique'
        ? explainDuplicates(client, info, columns, error)
        : input.type === 'check' && input.check !== undefined
          ? explainFailingCheck(client, info, input.check, error)
          : Promise.resolve(error),
  };
}

interface ExistingConstraint {
  type: string;
  referenced_schema: string | null;
  referenced_table: string | null;
  /** Tables whose foreign keys depend on this constraint's index (dropped too with cascade). */
  dependents: { schema: string; table: string }[];
}

/** The constraint on the table, its type and the tables a drop also locks; 404 when none. */
async function existingConstraint(catalog: pg.Pool, schema: string, table: string, name: string) {
  await tableInfo(catalog, schema, table);
  const { rows } = await catalog.query<ExistingConstraint>(
    `SELECT con.contype::text AS type, rn.nspname::text AS referenced_schema, rc.relname::text AS referenced_table,
            (SELECT coalesce(json_agg(DISTINCT jsonb_build_object('schema', dn.nspname, 'table', dc.relname)), '[]')
               FROM pg_catalog.pg_constraint d
               JOIN pg_catalog.pg_class dc ON dc.oid = d.conrelid
               JOIN pg_catalog.pg_namespace dn ON dn.oid = dc.relnamespace
              WHERE con.contype IN ('p', 'u') AND d.contype = 'f' AND d.confrelid = con.conrelid
                AND d.conindid = con.conindid AND d.conrelid <> con.conrelid) AS dependents
       FROM pg_catalog.pg_constraint con
       JOIN pg_catalog.pg_class c ON c.oid = con.conrelid
       JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
       LEFT JOIN pg_catalog.pg_class rc ON rc.oid = con.confrelid
       LEFT JOIN pg_catalog.pg_namespace rn ON rn.oid = rc.relnamespace
      WHERE n.nspname = $1 AND c.relname = $2 AND con.conname = $3`,
    [schema, table, name],
  );
  const found = rows[0];
  if (!found) {
    throw new NotFound('Constraint not found', `table "${table}" has no constraint "${name}"`);
  }
  return found;
}

export async function planDropConstraint(
  catalog: pg.Pool,
  input: { schema: string; table: string; constraint: string; cascade: boolean },
): Promise<Change> {
  assertTenantSchema(input.schema);
  const found = await existingConstraint(catalog, input.schema, input.table, input.constraint);
  const locks: TableLock[] = [{ schema: input.schema, table: input.table, level: 'ACCESS EXCLUSIVE' }];
  const others = [
    ...(found.referenced_schema !== null && found.referenced_table !== null
      ? [{ schema: found.referenced_schema, table: found.referenced_table }]
      : []),
    // Foreign keys on other tables that use this key's index are dropped with it (CASCADE).
    ...(input.cascade ? found.dependents : []),
  ];
  for (const other of others) {
    const already = locks.some((l) => l.schema === other.schema && l.table === other.table);
    if (!already) locks.push({ ...other, level: 'ACCESS EXCLUSIVE' });
  }
  return {
    summary: `constraint "${input.constraint}" dropped from "${input.table}"`,
    statements: [
      `ALTER TABLE ${qualified(input.schema, input.table)} DROP CONSTRAINT ${quoteCatalogName(input.constraint)}${input.cascade ? ' CASCADE' : ''}`,
    ],
    locks,
    rewrites: false,
    scans: false,
  };
}
