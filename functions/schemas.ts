import { z } from 'zod';
import { createSchema, deleteSchema, schemasRead } from '#lib/admin/schemas';
import { getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { NO_SCHEMA, RESPONSE_LIMIT, ROLES_BUSY } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { visibleTo } from '#lib/http/person-scope';
import { defineRoute } from '#lib/http/route';
import { Outcome, queryBoolean, schemaName, schemaPassword, schemaRef } from '#lib/validation';

export const routes = [
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
    summary: 'Create a schema and its dedicated login role <schemaName>_user',
    access: 'admin',
    permission: 'schemas.create',
    body: z.strictObject({ schemaName, password: schemaPassword }),
    response: Outcome.extend({ username: z.string() }),
    status: 201,
    handler: async ({ body, audit }) =>
      createSchema(await getDatabase(), (await getConfig()).DBADMIN_SECRET, body, audit),
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
];

export const handler = httpHandler(routes);
