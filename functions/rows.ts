import { z } from 'zod';
import { insertRows, MAX_BULK_ROWS, MAX_BULK_VALUES } from '#lib/admin/bulk-rows';
import { deleteRows, updateRows } from '#lib/admin/matching-rows';
import { deleteRow, insertRow, updateRow } from '#lib/admin/rows';
import { getConfig, resultLimits } from '#lib/config';
import { BadRequest } from '#lib/errors';
import {
  type Answer,
  MAX_AFFECTED,
  NO_TABLE,
  RESULT_LIMITS,
  SCHEMA_SESSION,
  WIRE_LIMIT,
} from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import {
  columnName,
  inSchema,
  Outcome,
  queryBoolean,
  queryInt,
  Row,
  rowFilterQuery,
  tableName,
} from '#lib/validation';

const rowId = z.string().min(1).max(1000);
const NO_ROW: Answer = { status: 404, why: 'no row has this primary key' };

/** Changes to every row a filter finds: which rows, and the caller's guards. */
const RowChangeQuery = {
  ...rowFilterQuery,
  all: queryBoolean.optional().meta({
    description: 'true: change every row of the table when no filter says which (without it, that is a 400)',
  }),
  maxAffected: queryInt('maxAffected', 0, 1_000_000_000)
    .optional()
    .meta({ description: 'more rows would change: 409 naming how many, and nothing is changed' }),
};

const Updated = z.object({
  rows: z.array(Row).optional().meta({
    description: 'The rows changed, as stored, in primary-key order; left out with return=minimal.',
  }),
  count: z.number().meta({ description: 'How many rows changed.' }),
});

/**
 * PATCH .../rows shares its path with SPEC's PATCH .../{rowId} for a row whose key is "rows": a
 * body of SPEC's shape ({column, value}) is that single-row update, so SPEC's route keeps working
 * for every key. `set` says it is the filtered update.
 */
const PatchRowsBody = z
  .strictObject({
    set: z
      .record(columnName, z.unknown())
      .refine((set) => Object.keys(set).length > 0, 'set must name at least one column')
      .optional()
      .meta({ description: 'Column to value, set on every matching row.' }),
    schema: inSchema,
    column: columnName.optional().meta({
      description:
        'SPEC’s single-row update of the row whose primary key is "rows" (PATCH /api/table/{tableName}/{rowId}): column and value instead of set, and no query.',
    }),
    value: z.unknown().optional(),
  })
  .superRefine((body, context) => {
    if (body.set === undefined && body.column === undefined) {
      context.addIssue({
        code: 'custom',
        message: 'set is required: the columns to change on every matching row',
      });
    }
    if (body.set !== undefined && (body.column !== undefined || body.value !== undefined)) {
      context.addIssue({
        code: 'custom',
        message: 'send set alone (column and value are SPEC’s update of the row whose key is "rows")',
      });
    }
  });

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/row',
    idempotent: true,
    addsData: true,
    audit: { action: 'row.insert', target: ({ params }) => `table ${params.tableName}` },
    summary: 'Insert a row; answers the stored row, defaults filled in',
    access: 'write',
    params: z.object({ tableName }),
    body: z.strictObject({ data: z.record(columnName, z.unknown()), schema: inSchema }),
    response: z.object({ success: z.boolean(), row: Row, message: z.string() }),
    status: 201,
    errors: [...SCHEMA_SESSION, NO_TABLE, WIRE_LIMIT, RESULT_LIMITS],
    handler: async ({ params, body, accessTo }) =>
      insertRow(await accessTo(body.schema), resultLimits(await getConfig()), {
        schema: body.schema,
        table: params.tableName,
        data: body.data,
      }),
  }),
  // Before PATCH .../{rowId}: the router tries parameter routes in order, and {rowId} takes "rows".
  defineRoute({
    method: 'PATCH',
    path: '/api/table/{tableName}/rows',
    addsData: true,
    audit: { action: 'rows.update', target: ({ params }) => `table ${params.tableName}` },
    summary:
      'Set columns on every row the filter finds, in one statement, all or nothing; maxAffected guards how many',
    access: 'write',
    params: z.object({ tableName }),
    query: z.strictObject({
      ...RowChangeQuery,
      return: z.enum(['representation', 'minimal']).optional().meta({
        description: 'minimal: answer the count alone, for changes too big to answer under the result limits',
      }),
    }),
    body: PatchRowsBody,
    response: z.union([
      Updated,
      z.object({ row: Row }).meta({ description: 'SPEC’s answer, for column and value' }),
    ]),
    errors: [...SCHEMA_SESSION, NO_TABLE, NO_ROW, MAX_AFFECTED, WIRE_LIMIT, RESULT_LIMITS],
    handler: async ({ params, query, body, accessTo }) => {
      const { all, maxAffected, return: answer, ...where } = query;
      if (body.column !== undefined && Object.values(query).some((value) => value !== undefined)) {
        throw new BadRequest(
          'Invalid input',
          'column and value update the single row whose key is "rows" and take no query; send set to change the rows a filter finds',
        );
      }
      const access = await accessTo(body.schema);
      const limits = resultLimits(await getConfig());
      if (body.column !== undefined) {
        const row = { rowId: 'rows', column: body.column, value: body.value };
        return updateRow(access, limits, { schema: body.schema, table: params.tableName, ...row });
      }
      return updateRows(access, limits, {
        schema: body.schema,
        table: params.tableName,
        set: body.set ?? {},
        where,
        all,
        maxAffected,
        returnRows: answer !== 'minimal',
      });
    },
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/table/{tableName}/{rowId}',
    addsData: true,
    audit: { action: 'row.update', target: ({ params }) => `table ${params.tableName}` },
    summary: 'Set one column of the row whose single-column primary key is rowId',
    access: 'write',
    params: z.object({ tableName, rowId }),
    body: z.strictObject({ column: columnName, value: z.unknown(), schema: inSchema }),
    response: z.object({ row: Row }),
    errors: [...SCHEMA_SESSION, NO_TABLE, NO_ROW, WIRE_LIMIT, RESULT_LIMITS],
    handler: async ({ params, body, accessTo }) =>
      updateRow(await accessTo(body.schema), resultLimits(await getConfig()), {
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
    audit: { action: 'row.delete', target: ({ params }) => `table ${params.tableName}` },
    summary: 'Delete the row whose single-column primary key is rowId',
    access: 'write',
    params: z.object({ tableName, rowId }),
    query: z.strictObject({ schema: inSchema }),
    response: Outcome,
    errors: [...SCHEMA_SESSION, NO_TABLE, NO_ROW, WIRE_LIMIT],
    handler: async ({ params, query, accessTo }) =>
      deleteRow(await accessTo(query.schema), {
        schema: query.schema,
        table: params.tableName,
        rowId: params.rowId,
      }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/rows',
    idempotent: true,
    addsData: true,
    audit: { action: 'rows.insert', target: ({ params }) => `table ${params.tableName}` },
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
    handler: async ({ params, body, accessTo }) =>
      insertRows(await accessTo(body.schema), resultLimits(await getConfig()), {
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
    audit: { action: 'rows.delete', target: ({ params }) => `table ${params.tableName}` },
    summary:
      'Delete the rows whose primary keys are listed, the rows a filter finds, or those that are both; all or nothing',
    access: 'write',
    params: z.object({ tableName }),
    query: z.strictObject(RowChangeQuery),
    body: z.strictObject({
      rowIds: z
        .array(z.union([z.string().min(1).max(1000), z.number()]))
        .min(1, 'rowIds must list at least one id')
        .max(10_000, 'rowIds may list at most 10000 ids')
        .optional()
        .meta({
          description: 'Single-column primary keys; required unless a filter (or all=true) says which rows.',
        }),
      schema: inSchema,
    }),
    response: z.object({ success: z.boolean(), deletedCount: z.number(), message: z.string() }),
    errors: [...SCHEMA_SESSION, NO_TABLE, MAX_AFFECTED, WIRE_LIMIT],
    handler: async ({ params, query, body, accessTo }) => {
      const { all, maxAffected, ...where } = query;
      return deleteRows(await accessTo(body.schema), {
        schema: body.schema,
        table: params.tableName,
        rowIds: body.rowIds,
        where,
        all,
        maxAffected,
      });
    },
  }),
];

export const handler = httpHandler(routes);
