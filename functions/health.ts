import { z } from 'zod';
import { checkHealth } from '#lib/admin/health';
import { getPool } from '#lib/db/pool';
import { DATABASE } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/health',
    summary: 'Whether the service and its database answer (503 when the database does not)',
    access: 'public',
    response: z.object({
      status: z.literal('ok'),
      database: z.literal('up'),
      timestamp: z.iso.datetime(),
      warnings: z
        .array(z.string())
        .optional()
        .describe('What the operator should know: a database that does not store text as UTF-8'),
    }),
    errors: [DATABASE],
    handler: async () => checkHealth(await getPool()),
  }),
];

export const handler = httpHandler(routes);
