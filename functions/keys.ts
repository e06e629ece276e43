import { z } from 'zod';
import { createKey, deleteKey, listKeys } from '#lib/admin/keys';
import { getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { NO_SCHEMA, RESPONSE_LIMIT, ROLES_BUSY, SCHEMA_BUSY } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { Outcome, schemaRef } from '#lib/validation';

const ProjectPath = z.object({ schema: schemaRef });
const keyType = z.enum(['anon', 'service_role'], { message: 'keyType must be anon or service_role' });

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/project/{schema}/keys',
    idempotent: { shownOnce: 'key' },
    audit: { action: 'key.create' },
    summary: 'Create an API key for a schema; the key is in this response only',
    access: 'admin',
    permission: 'keys.manage',
    params: ProjectPath,
    body: z.strictObject({
      keyName: z
        .string()
        .trim()
        .min(1, 'keyName must not be empty')
        .max(100, 'keyName must be at most 100 characters'),
      keyType: keyType.default('anon'),
    }),
    response: z.object({
      id: z.number(),
      key: z.string().meta({ description: '64 hex characters; shown once' }),
      keyPrefix: z.string(),
      keyName: z.string(),
      keyType,
      schemaName: z.string(),
      createdAt: z.string(),
    }),
    status: 201,
    errors: [NO_SCHEMA, SCHEMA_BUSY],
    handler: async ({ params, body, audit }) =>
      createKey(
        await getDatabase(),
        (await getConfig()).DBADMIN_SECRET,
        { schema: params.schema, ...body },
        audit,
      ),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/project/{schema}/keys',
    summary: "List a schema's API keys (never the keys themselves)",
    access: 'admin',
    permission: 'keys.read',
    params: ProjectPath,
    response: z.array(
      z.object({
        id: z.number(),
        key_name: z.string(),
        key_type: keyType,
        key_prefix: z.string(),
        created_at: z.unknown(),
        last_used_at: z.unknown(),
        is_active: z.boolean(),
      }),
    ),
    errors: [NO_SCHEMA, RESPONSE_LIMIT],
    handler: async ({ params }) => listKeys(await getDatabase(), params.schema),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/project/{schema}/keys/{keyId}',
    audit: { action: 'key.delete', target: ({ params }) => `key ${params.keyId}` },
    summary: 'Delete an API key; it stops working at once',
    access: 'admin',
    permission: 'keys.manage',
    params: ProjectPath.extend({
      keyId: z.coerce.number().int('keyId must be a whole number').positive('keyId must be positive'),
    }),
    response: Outcome,
    errors: [{ status: 404, why: 'the schema has no key with this id' }, ROLES_BUSY],
    handler: async ({ params, audit }) =>
      deleteKey(await getDatabase(), (await getConfig()).DBADMIN_SECRET, params.schema, params.keyId, audit),
  }),
];

export const handler = httpHandler(routes);
