import { z } from 'zod';
import type { AnyRoute } from '#lib/http/route';

type JsonSchema = Record<string, unknown>;

const toSchema = (schema: z.ZodType, io: 'input' | 'output'): JsonSchema => {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  });
  return rest;
};

export const ErrorBody = z
  .object({
    error: z.string().meta({ description: 'Short error type, e.g. "Invalid schema name".' }),
    message: z.string().meta({ description: 'What was wrong and how to fix it.' }),
  })
  .meta({ id: 'Error' });

const ERROR_STATUSES: Record<string, string> = {
  '400': 'Invalid input',
  '401': 'Authentication required or failed',
  '403': 'Forbidden (an API key outside its rights, or PostgreSQL refused the privilege)',
  '404': 'Not found',
  '409': 'Conflict (a concurrent change; try again)',
  '413': 'Request body over 1 MiB, or a result over QUERY_MAX_ROWS / QUERY_MAX_BYTES',
  '500': 'Unexpected failure (details in the service log)',
  '503': 'Database unavailable',
};

function parameters(route: AnyRoute) {
  const list: JsonSchema[] = [];
  for (const [location, schema] of [
    ['path', route.params],
    ['query', route.query],
  ] as const) {
    if (!(schema instanceof z.ZodObject)) continue;
    const json = toSchema(schema, 'input') as {
      properties?: Record<string, JsonSchema>;
      required?: string[];
    };
    for (const [name, property] of Object.entries(json.properties ?? {})) {
      list.push({
        name,
        in: location,
        required: location === 'path' || (json.required ?? []).includes(name),
        schema: property,
      });
    }
  }
  return list;
}

function operation(route: AnyRoute) {
  const errors = Object.entries(ERROR_STATUSES).filter(
    ([status]) => route.access !== 'public' || status !== '401',
  );
  return {
    summary: route.summary,
    operationId: `${route.method.toLowerCase()}${route.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string = '') => c.toUpperCase())}`,
    ...(route.access === 'public' ? { security: [] } : {}),
    parameters: parameters(route),
    ...(route.body
      ? {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: toSchema(route.body, 'input') } },
          },
        }
      : {}),
    responses: {
      [String(route.status ?? 200)]: {
        description: 'Success',
        content: {
          'application/json': { schema: toSchema(route.response, 'output') },
          ...(route.alsoProduces ? { [route.alsoProduces]: { schema: { type: 'string' } } } : {}),
        },
      },
      ...Object.fromEntries(
        errors.map(([status, description]) => [
          status,
          {
            description,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
          },
        ]),
      ),
    },
  };
}

/** OpenAPI 3.1 document generated from the same zod schemas the handlers validate with. */
export function openApiDocument(routes: readonly AnyRoute[], info: { title: string; version: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    paths[route.path] ??= {};
    (paths[route.path] as Record<string, unknown>)[route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info,
    servers: [{ url: '/' }],
    security: [{ basicAuth: [] }, { bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        basicAuth: { type: 'http', scheme: 'basic' },
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'API key of one schema (anon: read-only)',
        },
      },
      schemas: { Error: toSchema(ErrorBody, 'output') },
    },
  };
}
