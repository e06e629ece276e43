import { z } from 'zod';
import { planColumnChange, planDropColumn } from '#lib/admin/column-changes';
import { exportTable, exportTableRead } from '#lib/admin/export';
import { isSearch, searchPage } from '#lib/admin/row-search';
import { MAX_CURSOR_LENGTH } from '#lib/admin/row-view';
import { describeSchema } from '#lib/admin/structure';
import { EXACT_COUNT_MAX_ROWS, readTable, tablesRead } from '#lib/admin/table-pages';
import { addColumn, cloneTable, createTable, deleteTable } from '#lib/admin/tables';
import { getConfig, resultLimits } from '#lib/config';
import { assertTenantSchema } from '#lib/db/executor';
import { getDatabase } from '#lib/db/pool';
import { tableEstimateRead } from '#lib/db/table-estimate';
import {
  NO_SCHEMA,
  NO_TABLE,
  RESPONSE_LIMIT,
  RESULT_LIMITS,
  SCHEMA_BUSY,
  SCHEMA_SESSION,
  WIRE_LIMIT,
} from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { SchemaChangeAnswer, schemaChange, TABLE_LOCKED } from '#lib/http/schema-changes';
import {
  columnName,
  columnType,
  defaultValue,
  identifier,
  inSchema,
  Outcome,
  queryBoolean,
  queryInt,
  Row,
  rowFilterQuery,
  tableName,
} from '#lib/validation';

const TablePath = z.object({ tableName });

/** Finding rows (lib/admin/row-filter, lib/admin/row-view): which rows, their order and columns. */
const RowSearchQuery = {
  ...rowFilterQuery,
  order: z.string().max(4000).optional().meta({
    description:
      'col.desc.nullslast,col2: the sort; the primary key is appended, so the order is total and pages by after',
    example: 'created_at.desc,name',
  }),
  select: z
    .string()
    .max(4000)
    .optional()
    .meta({ description: 'the columns to answer, in order', example: 'id,name' }),
};

const ColumnDefinition = z.strictObject({
  name: identifier('column name'),
  type: columnType,
  length: z.number().int().positive().optional(),
  primaryKey: z.boolean().optional(),
  nullable: z.boolean().optional(),
  defaultValue,
});

const StructureEntry = z.object({
  table: z.string(),
  columns: z.array(
    z.object({
      name: z.string(),
      type: z.string(),
      maxLength: z.number().nullable(),
      nullable: z.boolean(),
      defaultValue: z.string().nullable().meta({
        description:
          'its DEFAULT as PostgreSQL prints it; null for none, for a generated column, and for a default PostgreSQL cannot print',
      }),
      identity: z
        .enum(['always', 'by default'])
        .nullable()
        .meta({ description: 'an identity column: `always` takes no value on insert, `by default` may' }),
      generated: z.boolean().meta({ description: 'a generated column: computed from others, never written' }),
      primaryKey: z.boolean(),
      comment: z.string().nullable(),
    }),
  ),
  foreignKeys: z.array(
    z.object({
      column: z.string(),
      referencedTable: z.string(),
      referencedColumn: z.string(),
      constraintName: z.string(),
      referencedSchema: z.string().meta({ description: 'the referenced table’s schema' }),
    }),
  ),
  indexes: z.array(
    z.object({
      name: z.string(),
      columns: z
        .array(z.string().nullable())
        .meta({ description: 'the key columns in order; null for an expression' }),
      unique: z.boolean(),
      primary: z.boolean(),
      method: z.string(),
      valid: z
        .boolean()
        .meta({ description: 'false: a concurrent build failed or runs; queries do not use it' }),
      sizeBytes: z
        .number()
        .meta({ description: 'from the catalog (relpages), as of the last VACUUM or ANALYZE' }),
    }),
  ),
  constraints: z
    .array(z.object({ name: z.string(), type: z.enum(['unique', 'check']), columns: z.array(z.string()) }))
    .meta({
      description:
        'unique and check constraints by name and columns (the primary key is in columns, foreign keys in foreignKeys); a check’s expression is not read here, as PostgreSQL opens the table to print it: GET /api/table/{tableName}/constraints prints it',
    }),
  comment: z.string().nullable(),
  sizeBytes: z
    .number()
    .meta({ description: 'the table’s heap from the catalog (relpages), as of the last VACUUM or ANALYZE' }),
  estimatedRows: z.number().nullable().meta({
    description: 'PostgreSQL’s estimate (reltuples); null before the table is first vacuumed or analyzed',
  }),
});

/** A read about a table whose rows the route then reads as the schema's role: a tenant schema only (400). */
const tenantRead = <T>(schema: string, table: string, read: (schema: string, table: string) => T) => {
  assertTenantSchema(schema);
  return read(schema, table);
};

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/tables',
    summary: 'List the tables of a schema, sorted',
    access: 'read',
    query: z.strictObject({ schema: inSchema }),
    response: z.array(z.string()),
    errors: [NO_SCHEMA, RESPONSE_LIMIT],
    reads: ({ query }) => tablesRead(query.schema),
    handler: async ({ read }) => read,
  }),
  defineRoute({
    method: 'GET',
    path: '/api/table/{tableName}',
    summary: 'One page of a table, in primary-key order, with the row count (exact while cheap)',
    access: 'read',
    params: TablePath,
    query: z.strictObject({
      schema: inSchema,
      page: queryInt('page', 1, 10_000_000).default(1).meta({
        description: 'which page; with after it only comes back in the answer',
      }),
      limit: queryInt('limit', 1, 1000).default(50),
      count: queryBoolean.optional().meta({
        description: 'false: skip counting the rows (total is null), for turning pages of a big table',
      }),
      after: z.string().max(MAX_CURSOR_LENGTH).optional().meta({
        description:
          "a previous answer's nextCursor: the rows after it in the same order (without filter, order, select or q: a table with a single-column primary key, and a value of the key's type)",
      }),
      ...RowSearchQuery,
    }),
    response: z.object({
      data: z.array(Row),
      columns: z.array(z.string()),
      total: z
        .number()
        .nullable()
        .meta({
          description: `every row of the table: counted up to ${EXACT_COUNT_MAX_ROWS} rows, past that the planner's estimate; null with count=false`,
        }),
      totalExact: z
        .boolean()
        .meta({ description: 'whether total was counted (false: an estimate, or null)' }),
      page: z.number(),
      nextCursor: z.string().nullable().meta({
        description:
          'pass as after for the next page; null on the last page and for tables without a single-column primary key',
      }),
    }),
    errors: [...SCHEMA_SESSION, NO_TABLE, RESULT_LIMITS, RESPONSE_LIMIT],
    reads: ({ params, query }) => tenantRead(query.schema, params.tableName, tableEstimateRead),
    handler: async ({ query, read, accessTo }) => {
      const config = await getConfig();
      const access = await accessTo(query.schema);
      const { schema, page, limit, count, after, ...search } = query;
      if (isSearch(search)) {
        return searchPage(access, read, resultLimits(config), {
          ...search,
          page,
          limit,
          count: count ?? true,
          after,
          cursorSecret: config.DBADMIN_SECRET,
          exactCountMaxRows: EXACT_COUNT_MAX_ROWS,
        });
      }
      return readTable(access, read, resultLimits(config), { page, limit, count: count ?? true, after });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/create',
    addsData: true,
    audit: { action: 'table.create', target: ({ body }) => `table ${body.tableName}` },
    summary: 'Create a table from column definitions',
    access: 'write',
    permission: 'alter',
    body: z.strictObject({
      tableName,
      schema: inSchema,
      columns: z
        .array(ColumnDefinition)
        .min(1, 'columns must define at least 1 column')
        .max(1600, 'columns may define at most 1600 columns'),
    }),
    response: Outcome,
    status: 201,
    errors: SCHEMA_SESSION,
    handler: async ({ body, accessTo }) => createTable(await accessTo(body.schema), body),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/table/{tableName}',
    audit: { action: 'table.delete', target: ({ params }) => `table ${params.tableName}` },
    summary: 'Delete a table; cascade=true also deletes what depends on it',
    access: 'write',
    permission: 'alter',
    params: TablePath,
    query: z.strictObject({ schema: inSchema, cascade: queryBoolean.default(false) }),
    response: Outcome,
    errors: [...SCHEMA_SESSION, NO_TABLE],
    handler: async ({ params, query, accessTo }) =>
      deleteTable(await accessTo(query.schema), {
        schema: query.schema,
        table: params.tableName,
        cascade: query.cascade,
      }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/clone',
    addsData: true,
    audit: {
      action: 'table.clone',
      target: ({ params, body }) => `table ${params.tableName} to ${body.newTableName}`,
    },
    summary: 'Copy a table (columns, defaults, primary key, indexes; optionally rows) under a new name',
    access: 'write',
    permission: 'alter',
    params: TablePath,
    body: z.strictObject({ newTableName: tableName, copyData: z.boolean().default(false), schema: inSchema }),
    response: Outcome,
    status: 201,
    errors: [...SCHEMA_SESSION, NO_TABLE],
    handler: async ({ params, body, accessTo }) =>
      cloneTable(await accessTo(body.schema), {
        schema: body.schema,
        table: params.tableName,
        newTableName: body.newTableName,
        copyData: body.copyData,
      }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/table/{tableName}/export',
    summary: 'Export rows as JSON or CSV (text/csv attachment)',
    access: 'read',
    params: TablePath,
    query: z
      .strictObject({
        schema: inSchema,
        format: z.enum(['json', 'csv'], { message: 'format must be json or csv' }).default('json'),
        limit: queryInt('limit', 1, 10_000).default(10_000),
        after: z.string().min(1).max(MAX_CURSOR_LENGTH).optional().meta({
          description:
            'the nextCursor of the export’s previous page (same filters and order): the rows after it',
        }),
        header: queryBoolean.default(true).meta({
          description:
            'CSV: the header line; false for the pages after the first, to join them into one file',
        }),
        spreadsheetSafe: queryBoolean.default(false).meta({
          description:
            "CSV: a text cell that starts with =, +, -, @, a tab or a carriage return gets a leading ' so a spreadsheet shows it rather than running it as a formula (not for re-import: those values change)",
        }),
        ...RowSearchQuery,
      })
      .refine((query) => !query.spreadsheetSafe || query.format === 'csv', {
        message: 'spreadsheetSafe applies to format=csv only',
        path: ['spreadsheetSafe'],
      }),
    response: z.object({
      table: z.string(),
      count: z.number(),
      nextCursor: z.string().optional().meta({
        description:
          'only when more rows follow: pass it as after for the next page (CSV: the X-Next-Cursor header); left out on the last page, and for a table without a primary key',
      }),
      data: z.array(Row),
    }),
    alsoProduces: 'text/csv',
    errors: [
      ...SCHEMA_SESSION,
      NO_TABLE,
      { status: 404, why: 'the table has no rows to export' },
      RESULT_LIMITS,
      RESPONSE_LIMIT,
    ],
    reads: ({ params, query }) => tenantRead(query.schema, params.tableName, exportTableRead),
    handler: async ({ query, read, accessTo }) =>
      exportTable(await accessTo(query.schema), read, resultLimits(await getConfig()), {
        ...query,
        cursorSecret: (await getConfig()).DBADMIN_SECRET,
      }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/column',
    addsData: true,
    audit: {
      action: 'column.add',
      target: ({ params, body }) => `column ${params.tableName}.${body.columnName}`,
    },
    summary: 'Add a column',
    access: 'write',
    permission: 'alter',
    params: TablePath,
    body: z.strictObject({
      columnName,
      dataType: columnType,
      length: z.number().int().positive().optional(),
      nullable: z.boolean().optional(),
      defaultValue,
      schema: inSchema,
    }),
    response: Outcome,
    status: 201,
    // Adding a column with a default runs it for every row: code planted there can talk back.
    errors: [...SCHEMA_SESSION, NO_TABLE, WIRE_LIMIT],
    handler: async ({ params, body, accessTo }) =>
      addColumn(await accessTo(body.schema), {
        schema: body.schema,
        table: params.tableName,
        column: {
          name: body.columnName,
          type: body.dataType,
          length: body.length,
          nullable: body.nullable,
          defaultValue: body.defaultValue,
        },
      }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/schema',
    summary:
      'Structure of a schema: tables, columns, foreign keys, indexes, unique and check constraints, comments, sizes and row estimates',
    access: 'read',
    query: z.strictObject({ schema: inSchema }),
    response: z.object({ schema: z.array(StructureEntry) }),
    errors: [NO_SCHEMA, SCHEMA_BUSY, RESPONSE_LIMIT],
    handler: async ({ query }) => describeSchema(await getDatabase(), query.schema),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/table/{tableName}/column/{columnName}',
    addsData: true,
    audit: {
      action: 'column.change',
      target: ({ params }) => `column ${params.tableName}.${params.columnName}`,
    },
    summary:
      'Change a column: rename, type (with using), default, nullable, comment; dryRun shows the SQL, its locks and whether it rewrites or scans the table',
    access: 'write',
    permission: 'alter',
    params: z.object({ tableName, columnName }),
    body: z.strictObject({
      schema: inSchema,
      dryRun: z.boolean().default(false),
      rename: columnName.optional(),
      type: columnType.optional(),
      length: z.number().int().positive().optional(),
      using: z.string().min(1).max(10_000).optional().meta({
        description: 'an SQL expression the new value is computed by, as the schema’s role (with type)',
      }),
      default: defaultValue,
      nullable: z.boolean().optional(),
      comment: z.string().max(10_000).nullable().optional(),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_TABLE, TABLE_LOCKED],
    handler: async ({ params, body, principal, accessTo }) =>
      schemaChange({ principal, accessTo, schema: body.schema, dryRun: body.dryRun }, (catalog) =>
        planColumnChange(catalog, {
          ...body,
          table: params.tableName,
          column: params.columnName,
        }),
      ),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/table/{tableName}/column/{columnName}',
    audit: {
      action: 'column.drop',
      target: ({ params }) => `column ${params.tableName}.${params.columnName}`,
    },
    summary: 'Drop a column (cascade=true also drops what depends on it); dryRun shows the SQL and its lock',
    access: 'write',
    permission: 'alter',
    params: z.object({ tableName, columnName }),
    query: z.strictObject({
      schema: inSchema,
      cascade: queryBoolean.default(false),
      dryRun: queryBoolean.default(false),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_TABLE, TABLE_LOCKED],
    handler: async ({ params, query, principal, accessTo }) =>
      schemaChange({ principal, accessTo, schema: query.schema, dryRun: query.dryRun }, (catalog) =>
        planDropColumn(catalog, {
          schema: query.schema,
          table: params.tableName,
          column: params.columnName,
          cascade: query.cascade,
        }),
      ),
  }),
];

export const handler = httpHandler(routes);
