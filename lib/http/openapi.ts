import { z } from 'zod';
import { may, PERSON_ROLES, type Permission } from '#lib/access';
import { KEPT_HOURS } from '#lib/db/idempotency';
import { MAX_BODY_BYTES } from '#lib/http/json-body';
import {
  type Access,
  type AnyRoute,
  behindLicenseGate,
  permissionOf,
  requiresJsonContentType,
} from '#lib/http/route';
import type { UploadRule } from '#lib/http/upload';

/**
 * The OpenAPI 3.1 document, made from the route tables themselves (their zod schemas, access,
 * answers and errors), so what is documented is what is validated.
 */

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
    position: z
      .number()
      .int()
      .positive()
      .optional()
      .meta({ description: 'SQL errors: the character offset of the error into the SQL sent.' }),
  })
  .meta({ description: 'The body of every error answer.' });

const TITLES: Record<number, string> = {
  400: 'Bad request',
  401: 'Unauthorized',
  402: 'License required',
  403: 'Forbidden',
  404: 'Not found',
  409: 'Conflict',
  413: 'Too large',
  415: 'Unsupported media type',
  429: 'Too many requests',
  500: 'Internal error',
  502: 'Bad gateway',
  503: 'Unavailable',
  507: 'Insufficient storage',
};

/** Why lib/http/key-scope refuses an API key, by the route's access. */
const KEY_REFUSALS: Record<Exclude<Access, 'public' | 'metrics'>, string> = {
  admin: 'an API key: this endpoint needs the admin’s Basic credentials or a person',
  person: 'an API key: this endpoint is about a person’s own account',
  read: 'an API key naming a schema other than its own',
  write: 'an anon key (read-only), or an API key naming a schema other than its own',
};

const UNAUTHORIZED = {
  metrics: 'no credentials, wrong Basic credentials, or a Bearer token other than METRICS_TOKEN',
  other: 'no credentials, wrong Basic credentials, or an unknown API key',
};

/** What authentication, the license gate, the key's scope and the throttle answer. */
function accessReasons(route: AnyRoute, add: (status: number, reason: string) => void): void {
  add(401, route.access === 'metrics' ? UNAUTHORIZED.metrics : UNAUTHORIZED.other);
  if (behindLicenseGate(route))
    add(402, 'LICENSE_ENFORCEMENT=strict and the license is expired, invalid or missing');
  if (route.access !== 'metrics' && route.access !== 'public') add(403, KEY_REFUSALS[route.access]);
  const permission = permissionOf(route);
  if (permission)
    add(
      403,
      `a person whose role lacks ${permission} (${rolesWith(permission)}), or a schema outside their scope`,
    );
  add(429, 'too many failed sign-ins from this client address: every request from it until Retry-After');
  add(503, 'the database does not answer; try again shortly');
}

/**
 * Every error status a route can answer, with why: from its access (the chain of lib/http/handler
 * authenticates, throttles, gates on the license and scopes keys), its inputs, and its own work.
 */
export function errorReasons(route: AnyRoute): Map<number, string[]> {
  const reasons = new Map<number, string[]>();
  const add = (status: number, reason: string) =>
    reasons.set(status, [...(reasons.get(status) ?? []), reason]);
  if (route.params || route.query || route.body) add(400, 'invalid input; the message names the field');
  if (route.body) add(413, `a request body over ${MAX_BODY_BYTES} bytes`);
  if (route.upload) {
    add(413, `a file (or part) over ${route.upload.maxBytes} bytes`);
    add(415, `a body sent as another content type than ${route.upload.types.join(', ')}`);
  }
  if (requiresJsonContentType(route))
    add(415, 'no Content-Type: application/json (required on every authenticated POST, body or not)');
  else if (route.body) add(415, 'a request body sent as another content type than application/json');
  if (route.access !== 'public') accessReasons(route, add);
  if (route.method !== 'GET' && route.audit !== false)
    add(503, 'the audit entry could not be written, so the change was not made');
  if (route.idempotent) {
    add(
      409,
      'Idempotency-Key: its first request is still running (retry after Retry-After), was another request, made its change but lost its answer, was taken over by a retry, or answered a secret shown once',
    );
  }
  if (route.addsData)
    add(507, 'the schema is over its storage quota (as last measured); reads, deletes and drops still work');
  for (const { status, why } of route.errors ?? []) add(status, why);
  add(400, 'the request ran past the function’s time and was cancelled (Query timeout)');
  add(500, 'an unexpected failure; the service log has the details');
  return new Map([...reasons].sort(([a], [b]) => a - b));
}

const ref = (kind: 'schemas' | 'headers' | 'responses', name: string) => ({
  $ref: `#/components/${kind}/${name}`,
});
const errorContent = { 'application/json': { schema: ref('schemas', 'Error') } };
const LICENSE_HEADERS = {
  'X-License-Status': ref('headers', 'X-License-Status'),
  'X-License-Warning': ref('headers', 'X-License-Warning'),
};

/** Headers that come with an error status, whichever route gives it. */
const ERROR_HEADERS: Record<number, Record<string, unknown>> = {
  401: { 'WWW-Authenticate': ref('headers', 'WWW-Authenticate') },
  402: LICENSE_HEADERS,
  429: { 'Retry-After': ref('headers', 'Retry-After') },
};

const COMPONENT_HEADERS = {
  'Set-Cookie': {
    description:
      'The console session’s cookie (HttpOnly, SameSite=Strict, Path=/; over HTTPS Secure and named __Host-dbadmin_session); signing out clears it.',
    required: true,
    schema: { type: 'string' },
  },
  Allow: {
    description: 'The methods this path takes, e.g. `GET, DELETE`.',
    required: true,
    schema: { type: 'string' },
  },
  'Retry-After': {
    description: 'Seconds until requests from this address are taken again.',
    required: true,
    schema: { type: 'integer', minimum: 1 },
  },
  'WWW-Authenticate': {
    description:
      'The Basic challenge; left out for the web console’s requests (X-Requested-With: dbadmin-console).',
    schema: { type: 'string' },
  },
  'X-License-Status': {
    description: 'The license status on endpoints behind the license gate.',
    required: true,
    schema: { enum: ['active', 'trial', 'grace_period', 'expired', 'invalid', 'none'] },
  },
  'X-License-Warning': {
    description:
      'What is wrong with the license, when it is not healthy: one line of printable ASCII, at most 256 characters (GET /api/license/status has the whole warning).',
    schema: { type: 'string', maxLength: 256 },
  },
  'Content-Disposition': {
    description: 'On text/csv answers: an attachment, named after the table.',
    schema: { type: 'string' },
  },
  'X-Next-Cursor': {
    description: 'On text/csv answers, when more rows follow: the `after` of the next page.',
    schema: { type: 'string' },
  },
  'Idempotency-Replayed': {
    description: '`true`: the answer of the first request sent with this Idempotency-Key, sent again.',
    schema: { const: 'true' },
  },
  'Retry-After-In-Progress': {
    description:
      'On "Request in progress": seconds to wait before sending the request again (the first one with this Idempotency-Key is still running or committing).',
    schema: { type: 'integer', minimum: 1 },
  },
};

/** The header a write a client may retry takes (lib/http/idempotency). */
const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: `Names this request, for retries: sent again with the same key (and the same request), it answers the first answer instead of writing twice, with Idempotency-Replayed: true. The first answer is kept ${KEPT_HOURS} hours from the key's first use; a failure is not kept (a retry runs again). 1 to 255 printable ASCII characters; one key per request per principal and route.`,
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[ -~]+$' },
};

function errorResponse(route: AnyRoute, status: number, reasons: string[]) {
  const headers = {
    ...ERROR_HEADERS[status],
    ...(status === 409 && route.idempotent
      ? { 'Retry-After': ref('headers', 'Retry-After-In-Progress') }
      : {}),
  };
  return {
    description: `${TITLES[status] ?? 'Error'}: ${reasons.join('; ')}.`,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    content: errorContent,
  };
}

function successResponse(route: AnyRoute) {
  if (route.status === 303)
    return {
      description: 'See Other: the browser goes on to Location',
      headers: {
        Location: { description: 'where to go next', required: true, schema: { type: 'string' } },
        ...(route.setsCookie
          ? {
              'Set-Cookie': {
                description:
                  'On the way to the provider, the attempt’s cookie, sealed (dbadmin_sso: HttpOnly, SameSite=Lax, Path=/, 10 minutes; over HTTPS Secure and named __Host-dbadmin_sso); back from it, the console session’s (see POST /api/session).',
                required: true,
                schema: { type: 'string' },
              },
            }
          : {}),
      },
    };
  const headers = {
    ...(behindLicenseGate(route) ? LICENSE_HEADERS : {}),
    ...(route.alsoProduces
      ? {
          'Content-Disposition': ref('headers', 'Content-Disposition'),
          'X-Next-Cursor': ref('headers', 'X-Next-Cursor'),
        }
      : {}),
    ...(route.idempotent ? { 'Idempotency-Replayed': ref('headers', 'Idempotency-Replayed') } : {}),
    ...(route.setsCookie ? { 'Set-Cookie': ref('headers', 'Set-Cookie') } : {}),
  };
  return {
    description: 'Success',
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    content: {
      'application/json': { schema: toSchema(route.response, 'output') },
      ...(route.alsoProduces
        ? {
            [route.alsoProduces]: {
              schema: route.alsoProduces.startsWith('text/')
                ? { type: 'string' }
                : { type: 'string', format: 'binary' },
            },
          }
        : {}),
    },
  };
}

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
  if (route.idempotent) list.push(IDEMPOTENCY_KEY);
  return list;
}

/** A person signs in with a console session (its cookie) or a personal token (Bearer). */
const PEOPLE = [{ sessionCookie: [] }, { personalToken: [] }];

const SECURITY: Record<Access, unknown[] | undefined> = {
  public: [],
  admin: [{ basicAuth: [] }, ...PEOPLE],
  person: [{ basicAuth: [] }, ...PEOPLE],
  read: undefined,
  write: undefined,
  metrics: [{ basicAuth: [] }, { metricsToken: [] }, ...PEOPLE],
};

const rolesWith = (permission: Permission) => PERSON_ROLES.filter((role) => may(role, permission)).join(', ');

/** What a file route takes: the file's bytes as they are, in one of its content types. */
function uploadBody(rule: UploadRule) {
  const described: Record<string, string> = {
    'text/csv': 'CSV, UTF-8: its options are query parameters',
    'application/json': 'a JSON array of objects, one a row, keyed by column name',
    'application/x-ndjson': 'one JSON object a line',
    'application/ndjson': 'one JSON object a line',
    'application/octet-stream': 'a part of the file, cut anywhere',
  };
  return {
    required: true,
    content: Object.fromEntries(
      rule.types.map((type) => [
        type,
        {
          schema: {
            type: 'string',
            description: described[type] ?? 'the file’s bytes',
            maxLength: rule.maxBytes,
          },
        },
      ]),
    ),
  };
}

function operation(route: AnyRoute) {
  const errors = [...errorReasons(route)].map(([status, reasons]) => [
    String(status),
    errorResponse(route, status, reasons),
  ]);
  const security = SECURITY[route.access];
  const permission = permissionOf(route);
  return {
    summary: route.summary,
    ...(permission
      ? {
          description: `People: needs ${permission} (${rolesWith(permission)}).`,
          'x-dbadmin-permission': permission,
        }
      : {}),
    operationId: `${route.method.toLowerCase()}${route.path.replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string = '') => c.toUpperCase())}`,
    ...(security ? { security } : {}),
    parameters: parameters(route),
    ...(route.body
      ? {
          requestBody: {
            required: true,
            content: { 'application/json': { schema: toSchema(route.body, 'input') } },
          },
        }
      : {}),
    ...(route.upload ? { requestBody: uploadBody(route.upload) } : {}),
    responses: Object.fromEntries(
      [
        [String(route.status ?? 200), successResponse(route)],
        ...errors,
        ['405', ref('responses', 'MethodNotAllowed')],
      ].sort(([a], [b]) => Number(a) - Number(b)),
    ),
  };
}

/**
 * A request with a method its path lacks gets 405 with Allow (lib/http/handler routeMiss). OpenAPI
 * has no place for the answers of methods a path does not have, so every operation refers to it.
 */
const METHOD_NOT_ALLOWED = {
  description:
    'Method not allowed: a method this path does not take was sent; Allow lists the ones it takes. Listed on every operation of every path.',
  headers: { Allow: ref('headers', 'Allow') },
  content: errorContent,
};

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
    security: [{ basicAuth: [] }, { bearerAuth: [] }, ...PEOPLE],
    paths,
    components: {
      securitySchemes: {
        basicAuth: { type: 'http', scheme: 'basic' },
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          description: 'API key of one schema (anon: read-only)',
        },
        sessionCookie: {
          type: 'apiKey',
          in: 'cookie',
          name: 'dbadmin_session',
          description:
            'a person’s console session (POST /api/session; __Host-dbadmin_session over HTTPS); changes also need its X-CSRF-Token',
        },
        personalToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'a person’s personal token (dbp_...): at most their role’s rights, in their scope',
        },
        metricsToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'METRICS_TOKEN, for GET /api/metrics alone',
        },
      },
      schemas: { Error: toSchema(ErrorBody, 'output') },
      headers: COMPONENT_HEADERS,
      responses: { MethodNotAllowed: METHOD_NOT_ALLOWED },
    },
  };
}
