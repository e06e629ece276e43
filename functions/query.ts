import { z } from 'zod';
import { runQuery } from '#lib/admin/query';
import { getConfig } from '#lib/config';
import { getDatabase, getQueryPool } from '#lib/db/pool';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { inSchema } from '#lib/validation';

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/query',
    summary: 'Run SQL (a statement or a script, in one transaction); describes the last result',
    access: 'admin',
    body: z.strictObject({
      sql: z
        .string()
        .min(1, 'sql must not be empty')
        .max(1024 * 1024),
      schema: inSchema,
    }),
    response: z.object({
      rows: z.array(z.record(z.string(), z.unknown())),
      fields: z.array(z.object({ name: z.string(), dataTypeID: z.number() })),
      rowCount: z.number(),
      duration: z.number().meta({ description: 'milliseconds' }),
    }),
    handler: async ({ body, signal }) =>
      runQuery(await getQueryPool(), await getDatabase(), {
        ...body,
        timeoutMs: (await getConfig()).QUERY_TIMEOUT_MS,
        signal,
      }),
  }),
];

export const handler = httpHandler(routes);
