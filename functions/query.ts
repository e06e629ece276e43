import { z } from 'zod';
import { runQuery } from '#lib/admin/query';
import { getConfig, resultLimits } from '#lib/config';
import { adminAccess, schemaAccess } from '#lib/db/executor';
import { Forbidden } from '#lib/errors';
import { RESPONSE_LIMIT, RESULT_LIMITS, SCHEMA_SESSION } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { inSchema } from '#lib/validation';

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/query',
    summary:
      "Run SQL in one transaction as the schema's role (admin: a statement or a script, described by its last result; API keys: one statement, read-only for anon). runAs admin: the admin's own rights.",
    access: 'read',
    body: z.strictObject({
      sql: z
        .string()
        .min(1, 'sql must not be empty')
        .max(1024 * 1024),
      schema: inSchema,
      runAs: z
        .enum(['schema', 'admin'], { message: 'runAs must be schema or admin' })
        .default('schema')
        .meta({
          description:
            "schema (default): as the schema's own role, so code planted there runs with the schema's rights only; admin: with the service's own database rights (admin credentials only)",
        }),
    }),
    response: z.object({
      rows: z.array(z.record(z.string(), z.unknown())),
      fields: z.array(z.object({ name: z.string(), dataTypeID: z.number() })),
      rowCount: z.number(),
      duration: z.number().meta({ description: 'milliseconds' }),
    }),
    errors: [
      ...SCHEMA_SESSION,
      { status: 403, why: 'runAs admin with an API key' },
      RESULT_LIMITS,
      RESPONSE_LIMIT,
    ],
    handler: async ({ body, signal, principal }) => {
      const asKey = principal?.kind === 'key';
      if (asKey && body.runAs === 'admin')
        throw new Forbidden('API keys cannot run SQL with the admin’s rights');
      const adminRights = body.runAs === 'admin';
      const config = await getConfig();
      return runQuery(
        adminRights
          ? await adminAccess(body.schema, signal)
          : await schemaAccess(principal, body.schema, signal),
        {
          sql: body.sql,
          schema: body.schema,
          timeoutMs: config.QUERY_TIMEOUT_MS,
          limits: resultLimits(config),
          asKey,
          adminRights,
        },
      );
    },
  }),
];

export const handler = httpHandler(routes);
