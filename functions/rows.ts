import { z } from 'zod';
import { deleteRow, deleteRows, insertRow, updateRow } from '#lib/admin/rows';
import { getDatabase } from '#lib/db/pool';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { columnName, inSchema, tableName } from '#lib/validation';

const Row = z.record(z.string(), z.unknown());
const rowId = z.string().min(1).max(1000);

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/row',
    summary: 'Insert a row; answers the stored row, defaults filled in',
    access: 'admin',
    params: z.object({ tableName }),
    body: z.strictObject({ data: z.record(columnName, z.unknown()), schema: inSchema }),
    response: z.object({ success: z.boolean(), row: Row, message: z.string() }),
    status: 201,
    handler: async ({ params, body }) =>
      insertRow(await getDatabase(), { schema: body.schema, table: params.tableName, data: body.data }),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/table/{tableName}/{rowId}',
    summary: 'Set one column of the row whose single-column primary key is rowId',
    access: 'admin',
    params: z.object({ tableName, rowId }),
    body: z.strictObject({ column: columnName, value: z.unknown(), schema: inSchema }),
    response: z.object({ row: Row }),
    handler: async ({ params, body }) =>
      updateRow(await getDatabase(), {
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
    access: 'admin',
    params: z.object({ tableName, rowId }),
    query: z.strictObject({ schema: inSchema }),
    response: z.object({ success: z.boolean(), message: z.string() }),
    handler: async ({ params, query }) =>
      deleteRow(await getDatabase(), { schema: query.schema, table: params.tableName, rowId: params.rowId }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/rows/delete',
    summary: 'Delete the rows whose primary keys are listed',
    access: 'admin',
    params: z.object({ tableName }),
    body: z.strictObject({
      rowIds: z
        .array(z.union([z.string().min(1).max(1000), z.number()]))
        .min(1, 'rowIds must list at least one id')
        .max(10_000, 'rowIds may list at most 10000 ids'),
      schema: inSchema,
    }),
    response: z.object({ success: z.boolean(), deletedCount: z.number(), message: z.string() }),
    handler: async ({ params, body }) =>
      deleteRows(await getDatabase(), { schema: body.schema, table: params.tableName, rowIds: body.rowIds }),
  }),
];

export const handler = httpHandler(routes);
