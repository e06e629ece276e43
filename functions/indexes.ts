import { z } from 'zod';
import {
  INDEX_METHODS,
  indexBuildProgress,
  listIndexes,
  planCreateIndex,
  planDropIndex,
} from '#lib/admin/indexes';
import { getDatabase } from '#lib/db/pool';
import { type Answer, NO_TABLE, SCHEMA_BUSY, SCHEMA_SESSION } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { SchemaChangeAnswer, schemaChange, TABLE_LOCKED } from '#lib/http/schema-changes';
import { columnName, identifier, inSchema, queryBoolean, tableName } from '#lib/validation';

const TablePath = z.object({ tableName });
const indexName = identifier('index name');

const NO_INDEX: Answer = { status: 404, why: 'the table has no such index' };

const Index = z.object({
  name: z.string(),
  columns: z.array(z.object({ column: z.string().nullable(), expression: z.string().nullable() })).meta({
    description:
      'the key, in order: a column, or an expression (column null; the expression null while the table is locked)',
  }),
  include: z.array(z.string()).meta({ description: 'INCLUDE columns' }),
  method: z.string(),
  unique: z.boolean(),
  primary: z.boolean(),
  constraint: z
    .string()
    .nullable()
    .meta({ description: 'the primary key, unique or exclusion constraint it backs' }),
  partial: z.boolean(),
  where: z.string().nullable().meta({ description: 'the predicate of a partial index' }),
  sizeBytes: z
    .number()
    .meta({ description: 'from the catalog (relpages), as of the last VACUUM or ANALYZE' }),
  valid: z.boolean().meta({ description: 'false: a concurrent build failed or runs; queries do not use it' }),
  scans: z.number().nullable().meta({ description: 'scans that used it (pg_stat_user_indexes.idx_scan)' }),
  definition: z.string().nullable().meta({ description: 'CREATE INDEX as PostgreSQL prints it' }),
});

const Build = z.object({
  pid: z.number(),
  index: z.string().nullable(),
  command: z.string().nullable(),
  phase: z.string().nullable(),
  lockersDone: z.number().nullable(),
  lockersTotal: z.number().nullable(),
  blocksDone: z.number().nullable(),
  blocksTotal: z.number().nullable(),
  tuplesDone: z.number().nullable(),
  tuplesTotal: z.number().nullable(),
  percent: z.number().nullable().meta({ description: 'of the current phase' }),
});

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/table/{tableName}/indexes',
    summary: 'The indexes of a table: key, method, unique, partial predicate, size, whether valid and used',
    access: 'read',
    params: TablePath,
    query: z.strictObject({ schema: inSchema }),
    response: z.object({
      definitionsRead: z.boolean().meta({
        description:
          'false: another session holds the table locked, and definitions, expressions and predicates are null rather than waited for',
      }),
      indexes: z.array(Index),
    }),
    errors: [NO_TABLE, SCHEMA_BUSY],
    handler: async ({ params, query }) => listIndexes(await getDatabase(), query.schema, params.tableName),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/table/{tableName}/indexes/progress',
    summary: 'Index builds running on a table (pg_stat_progress_create_index): phase, counts, percent',
    access: 'read',
    params: TablePath,
    query: z.strictObject({ schema: inSchema }),
    response: z.object({ builds: z.array(Build) }),
    errors: [NO_TABLE, SCHEMA_BUSY],
    handler: async ({ params, query }) =>
      indexBuildProgress(await getDatabase(), query.schema, params.tableName),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/indexes',
    addsData: true,
    audit: {
      action: 'index.create',
      target: ({ params, body }) => `index ${body.name ?? '(named by PostgreSQL)'} on ${params.tableName}`,
    },
    summary:
      'Create an index (unique, method, partial where, concurrently); dryRun shows the SQL and its lock',
    access: 'write',
    permission: 'alter',
    params: TablePath,
    body: z.strictObject({
      schema: inSchema,
      dryRun: z.boolean().default(false),
      name: indexName.optional().meta({ description: 'default: table_column_idx, as PostgreSQL names it' }),
      columns: z.array(columnName).min(1, 'columns must name at least 1 column').max(32),
      unique: z.boolean().default(false),
      method: z.enum(INDEX_METHODS).default('btree'),
      where: z.string().min(1).max(10_000).optional().meta({
        description: 'a predicate for a partial index, SQL run as the schema’s role',
      }),
      concurrently: z.boolean().default(false).meta({
        description:
          'build without blocking writes (SHARE UPDATE EXCLUSIVE), outside a transaction; a failed build’s invalid index is dropped',
      }),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_TABLE, TABLE_LOCKED],
    handler: async ({ params, body, principal, accessTo }) =>
      schemaChange({ principal, accessTo, schema: body.schema, dryRun: body.dryRun }, (catalog) =>
        planCreateIndex(catalog, { ...body, table: params.tableName }),
      ),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/table/{tableName}/indexes/{indexName}',
    audit: { action: 'index.drop', target: ({ params }) => `index ${params.indexName}` },
    summary:
      'Drop an index (not a primary key’s or a constraint’s); concurrently=true without blocking reads and writes',
    access: 'write',
    permission: 'alter',
    params: z.object({ tableName, indexName }),
    query: z.strictObject({
      schema: inSchema,
      concurrently: queryBoolean.default(false),
      dryRun: queryBoolean.default(false),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_TABLE, NO_INDEX, TABLE_LOCKED],
    handler: async ({ params, query, principal, accessTo }) =>
      schemaChange({ principal, accessTo, schema: query.schema, dryRun: query.dryRun }, (catalog) =>
        planDropIndex(catalog, {
          schema: query.schema,
          table: params.tableName,
          index: params.indexName,
          concurrently: query.concurrently,
        }),
      ),
  }),
];

export const handler = httpHandler(routes);
