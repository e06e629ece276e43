import type { MiddlewareObj, Request } from '@middy/core';
import type { Context } from 'aws-lambda';
import type { AuthContext } from '#lib/http/auth-context';
import type { HttpEvent } from '#lib/http/event';
import { countRequest } from '#lib/http/metrics';
import type { HttpResponse } from '#lib/http/respond';
import { logger } from '#lib/log';

/** What the router matched, set by the route's own chain: `GET /api/table/{tableName}`. */
export interface RouteContext {
  route?: string;
}

type LoggedContext = Context & AuthContext & RouteContext;
interface Timing extends Record<string, unknown> {
  startedAt?: number;
}

/** API Gateway's own id for the request (its `apigw-requestid` header), when there is one. */
const gatewayRequestId = (event: unknown) => {
  const id = (event as { requestContext?: { requestId?: unknown } } | undefined)?.requestContext?.requestId;
  return typeof id === 'string' ? id : undefined;
};

function principalKind({ principal }: AuthContext): string {
  if (principal === undefined) return 'none';
  if (principal.kind === 'key') return principal.keyType;
  if (principal.kind === 'person') return `person:${principal.id}`;
  return 'admin';
}

/**
 * Outermost middleware: counts the request (lib/http/metrics) and writes one JSON line per request with its ids, route, status, duration and the
 * kind of principal (never the credentials, the key, the SQL or its parameters), and the
 * Lambda request id in `x-request-id` so a caller can quote the line that belongs to an answer.
 */
export const requestLog = (): MiddlewareObj<HttpEvent, HttpResponse, Error, LoggedContext, Timing> => {
  const finish = (request: Request<HttpEvent, HttpResponse, Error, LoggedContext, Timing>) => {
    const { context, response, internal } = request;
    if (response && context.awsRequestId) response.headers['x-request-id'] = context.awsRequestId;
    const route = context.route ?? 'unmatched';
    const status = response?.statusCode ?? 500;
    const ms = performance.now() - (internal.startedAt ?? performance.now());
    countRequest(route, status, ms / 1000);
    logger.info('request', {
      route,
      status,
      durationMs: Math.round(ms),
      principal: principalKind(context),
      apigw_request_id: gatewayRequestId(request.event),
    });
  };
  return {
    before: (request) => {
      request.internal.startedAt = performance.now();
      logger.addContext(request.context);
    },
    after: finish,
    onError: finish,
  };
};
