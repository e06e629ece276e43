import { z } from 'zod';
import {
  CONSTRAINT_TYPES,
  FK_ACTIONS,
  listConstraints,
  planAddConstraint,
  planDropConstraint,
} from '#lib/admin/constraints';
import { runChange } from '#lib/admin/schema-change';
import { planTableChange } from '#lib/admin/table-changes';
import { schemaAccess } from '#lib/db/executor';
import { getDatabase } from '#lib/db/pool';
import { type Answer, NO_TABLE, SCHEMA_BUSY, SCHEMA_SESSION } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { changeOptions, SchemaChangeAnswer, TABLE_LOCKED } from '#lib/http/schema-changes';
import { columnName, identifier, inSchema, queryBoolean, schemaRef, tableName } from '#lib/validation';

/** A table's constraints (list, add, drop) and changes to the table itself: rename, comment, primary key. */

const TablePath = z.object({ tableName });
const columnList = z.array(columnName).min(1).max(32);
const fkAction = z.enum(FK_ACTIONS, { message: `expected one of ${FK_ACTIONS.join(', ')}` });

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
    handler: async ({ params, query, principal, signal }) =>
      listConstraints(await schemaAccess(principal, query.schema, signal), params.tableName),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/constraints',
    summary:
      'Add a foreign key, unique or check constraint, as the schema’s role; dryRun shows the SQL, the locks on each table and whether it scans',
    access: 'write',
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
    handler: async ({ params, body, principal, signal }) => {
      const { dryRun, ...input } = body;
      return runChange(
        await schemaAccess(principal, body.schema, signal),
        await planAddConstraint(await getDatabase(), { ...input, table: params.tableName }),
        await changeOptions(dryRun, principal),
      );
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/table/{tableName}/constraints/{constraintName}',
    summary:
      'Drop a constraint (cascade=true also drops what depends on it); dryRun shows the SQL and its locks',
    access: 'write',
    params: z.object({ tableName, constraintName: identifier('constraint name') }),
    query: z.strictObject({
      schema: inSchema,
      cascade: queryBoolean.default(false),
      dryRun: queryBoolean.default(false),
    }),
    response: SchemaChangeAnswer,
    errors: [...SCHEMA_SESSION, NO_CONSTRAINT, TABLE_LOCKED],
    handler: async ({ params, query, principal, signal }) =>
      runChange(
        await schemaAccess(principal, query.schema, signal),
        await planDropConstraint(await getDatabase(), {
          schema: query.schema,
          table: params.tableName,
          constraint: params.constraintName,
          cascade: query.cascade,
        }),
        await changeOptions(query.dryRun, principal),
      ),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/table/{tableName}',
    summary:
      'Change a table: rename, comment, primary key; dryRun shows the SQL, its lock and whether it scans the table',
    access: 'write',
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
    handler: async ({ params, body, principal, signal }) => {
      const { dryRun, ...input } = body;
      return runChange(
        await schemaAccess(principal, body.schema, signal),
        await planTableChange(await getDatabase(), { ...input, table: params.tableName }),
        await changeOptions(dryRun, principal),
      );
    },
  }),
];

export const handler = httpHandler(routes);
