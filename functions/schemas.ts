import { z } from 'zod';
import { routes as backupRoutes } from '#functions/backups';
import { routes as migrationRoutes } from '#functions/migrations';
import { cloneSchema } from '#lib/admin/clone';
import { connectionString, publicAddress, schemaLoginRead } from '#lib/admin/connection-string';
import { createSchema, deleteSchema, schemasRead } from '#lib/admin/schemas';
import { getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { NO_SCHEMA, RESPONSE_LIMIT, ROLES_BUSY } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { visibleTo } from '#lib/http/person-scope';
import { defineRoute } from '#lib/http/route';
import { Outcome, queryBoolean, schemaName, schemaPassword, schemaRef } from '#lib/validation';

const Counts = z.object({
  tables: z.number().int(),
  views: z.number().int(),
  sequences: z.number().int(),
  functions: z.number().int(),
  types: z.number().int(),
  indexes: z.number().int(),
  triggers: z.number().int(),
  policies: z.number().int(),
});

const CloneSummary = z
  .object({
    template: z.string(),
    withData: z.boolean(),
    counts: Counts.describe('What the template held and the new schema now holds, by kind'),
    rows: z.number().int().optional().describe('Rows copied, with withData'),
    notCopied: z
      .array(z.string())
      .describe("Grants to roles other than PUBLIC and the schema's own, which a copy never carries"),
  })
  .describe('Present when the schema was started from a template');

const schemaRoutes = [
  defineRoute({
    method: 'GET',
    path: '/api/schemas',
    summary: 'List schemas (projects), system schemas excluded',
    access: 'admin',
    permission: 'read',
    response: z.array(z.string()),
    errors: [RESPONSE_LIMIT],
    reads: () => schemasRead,
    handler: async ({ read, principal }) => visibleTo(principal, read, (schema) => schema),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/schema/create',
    idempotent: true,
    audit: { action: 'schema.create', target: ({ body }) => `schema ${body.schemaName}` },
    summary: 'Create a schema and its dedicated login role <schemaName>_user, empty or from a template',
    access: 'admin',
    permission: 'schemas.create',
    body: z
      .strictObject({
        schemaName,
        password: schemaPassword,
        template: schemaRef
          .optional()
          .describe(
            "A schema to start from: its tables, columns, defaults, constraints, indexes, sequences (reset), views, functions, triggers, enums, policies, comments and grants, made again as the new schema's own",
          ),
        withData: z
          .boolean()
          .optional()
          .describe("With `template`: copy its rows too (and its sequences' values)"),
      })
      .refine((body) => body.withData === undefined || body.template !== undefined, {
        message: 'withData needs a template to copy the rows of',
        path: ['withData'],
      }),
    response: Outcome.extend({ username: z.string(), clone: CloneSummary.optional() }),
    status: 201,
    errors: [NO_SCHEMA, ROLES_BUSY],
    handler: async ({ body, audit, accessTo }) => {
      const [db, { DBADMIN_SECRET, IMPORT_MAX_BYTES }] = await Promise.all([getDatabase(), getConfig()]);
      const { template, withData, ...schema } = body;
      if (template === undefined) return createSchema(db, DBADMIN_SECRET, schema, audit);
      return cloneSchema(
        db,
        DBADMIN_SECRET,
        { ...schema, template, withData: withData ?? false },
        accessTo,
        audit,
        IMPORT_MAX_BYTES,
      );
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/schema/{schemaName}',
    audit: { action: 'schema.delete', target: ({ params }) => `schema ${params.schemaName}` },
    summary: 'Delete a schema and its dedicated user; cascade=true also deletes its objects',
    access: 'admin',
    permission: 'schemas.delete',
    params: z.object({ schemaName: schemaRef }),
    query: z.strictObject({ cascade: queryBoolean.default(false) }),
    response: Outcome,
    errors: [NO_SCHEMA, ROLES_BUSY],
    handler: async ({ params, query, audit }) =>
      deleteSchema(await getDatabase(), { schemaName: params.schemaName, cascade: query.cascade }, audit),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/schema/{schemaName}/connection',
    summary:
      "How to connect as the schema's login <schemaName>_user: psql's command and an application's URL, the password a placeholder (dbadmin never keeps it)",
    access: 'admin',
    permission: 'keys.read',
    params: z.object({ schemaName: schemaRef }),
    response: z.object({
      host: z.string().meta({ description: 'PUBLIC_DATABASE_HOST, else the host of DATABASE_URL' }),
      port: z.number().int().meta({ description: 'PUBLIC_DATABASE_PORT, else the port of DATABASE_URL' }),
      database: z.string(),
      user: z.string().meta({ description: 'the schema’s login, <schemaName>_user' }),
      sslmode: z
        .literal('verify-full')
        .optional()
        .meta({ description: "present when the service's own connection uses TLS" }),
      psql: z.string().meta({ description: 'a shell command; psql asks for the password' }),
      url: z.string().meta({
        description:
          'postgresql://user:<password>@host:port/database: put the password set at creation, percent-encoded, in place of <password>',
      }),
    }),
    errors: [
      { status: 400, why: 'a system schema, which has no login of its own' },
      { status: 404, why: 'the schema does not exist, or has no login role <schemaName>_user' },
    ],
    reads: ({ params }) => schemaLoginRead(params.schemaName),
    handler: async ({ read }) => connectionString(publicAddress(await getConfig()), read),
  }),
];

/** The schemas function serves migrations across them (functions/migrations) and tenants' backups (functions/backups) too. */
export const routes = [...schemaRoutes, ...migrationRoutes, ...backupRoutes];

export const handler = httpHandler(routes);
