import { z } from 'zod';
import { routes as auditRoutes } from '#functions/audit';
import { routes as constraintRoutes } from '#functions/constraints';
import { routes as healthRoutes } from '#functions/health';
import { routes as importRoutes } from '#functions/imports';
import { routes as indexRoutes } from '#functions/indexes';
import { routes as keyRoutes } from '#functions/keys';
import { routes as licenseRoutes } from '#functions/license';
import { routes as metricsRoutes } from '#functions/metrics';
import { routes as peopleRoutes } from '#functions/people';
import { routes as queryRoutes } from '#functions/query';
import { routes as rowRoutes } from '#functions/rows';
import { routes as schemaRoutes } from '#functions/schemas';
import { routes as tableRoutes } from '#functions/tables';
import { routes as tenantRoutes } from '#functions/tenants';
import { httpHandler } from '#lib/http/handler';
import { openApiDocument } from '#lib/http/openapi';
import { type AnyRoute, defineRoute } from '#lib/http/route';

/** Every endpoint group's routes: the OpenAPI document and the 404/405 fallback read them. */
export const apiRoutes: AnyRoute[] = [
  ...healthRoutes,
  ...schemaRoutes,
  ...tableRoutes,
  ...indexRoutes,
  ...constraintRoutes,
  ...rowRoutes,
  ...importRoutes,
  ...queryRoutes,
  ...keyRoutes,
  ...tenantRoutes,
  ...auditRoutes,
  ...peopleRoutes,
  ...metricsRoutes,
  ...licenseRoutes,
];

let document: ReturnType<typeof openApiDocument> | undefined;

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/openapi.json',
    summary: 'This OpenAPI 3.1 document',
    access: 'public',
    response: z.record(z.string(), z.unknown()),
    handler: async () => {
      document ??= openApiDocument([...apiRoutes, ...routes], {
        title: 'dbadmin',
        version: '1.0.0',
      });
      return document;
    },
  }),
];

/** Also API Gateway's catch-all route: any request no other function took gets 404 or 405 here. */
export const handler = httpHandler(routes, { knownRoutes: apiRoutes });
