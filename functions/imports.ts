import { z } from 'zod';
import { type ImportOptions, importRows } from '#lib/admin/import';
import {
  CSV_DEFAULTS,
  checkCsvOptions,
  FORMAT_OF_TYPE,
  IMPORT_FORMATS,
  IMPORT_MODES,
} from '#lib/admin/import-format';
import { inferColumns, SAMPLE_ROWS } from '#lib/admin/import-infer';
import {
  abandonImport,
  commitImport,
  importLimits,
  importStatus,
  MAX_PART_BYTES,
  MAX_PARTS,
  openImport,
  putPart,
  type SessionScope,
} from '#lib/admin/import-sessions';
import { getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { type Answer, NO_TABLE, SCHEMA_SESSION } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute, type RouteInput } from '#lib/http/route';
import { columnName, inSchema, queryBoolean, queryInt, tableName } from '#lib/validation';

/**
 * Bringing a file's rows into a table: in one request (up to 5 MiB), or opened, sent in parts and
 * committed (lib/admin/import-sessions). CSV, a JSON array or NDJSON; insert, upsert or replace;
 * all or nothing, as the schema's role.
 */

const TablePath = z.object({ tableName });
const ImportPath = z.object({
  tableName,
  importId: z.uuid('an import id is a UUID, as POST .../imports answered'),
});

const FILE_TYPES = Object.keys(FORMAT_OF_TYPE);
const mode = z
  .enum(IMPORT_MODES, { message: `mode must be one of ${IMPORT_MODES.join(', ')}` })
  .default('insert')
  .meta({
    description:
      'insert adds the rows; upsert updates the rows whose primary key is in the file and adds the others; replace deletes every row first',
  });
const csvChar = (what: string, fallback: string) =>
  z
    .string()
    .default(fallback)
    .meta({
      description: `CSV: the ${what}, one single-byte character; default ${JSON.stringify(fallback)}`,
    });

/** The options of a file, as query parameters (one request) or in the JSON body (an import in parts). */
const fileOptions = {
  mode,
  delimiter: csvChar('field delimiter', CSV_DEFAULTS.delimiter),
  quote: csvChar('quote', CSV_DEFAULTS.quote),
  null: z
    .string()
    .default('')
    .meta({ description: 'CSV: the text of an unquoted field that means NULL; default empty' }),
};

const columnsList = z
  .string()
  .max(20_000)
  .transform((list) => list.split(',').map((name) => name.trim()))
  .pipe(z.array(columnName).min(1).max(1600))
  .optional()
  .meta({
    description:
      'the table’s columns in the file’s order (CSV), or the keys taken (JSON), comma-separated; default: the header, or the keys of the rows in the first part',
    example: 'id,name,email',
  });

const Outcome = z.object({
  success: z.literal(true),
  message: z.string(),
  rows: z.number().meta({ description: 'rows written (upsert: inserted or updated)' }),
  mode: z.enum(IMPORT_MODES),
});

const NO_IMPORT: Answer = {
  status: 404,
  why: 'no such import of the caller’s on this table (committed long ago, abandoned or expired)',
};
const IMPORT_STATE: Answer = {
  status: 409,
  why: 'the import is being committed (its transaction still runs), was committed, code the table runs marked it committed in the commit’s transaction first (nothing written), or the schema has 8 imports open already',
};
const BAD_FILE: Answer = {
  status: 400,
  why: 'a value the column refuses (the message names the line or row, the column and PostgreSQL’s reason; nothing is written), a column the table lacks, an empty file',
};

function options(input: {
  format: ImportOptions['format'];
  mode: ImportOptions['mode'];
  header?: boolean | undefined;
  delimiter: string;
  quote: string;
  null: string;
  columns?: string[] | undefined;
}): ImportOptions {
  const csv = checkCsvOptions({
    delimiter: input.delimiter,
    quote: input.quote,
    null: input.null,
    header: input.header ?? true,
  });
  return { format: input.format, mode: input.mode, csv, columns: input.columns };
}

/** The settings an import lives by. */
const limits = async () => importLimits(await getConfig());

const scope = (
  schema: string,
  table: string,
  { principal, audit }: Pick<RouteInput<unknown, unknown, unknown>, 'principal' | 'audit'>,
): SessionScope => ({ schema, table, principal, audit });

async function* once(bytes: Buffer) {
  yield bytes;
}

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/import',
    addsData: true,
    audit: { action: 'import.run', target: ({ params }) => `table ${params.tableName}` },
    summary: `Import a file of at most ${MAX_PART_BYTES} bytes (CSV, a JSON array, NDJSON: by its Content-Type) into the table, all or nothing`,
    access: 'write',
    params: TablePath,
    query: z.strictObject({
      schema: inSchema,
      ...fileOptions,
      header: queryBoolean.default(true).meta({ description: 'CSV: the first line names the columns' }),
      columns: columnsList,
    }),
    upload: {
      types: FILE_TYPES,
      maxBytes: MAX_PART_BYTES,
      tooLarge: ': send a larger file in parts (POST /api/table/{tableName}/imports)',
    },
    response: Outcome,
    errors: [...SCHEMA_SESSION, NO_TABLE, BAD_FILE],
    handler: async ({ params, query, upload, accessTo }) => {
      const file = upload as NonNullable<typeof upload>;
      const format = FORMAT_OF_TYPE[file.contentType] ?? 'csv';
      return importRows(
        await accessTo(query.schema),
        params.tableName,
        options({ ...query, format }),
        once(file.bytes),
      );
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/import/columns',
    audit: false,
    summary: `New table from a file: the columns the start of a file suggests (names, the narrowest types its first ${SAMPLE_ROWS} rows fit, nullability, a key), to correct before POST /api/table/create`,
    access: 'write',
    query: z.strictObject({
      delimiter: fileOptions.delimiter,
      quote: fileOptions.quote,
      null: fileOptions.null,
      header: queryBoolean.default(true).meta({ description: 'CSV: the first line names the columns' }),
    }),
    upload: {
      types: FILE_TYPES,
      maxBytes: MAX_PART_BYTES,
      tooLarge: ': send the start of the file only (its first rows are enough)',
    },
    response: z.object({
      columns: z.array(
        z.object({
          source: z.string().meta({ description: 'as the file names it' }),
          name: z
            .string()
            .meta({ description: 'a name PostgreSQL takes unquoted; the import maps the source to it' }),
          type: z.string(),
          nullable: z.boolean(),
          primaryKey: z.boolean(),
        }),
      ),
      rows: z.array(z.array(z.unknown())).meta({ description: 'the first 10 rows, by column' }),
      sampled: z.number().meta({ description: 'rows the types were inferred from' }),
    }),
    errors: [
      { status: 400, why: 'a sample with no column, or that is not CSV, JSON or NDJSON as its type says' },
    ],
    handler: async ({ query, upload }) => {
      const file = upload as NonNullable<typeof upload>;
      const format = FORMAT_OF_TYPE[file.contentType] ?? 'csv';
      const csv = checkCsvOptions({ ...query });
      return inferColumns(format, file.bytes.toString('utf8'), csv);
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/imports',
    addsData: true,
    audit: { action: 'import.open', target: ({ params }) => `table ${params.tableName}` },
    summary: `Open an import sent in parts of at most ${MAX_PART_BYTES} bytes; it expires after IMPORT_SESSION_TTL_SECONDS without a part`,
    access: 'write',
    params: TablePath,
    body: z.strictObject({
      schema: inSchema,
      format: z.enum(IMPORT_FORMATS, { message: `format must be one of ${IMPORT_FORMATS.join(', ')}` }),
      ...fileOptions,
      header: z.boolean().default(true).meta({ description: 'CSV: the first line names the columns' }),
      columns: z.array(columnName).min(1).max(1600).optional(),
    }),
    response: z.object({
      id: z.string(),
      table: z.string(),
      format: z.enum(IMPORT_FORMATS),
      mode: z.enum(IMPORT_MODES),
      maxPartBytes: z.number(),
      expiresAt: z.string(),
    }),
    status: 201,
    errors: [NO_TABLE, IMPORT_STATE],
    handler: async ({ params, body, ...request }) =>
      openImport(
        await getDatabase(),
        scope(body.schema, params.tableName, request),
        options(body),
        await limits(),
      ),
  }),
  defineRoute({
    method: 'PUT',
    path: '/api/table/{tableName}/imports/{importId}/parts/{part}',
    addsData: true,
    audit: { action: 'import.part', target: ({ params }) => `import ${params.importId} part ${params.part}` },
    summary: 'Send part n of an import (from 1); sent again, a part replaces itself; any order',
    access: 'write',
    params: ImportPath.extend({ part: queryInt('part', 1, MAX_PARTS) }),
    query: z.strictObject({ schema: inSchema }),
    upload: {
      types: [...FILE_TYPES, 'application/octet-stream'],
      maxBytes: MAX_PART_BYTES,
      tooLarge: ': split the file into more parts',
    },
    response: z.object({
      part: z.number(),
      bytes: z.number(),
      parts: z.number().meta({ description: 'parts received so far' }),
      totalBytes: z.number(),
    }),
    errors: [NO_IMPORT, IMPORT_STATE],
    handler: async ({ params, query, upload, ...request }) =>
      putPart(
        await getDatabase(),
        params.importId,
        scope(query.schema, params.tableName, request),
        params.part,
        (upload as NonNullable<typeof upload>).bytes,
        await limits(),
      ),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/table/{tableName}/imports/{importId}',
    summary:
      'An import’s state: the parts received, their bytes, when it expires, its outcome once committed; a commit whose process died is settled by its transaction: committed, or open again with nothing written',
    access: 'write',
    params: ImportPath,
    query: z.strictObject({ schema: inSchema }),
    response: z.object({
      id: z.string(),
      table: z.string(),
      state: z.enum(['open', 'committing', 'committed']),
      format: z.enum(IMPORT_FORMATS),
      mode: z.enum(IMPORT_MODES),
      parts: z.array(z.object({ part: z.number(), bytes: z.number() })),
      totalBytes: z.number(),
      expiresAt: z.string(),
      outcome: Outcome.optional(),
      message: z.string().optional().meta({
        description:
          'when the import is open again because its last commit was interrupted (its transaction ended without committing): nothing was written, the parts are kept, commit again',
      }),
    }),
    errors: [NO_IMPORT],
    handler: async ({ params, query, ...request }) =>
      importStatus(
        await getDatabase(),
        params.importId,
        scope(query.schema, params.tableName, request),
        await limits(),
      ),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/table/{tableName}/imports/{importId}/commit',
    idempotent: true,
    addsData: true,
    audit: {
      action: 'import.commit',
      target: ({ params }) => `table ${params.tableName}, import ${params.importId}`,
    },
    summary:
      'Write an import’s parts 1..parts in order, all or nothing; sent again after it succeeded, answers the same; interrupted (its process killed), it wrote nothing and may be sent again',
    access: 'write',
    params: ImportPath,
    body: z.strictObject({
      schema: inSchema,
      parts: z
        .number()
        .int()
        .min(1)
        .max(MAX_PARTS)
        .meta({ description: 'how many parts were sent: a missing one is a 400' }),
    }),
    response: Outcome,
    errors: [...SCHEMA_SESSION, NO_IMPORT, IMPORT_STATE, BAD_FILE],
    handler: async ({ params, body, accessTo, ...request }) =>
      commitImport(
        await accessTo(body.schema),
        params.importId,
        scope(body.schema, params.tableName, request),
        body.parts,
        await limits(),
      ),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/table/{tableName}/imports/{importId}',
    audit: { action: 'import.abandon', target: ({ params }) => `import ${params.importId}` },
    summary: 'Abandon an import: its parts are deleted',
    access: 'write',
    params: ImportPath,
    query: z.strictObject({ schema: inSchema }),
    response: z.object({ success: z.boolean(), message: z.string() }),
    errors: [NO_IMPORT, IMPORT_STATE],
    handler: async ({ params, query, ...request }) =>
      abandonImport(
        await getDatabase(),
        params.importId,
        scope(query.schema, params.tableName, request),
        await limits(),
      ),
  }),
];

export const handler = httpHandler(routes);
