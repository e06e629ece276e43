import * as audit from '#functions/audit';
import * as constraints from '#functions/constraints';
import * as health from '#functions/health';
import * as imports from '#functions/imports';
import * as indexes from '#functions/indexes';
import * as keys from '#functions/keys';
import * as license from '#functions/license';
import * as meta from '#functions/meta';
import * as metrics from '#functions/metrics';
import * as people from '#functions/people';
import * as query from '#functions/query';
import * as rows from '#functions/rows';
import * as schemas from '#functions/schemas';
import * as tables from '#functions/tables';
import * as tenants from '#functions/tenants';
import type { AnyRoute } from '#lib/http/route';

/** Every function's routes, each with the handler that serves it (the OpenAPI and role tests walk them). */

export type Handler = (typeof meta)['handler'];

const GROUPS = [
  health,
  schemas,
  tables,
  constraints,
  indexes,
  rows,
  imports,
  query,
  keys,
  tenants,
  audit,
  people,
  metrics,
  license,
  meta,
];

export const ROUTES: { route: AnyRoute; handler: Handler }[] = GROUPS.flatMap((group) =>
  (group.routes as readonly AnyRoute[]).map((route) => ({ route, handler: group.handler as Handler })),
);

export const operationOf = (route: AnyRoute) => `${route.method} ${route.path}`;
