import middy from '@middy/core';
import httpRouterHandler from '@middy/http-router';
import type { Context } from 'aws-lambda';
import { type CatalogRead, runCatalogRead, sameRead } from '#lib/db/catalog-read';
import { schemaAccess } from '#lib/db/executor';
import { getDatabase } from '#lib/db/pool';
import { Download } from '#lib/download';
import { MethodNotAllowed, NotFound, QueryTimeout } from '#lib/errors';
import { Asset, assetResponse } from '#lib/http/asset';
import { audited } from '#lib/http/audit';
import type { AuthContext } from '#lib/http/auth-context';
import { authenticate } from '#lib/http/authenticate';
import { refuseCrossSite, trustedProxies } from '#lib/http/cross-site';
import { errorMapper } from '#lib/http/error-mapper';
import { clientAddress, type HttpEvent, header, queryInput } from '#lib/http/event';
import { idempotencyOf } from '#lib/http/idempotency';
import { boundInFlight } from '#lib/http/in-flight';
import { jsonBody, jsonContentType } from '#lib/http/json-body';
import { keyScope, outsideItsSchema } from '#lib/http/key-scope';
import { licenseGate } from '#lib/http/license-gate';
import { assertInScope, assertRequestInScope, personScope } from '#lib/http/person-scope';
import { type RouteContext, requestLog } from '#lib/http/request-log';
import { download, type HttpResponse, json, jsonText, Redirect, Reply, redirect } from '#lib/http/respond';
import { responseLimit } from '#lib/http/response-limit';
import { type AnyRoute, behindLicenseGate, type Method, requiresJsonContentType } from '#lib/http/route';
import { cookieNamed, overHttps } from '#lib/http/session-cookie';
import { refuseOverQuota } from '#lib/http/storage-quota';
import { type Upload, uploadBody } from '#lib/http/upload';
import { JsonText } from '#lib/json-text';
import { startLicensing } from '#lib/license/index';

/**
 * The Lambda handler of an endpoint group: the Middy chain (request log, error mapping, response
 * limit, routing) and, per route, sign-in, license gate, body parsing, the key's scope, the storage
 * quota, then the route's one lib call with its audit entry (and its Idempotency-Key's claim).
 */

const templateToRegExp = (template: string) => new RegExp(`^${template.replace(/\{[^/]+\}/g, '[^/]+')}/?$`);

/** Unknown path -> 404; known path, other method -> 405 naming the allowed ones. */
export function routeMiss(routes: readonly AnyRoute[], method: string, path: string): Error {
  const allowed = routes
    .filter((route) => templateToRegExp(route.path).test(path))
    .map((route) => route.method);
  if (allowed.length === 0) return new NotFound('Not found', `no endpoint at ${path}; see /api/openapi.json`);
  return new MethodNotAllowed(method, path, [...new Set(allowed)]);
}

type RouteEvent = HttpEvent & { body?: unknown };

/**
 * What the route's catalog read finds: what the sign-in read carried when it asked the same
 * (lib/http/authenticate), else its own round trip (a key's schema filled in after sign-in). A
 * key's read is about its own schema only, whichever way it runs (keyScope sees to it first).
 */
function catalogRead<T>(read: CatalogRead<T>, { principal, carried }: AuthContext): Promise<T> | T {
  if (principal?.kind === 'key' && read.schema !== null && read.schema !== principal.schema)
    throw outsideItsSchema(principal, read.schema);
  if (read.schema !== null) assertInScope(principal, read.schema);
  if (carried && sameRead(carried.read, read)) return read.decode(carried.row);
  return getDatabase().then((db) => runCatalogRead(db, read));
}

function routeHandler(route: AnyRoute, { licenseGate: gated = true, audit = true }: HttpHandlerOptions) {
  // The outer chain already races Lambda's deadline; a second timer per request buys nothing.
  const chain = middy<RouteEvent, HttpResponse, Error, Context & AuthContext & RouteContext>({
    timeoutEarlyInMillis: 0,
  });
  chain.before(({ context }) => {
    context.route = `${route.method} ${route.path}`;
  });
  if (route.access !== 'public') chain.use(authenticate(route)).use(personScope(route));
  if (gated && behindLicenseGate(route)) chain.use(licenseGate());
  if (requiresJsonContentType(route)) chain.use(jsonContentType());
  if (route.body) chain.use(jsonBody());
  if (route.upload) chain.use(uploadBody(route.upload));
  if (route.access !== 'public') chain.use(keyScope(route));
  return chain.handler(async (event, context, { signal }) => {
    const params = route.params?.parse(event.pathParameters ?? {});
    const query = route.query?.parse(queryInput(event));
    const body = route.body?.parse(event.body);
    const read = route.reads?.({ params, query });
    const { principal } = context;
    assertRequestInScope({ params, query, body, principal });
    const keyed = idempotencyOf(
      route,
      event,
      { principal, params, query, body },
      context.getRemainingTimeInMillis?.(),
    );
    const quota = () => refuseOverQuota(route, { params, query, body, principal });
    // Refused before any other work; but a keyed retry of a write that took the schema over its
    // quota is replayed, so with a key the check follows the claim.
    if (!keyed) await quota();
    const answer = async () => {
      const result = await (audit ? audited : unaudited)(
        route,
        { params, query, body, principal, requestId: context.awsRequestId },
        async (entry) => {
          // The key's claim binds the request's write transactions (their COMMIT) to it.
          const audit = keyed ? await keyed.claim(entry, signal, context.awsRequestId) : entry;
          if (keyed) await quota();
          return route.handler({
            params,
            query,
            body,
            read: read && (await catalogRead(read, context)),
            principal,
            signal,
            clientAddress: clientAddress(event, trustedProxies()),
            overHttps: overHttps(event),
            userAgent: header(event, 'user-agent'),
            cookie: (name) => cookieNamed(event, name),
            navigating: /\btext\/html\b/.test(header(event, 'accept') ?? ''),
            upload: route.upload ? (event.body as Upload) : undefined,
            audit,
            accessTo: (schema) => schemaAccess(principal, schema, signal, audit),
          });
        },
      );
      return responseOf(route, event, result);
    };
    return keyed ? keyed.answer(answer) : answer();
  });
}

function responseOf(route: AnyRoute, event: HttpEvent, result: unknown): HttpResponse {
  if (result instanceof Download) return download(result);
  if (result instanceof JsonText) return jsonText(route.status ?? 200, result.body);
  if (result instanceof Asset) return assetResponse(result, header(event, 'accept-encoding'));
  if (result instanceof Reply) return json(route.status ?? 200, result.body, result.headers);
  if (result instanceof Redirect) return redirect(route.status ?? 303, result);
  return json(route.status ?? 200, result);
}

/** How long before the function's deadline the request gives up, cancels and answers. */
export const TIMEOUT_MARGIN_MS = 1000;

export interface HttpHandlerOptions {
  /** Routes served elsewhere, consulted only to tell a 405 from a 404. */
  knownRoutes?: readonly AnyRoute[];
  /** The license gate on non-public routes; off only to measure what it costs (bench/). */
  licenseGate?: boolean;
  /**
   * The service's audit log (lib/http/audit), on by default. Off for the license server, which is
   * not the service: it has neither the service's settings nor its database.
   */
  audit?: boolean;
}

const unaudited: typeof audited = (_route, _input, work) => work(undefined);

/**
 * The Lambda handler of one endpoint group: the request log outermost, then error mapping, the
 * refusal of another site's changes, the response size limit, then routing; each route adds authentication, the license gate, JSON body parsing and the key's
 * scope as it needs them, in that order.
 */
export function httpHandler(routes: readonly AnyRoute[], options: HttpHandlerOptions = {}) {
  const known = [...routes, ...(options.knownRoutes ?? [])];
  // Functions behind the license gate activate from the environment at cold start, not on a request.
  if (options.licenseGate !== false && routes.some((route) => route.access !== 'public')) startLicensing();
  const router = httpRouterHandler({
    routes: routes.map((route) => ({
      method: route.method satisfies Method,
      path: route.path,
      handler: routeHandler(route, options),
    })),
    notFoundResponse: ({ method, path }: { method: string; path: string }) => {
      throw routeMiss(known, method, path);
    },
  });
  return middy<HttpEvent, HttpResponse>({
    // Answer before the host's own timeout (its error page, with stack and paths, must never reach a
    // client): the route's signal aborts, which cancels its statement in PostgreSQL.
    timeoutEarlyInMillis: TIMEOUT_MARGIN_MS,
    timeoutEarlyResponse: () => {
      throw new QueryTimeout("ran longer than the function's time allows");
    },
  })
    .use(requestLog())
    .use(errorMapper())
    .use(refuseCrossSite())
    .use(boundInFlight())
    .use(responseLimit())
    .handler(router as never);
}
