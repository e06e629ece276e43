import { z } from 'zod';
import {
  CONSTRAINT_TYPES,
  FK_ACTIONS,
  listConstraints,
  planAddConstraint,
  planDropConstraint,
} from '#lib/admin/constraints';
import { listRoutines, ROUTINES_LISTED } from '#lib/admin/routines';
import { planTableChange } from '#lib/admin/table-changes';
import { ENUM_VALUE_MAX_BYTES, listEnums, planAddEnumValue, planCreateEnum } from '#lib/admin/types';
import { listViews, refreshView } from '#lib/admin/views';
import { getDatabase } from '#lib/db/pool';
import { type Answer, NO_SCHEMA, NO_TABLE, SCHEMA_BUSY, SCHEMA_SESSION } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { SchemaChangeAnswer, schemaChange, TABLE_LOCKED } from '#lib/http/schema-changes';
import { columnName, identifier, inSchema, queryBoolean, schemaRef, tableName } from '#lib/validation';

/**
 * Schema changes beyond columns and indexes, as the schema's role: a table's constraints (list,
 * add, drop), changes to the table itself (rename, comment, primary key), enum types (list,
 * create, add a value); and the schema's views with their definitions, materialized ones refreshed.
 */

const TablePath = z.object({ tableName });
const columnList = z.array(columnName).min(1).max(32);
const fkAction = z.enum(FK_ACTIONS, { message: `expected one of ${FK_ACTIONS.join(', ')}` });

const NO_VIEW: Answer = { status: 404, why: 'the schema has no materialized view of that name' };
const NO_TYPE: Answer = { status: 404, why: 'the schema has no enum type of that name' };
const enumValue = z
  .string()
  .min(1, 'an enum value is not empty')
  .max(ENUM_VALUE_MAX_BYTES)
  .meta({ description: `a label, any text of 1 to ${ENUM_VALUE_MAX_BYTES} bytes` });

const EnumType = z.object({
  name: z.string(),
  values: z.array(z.string()).meta({ description: 'in their sort order' }),
  comment: z.string().nullable(),
});

const View = z.object({
  name: z.string(),
  materialized: z.boolean(),
  populated: z.boolean().meta({ description: 'false: a materialized view not yet refreshed' }),
  columns: z.array(z.object({ name: z.string(), type: z.string() })),
  comment: z.string().nullable(),
  definition: z.string().nullable().meta({
    description:
      'the SELECT as pg_get_viewdef prints it; null while another session holds a table the view reads in ACCESS EXCLUSIVE',
  }),
});

const NO_CONSTRAINT: Answer = { status: 404, why: 'the table, or the constraint on it, does not exist' };

const Constraint = z.object({
  name: z.string(),
  type: z.enum(CONSTRAINT_TYPES),
  columns: z.array(z.string()),
  definition: z.string().nullable().meta({
    description:
      'as pg_get_constraintdef prints it; null for a check or exclusion while another session holds the table in ACCESS EXCLUSIVE',
  }),
  validated: z.boolean().meta({ description: 'false for a foreign key or check added NOT VALID' }),
  references: z
    .object({ schema: z.string(), table: z.string(), columns: z.array(z.string()) })
    .nullable()
    .meta({ description: 'for a foreign key, the referenced table and columns' }),
  onDelete: fkAction.nullable(),
  onUpdate: fkAction.nullable(),
});

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/table/{tableName}/constraints',
    summary: 'The table’s constraints: primary key, unique, check, foreign key, exclusion',
    access: 'read',
    params: TablePath,
    query: z.strictObject({ schema: inSchema }),
    response: z.object({ schema: z.string(), table: z.string(), constraints: z.array(Constraint) }),
    errors: [...SCHEMA_SESSION, NO_TABLE, SCHEMA_BUSY],
    handler: async ({ params, query, accessTo }) =>
      listConstraints(await accessTo(query.schema), params.tableName),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/constraints',
    addsData: true,
    audit: { action: 'constraint.add', target: ({ params }) => `table ${params.tableName}` },
    summary:
      'Add a foreign key, unique or check constraint, as the schema’s role; dryRun shows the SQL, the locks on each table and whether it scans',
    access: 'write',
    permission: 'alter',
    params: TablePath,
    body: z.strictObject({
      schema: inSchema,
      dryRun: z.boolean().default(false),
      name: identifier('constraint name').optional(),
      type: z.enum(['foreign key', 'unique', 'check'], {
        message: 'type must be foreign key, unique or check',
      }),
      columns: columnList.optional(),
      references: z
        .strictObject({
          schema: schemaRef.optional().meta({ description: 'default: the table’s schema' }),
          table: tableName,
          columns: columnList.optional().meta({ description: 'default: its primary key' }),
        })
        .optional(),
      onDelete: fkAction.optional(),
      onUpdate: fkAction.optional(),
      check: z.string().min(1).max(10_000).optional().meta({
        description: 'an SQL expression over the row, run as the schema’s role',
      }),
      notValid: z.boolean().optional().meta({
        description: 'a foreign key or check that existing rows are not checked against (no scan)',
      }),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_TABLE, TABLE_LOCKED],
    handler: async ({ params, body, principal, accessTo }) => {
      const { dryRun, ...input } = body;
      return schemaChange({ principal, accessTo, schema: body.schema, dryRun }, (catalog) =>
        planAddConstraint(catalog, { ...input, table: params.tableName }),
      );
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/table/{tableName}/constraints/{constraintName}',
    audit: {
      action: 'constraint.drop',
      target: ({ params }) => `constraint ${params.tableName}.${params.constraintName}`,
    },
    summary:
      'Drop a constraint (cascade=true also drops what depends on it); dryRun shows the SQL and its locks',
    access: 'write',
    permission: 'alter',
    params: z.object({ tableName, constraintName: identifier('constraint name') }),
    query: z.strictObject({
      schema: inSchema,
      cascade: queryBoolean.default(false),
      dryRun: queryBoolean.default(false),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_CONSTRAINT, TABLE_LOCKED],
    handler: async ({ params, query, principal, accessTo }) =>
      schemaChange({ principal, accessTo, schema: query.schema, dryRun: query.dryRun }, (catalog) =>
        planDropConstraint(catalog, {
          schema: query.schema,
          table: params.tableName,
          constraint: params.constraintName,
          cascade: query.cascade,
        }),
      ),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/table/{tableName}',
    addsData: true,
    audit: { action: 'table.change', target: ({ params }) => `table ${params.tableName}` },
    summary:
      'Change a table: rename, comment, primary key; dryRun shows the SQL, its lock and whether it scans the table',
    access: 'write',
    permission: 'alter',
    params: TablePath,
    body: z.strictObject({
      schema: inSchema,
      dryRun: z.boolean().default(false),
      rename: tableName.optional(),
      comment: z.string().max(10_000).nullable().optional(),
      primaryKey: columnList.optional().meta({
        description: 'the new primary key’s columns: the old key is dropped and this one added at once',
      }),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_TABLE, TABLE_LOCKED],
    handler: async ({ params, body, principal, accessTo }) => {
      const { dryRun, ...input } = body;
      return schemaChange({ principal, accessTo, schema: body.schema, dryRun }, (catalog) =>
        planTableChange(catalog, { ...input, table: params.tableName }),
      );
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/types',
    summary: 'The schema’s enum types with their values in order',
    access: 'read',
    query: z.strictObject({ schema: inSchema }),
    response: z.object({ schema: z.string(), types: z.array(EnumType) }),
    errors: [NO_SCHEMA],
    handler: async ({ query }) => listEnums(await getDatabase(), query.schema),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/functions',
    summary: `The schema’s functions and procedures: name, arguments, result (the first ${ROUTINES_LISTED} by name)`,
    access: 'read',
    query: z.strictObject({ schema: inSchema }),
    response: z.object({
      schema: z.string(),
      functions: z.array(
        z.object({
          name: z.string(),
          arguments: z.string().meta({ description: 'as PostgreSQL prints them, with defaults' }),
          result: z.string().nullable().meta({ description: 'the result type; null for a procedure' }),
          kind: z.enum(['function', 'procedure', 'aggregate', 'window']),
        }),
      ),
    }),
    errors: [NO_SCHEMA],
    handler: async ({ query }) => listRoutines(await getDatabase(), query.schema),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/types',
    audit: { action: 'type.create', target: ({ body }) => `type ${body.name}` },
    summary: 'Create an enum type, as the schema’s role; dryRun shows the SQL',
    access: 'write',
    permission: 'alter',
    body: z.strictObject({
      schema: inSchema,
      dryRun: z.boolean().default(false),
      name: identifier('type name'),
      values: z.array(enumValue).min(1, 'values must list at least 1 value').max(1000),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION],
    handler: async ({ body, principal, accessTo }) =>
      schemaChange({ principal, accessTo, schema: body.schema, dryRun: body.dryRun }, (catalog) =>
        planCreateEnum(catalog, body),
      ),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/types/{typeName}/values',
    audit: { action: 'type.add_value', target: ({ params }) => `type ${params.typeName}` },
    summary:
      'Add a value to an enum type (last, or before or after a value), as the schema’s role; locks no table',
    access: 'write',
    permission: 'alter',
    params: z.object({ typeName: identifier('type name') }),
    body: z.strictObject({
      schema: inSchema,
      dryRun: z.boolean().default(false),
      value: enumValue,
      before: enumValue.optional().meta({ description: 'an existing value the new one sorts before' }),
      after: enumValue.optional().meta({ description: 'an existing value the new one sorts after' }),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_TYPE],
    handler: async ({ params, body, principal, accessTo }) =>
      schemaChange({ principal, accessTo, schema: body.schema, dryRun: body.dryRun }, (catalog) =>
        planAddEnumValue(catalog, { ...body, type: params.typeName }),
      ),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/views',
    summary: 'The schema’s views and materialized views with their definitions',
    access: 'read',
    query: z.strictObject({ schema: inSchema }),
    response: z.object({
      schema: z.string(),
      definitionsRead: z.boolean().meta({
        description:
          'false: another session holds a table the views read locked, and definitions are null rather than waited for',
      }),
      views: z.array(View),
    }),
    errors: [...SCHEMA_SESSION, SCHEMA_BUSY],
    handler: async ({ query, accessTo }) => listViews(await accessTo(query.schema)),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/view/{viewName}/refresh',
    // A refill can grow the schema: refused while it is over its storage quota.
    addsData: true,
    audit: { action: 'view.refresh', target: ({ params }) => `materialized view ${params.viewName}` },
    summary: 'Refill a materialized view from its query, concurrently where it has a unique index',
    access: 'write',
    params: z.object({ viewName: tableName }),
    body: z.strictObject({
      schema: inSchema,
      concurrently: z.boolean().optional().meta({
        description:
          'true: readers keep the old rows until the new ones are in (needs a unique index and rows already), else 400; false: lock the view and refill it; left out: concurrently where the view allows it',
      }),
    }),
    response: z.object({ success: z.boolean(), concurrently: z.boolean(), message: z.string() }),
    errors: [...SCHEMA_SESSION, NO_VIEW, SCHEMA_BUSY],
    handler: async ({ params, body, accessTo }) =>
      refreshView(await accessTo(body.schema), {
        schema: body.schema,
        view: params.viewName,
        concurrently: body.concurrently,
      }),
  }),
];

export const handler = httpHandler(routes);
