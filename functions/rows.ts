import { z } from 'zod';
import { insertRows, MAX_BULK_ROWS, MAX_BULK_VALUES } from '#lib/admin/bulk-rows';
import { deleteRow, deleteRows, insertRow, updateRow } from '#lib/admin/rows';
import { getConfig, resultLimits } from '#lib/config';
import { schemaAccess } from '#lib/db/executor';
import { type Answer, NO_TABLE, RESULT_LIMITS, SCHEMA_SESSION, WIRE_LIMIT } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { columnName, inSchema, Outcome, Row, tableName } from '#lib/validation';

const rowId = z.string().min(1).max(1000);
const NO_ROW: Answer = { status: 404, why: 'no row has this primary key' };

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/row',
    summary: 'Insert a row; answers the stored row, defaults filled in',
    access: 'write',
    params: z.object({ tableName }),
    body: z.strictObject({ data: z.record(columnName, z.unknown()), schema: inSchema }),
    response: z.object({ success: z.boolean(), row: Row, message: z.string() }),
    status: 201,
    errors: [...SCHEMA_SESSION, NO_TABLE, WIRE_LIMIT, RESULT_LIMITS],
    handler: async ({ params, body, principal, signal }) =>
      insertRow(await schemaAccess(principal, body.schema, signal), resultLimits(await getConfig()), {
        schema: body.schema,
        table: params.tableName,
        data: body.data,
      }),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/table/{tableName}/{rowId}',
    summary: 'Set one column of the row whose single-column primary key is rowId',
    access: 'write',
    params: z.object({ tableName, rowId }),
    body: z.strictObject({ column: columnName, value: z.unknown(), schema: inSchema }),
    response: z.object({ row: Row }),
    errors: [...SCHEMA_SESSION, NO_TABLE, NO_ROW, WIRE_LIMIT, RESULT_LIMITS],
    handler: async ({ params, body, principal, signal }) =>
      updateRow(await schemaAccess(principal, body.schema, signal), resultLimits(await getConfig()), {
        schema: body.schema,
        table: params.tableName,
        rowId: params.rowId,
        column: body.column,
        value: body.value,
      }),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/table/{tableName}/row/{rowId}',
    summary: 'Delete the row whose single-column primary key is rowId',
    access: 'write',
    params: z.object({ tableName, rowId }),
    query: z.strictObject({ schema: inSchema }),
    response: Outcome,
    errors: [...SCHEMA_SESSION, NO_TABLE, NO_ROW, WIRE_LIMIT],
    handler: async ({ params, query, principal, signal }) =>
      deleteRow(await schemaAccess(principal, query.schema, signal), {
        schema: query.schema,
        table: params.tableName,
        rowId: params.rowId,
      }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/rows',
    summary:
      'Insert many rows in one statement, all or nothing; with onConflict an upsert; answers the rows written',
    access: 'write',
    params: z.object({ tableName }),
    body: z.strictObject({
      rows: z
        .array(z.record(columnName, z.unknown()))
        .min(1, 'rows must hold at least one row')
        .max(MAX_BULK_ROWS, `rows may hold at most ${MAX_BULK_ROWS} rows`)
        .meta({
          description: `Column to value, per row; rows may name different columns (a cell left out takes the column's default). At most ${MAX_BULK_ROWS} rows and ${MAX_BULK_VALUES} values.`,
        }),
      schema: inSchema,
      onConflict: z.enum(['update', 'ignore']).optional().meta({
        description:
          'Upsert: on a row that conflicts, "update" sets the columns the rows name (outside the conflict target) to the row\'s values; every row must then name the same columns. "ignore" skips it.',
      }),
      conflictColumns: z
        .array(columnName)
        .min(1)
        .max(32)
        .optional()
        .meta({ description: 'The columns of a unique constraint or index; default: the primary key.' }),
    }),
    response: z.object({
      rows: z
        .array(Row)
        .meta({ description: 'The rows written, as stored; with "ignore" only those inserted.' }),
      count: z.number(),
    }),
    status: 201,
    errors: [...SCHEMA_SESSION, NO_TABLE, WIRE_LIMIT, RESULT_LIMITS],
    handler: async ({ params, body, principal, signal }) =>
      insertRows(await schemaAccess(principal, body.schema, signal), resultLimits(await getConfig()), {
        schema: body.schema,
        table: params.tableName,
        rows: body.rows,
        onConflict: body.onConflict,
        conflictColumns: body.conflictColumns,
      }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/rows/delete',
    summary: 'Delete the rows whose primary keys are listed',
    access: 'write',
    params: z.object({ tableName }),
    body: z.strictObject({
      rowIds: z
        .array(z.union([z.string().min(1).max(1000), z.number()]))
        .min(1, 'rowIds must list at least one id')
        .max(10_000, 'rowIds may list at most 10000 ids'),
      schema: inSchema,
    }),
    response: z.object({ success: z.boolean(), deletedCount: z.number(), message: z.string() }),
    errors: [...SCHEMA_SESSION, NO_TABLE, WIRE_LIMIT],
    handler: async ({ params, body, principal, signal }) =>
      deleteRows(await schemaAccess(principal, body.schema, signal), {
        schema: body.schema,
        table: params.tableName,
        rowIds: body.rowIds,
      }),
  }),
];

export const handler = httpHandler(routes);
