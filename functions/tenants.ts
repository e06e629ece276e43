import { z } from 'zod';
import { granted } from '#lib/access';
import { drift, fingerprints } from '#lib/admin/drift';
import { driftFix } from '#lib/admin/drift-fix';
import { setQuota } from '#lib/admin/quotas';
import { describeTenant, listTenants, stopTenantSession, TENANT_SORTS } from '#lib/admin/tenants';
import { getDatabase } from '#lib/db/pool';
import { type Answer, NO_SCHEMA } from '#lib/http/answers';
import { httpHandler } from '#lib/http/handler';
import { assertInScope } from '#lib/http/person-scope';
import { defineRoute } from '#lib/http/route';
import type { Principal } from '#lib/principal';
import { queryInt, schemaRef } from '#lib/validation';

/**
 * The operator's view of the tenants (lib/admin/tenants), for the admin only: every schema side by
 * side, one schema's sessions, locks and keys, and ending one of its sessions.
 */

const Quota = z.object({
  statementTimeoutMs: z.number().nullable(),
  connectionLimit: z.number().nullable().meta({ description: 'of the tenant’s own login' }),
  storageBytes: z.number().nullable(),
  usedBytes: z
    .number()
    .nullable()
    .meta({ description: 'as last measured (in the background, every 30 s or so)' }),
  measuredAt: z.string().nullable(),
  overStorage: z
    .boolean()
    .meta({ description: 'writes that add data answer 507; reads, deletes and drops go on' }),
});

const QuotaBody = z.strictObject({
  statementTimeoutMs: z
    .number()
    .int()
    .min(100, 'statementTimeoutMs must be at least 100')
    .max(86_400_000)
    .nullable()
    .meta({
      description: 'its roles’ statements end past it (never longer than QUERY_TIMEOUT_MS); null: none',
    }),
  connectionLimit: z
    .number()
    .int()
    .min(0)
    .max(10_000)
    .nullable()
    .meta({ description: 'connections the tenant’s own login may hold; null: the default (10)' }),
  storageBytes: z
    .number()
    .int()
    .min(1)
    .max(Number.MAX_SAFE_INTEGER)
    .nullable()
    .meta({ description: 'tables, indexes and TOAST; over it, writes that add data answer 507; null: none' }),
});

const Figures = {
  schema: z.string(),
  tables: z.number(),
  estimatedRows: z
    .number()
    .meta({ description: 'the planner’s estimate (reltuples), summed over its tables' }),
  sizeBytes: z.number().meta({
    description: 'tables, indexes and TOAST from the catalog (relpages), as of the last VACUUM or ANALYZE',
  }),
  connections: z.number().meta({ description: 'sessions of its roles in this database' }),
  active: z.number().meta({ description: 'of those, running a statement' }),
  activeSeconds: z
    .number()
    .meta({ description: 'the time the running statements have taken so far, summed' }),
  quota: Quota.nullable(),
};

const Lock = z.object({ mode: z.string(), relation: z.string().nullable() });

const SessionPath = z.object({ schema: schemaRef, pid: queryInt('pid', 1, 2_147_483_647) });
const NO_SESSION: Answer = {
  status: 404,
  why: 'no session of that pid among the schema’s roles in this database',
};
const NOT_ENDED: Answer = {
  status: 403,
  why: 'a superuser’s session, or (terminate) one of the service’s own pooled sessions, whose statement may be cancelled instead',
};
const NOT_NOW: Answer = {
  status: 409,
  why: 'cancel: the session runs no statement now; or the signal could not be sent',
};
const Stopped = z.object({ success: z.boolean(), message: z.string() });

/** Which session (and statement) the page showed: a reused pid, or a statement run since, is not it. */
const SessionBody = z.strictObject({
  backendStart: z.string().min(1).max(100).meta({
    description: 'the session’s backendStart as GET /api/tenants/{schema} showed it',
  }),
  queryStart: z.string().min(1).max(100).optional().meta({
    description:
      'cancel: its queryStart as shown, so a statement started since is not cancelled in its place',
  }),
});

const DefinitionEntry = z.object({ kind: z.string(), name: z.string(), definition: z.string() });

const CATALOG_CHANGED: Answer = {
  status: 503,
  why: 'schemas were changed while their structure was read, three times over; try again',
};

const AgainstQuery = z.strictObject({
  against: schemaRef.optional().describe('The schema to compare with; left out, the one it was cloned from'),
});

/** What comparing a schema with another may answer besides its own answer. */
const COMPARED = [
  NO_SCHEMA,
  { status: 404, why: 'no template to compare with: name one in against' },
  CATALOG_CHANGED,
] as const;

/** A person compares schemas in their scope only: the schema, and what it is compared with. */
function assertComparable(principal: Principal | undefined, schema: string, against: string | undefined) {
  assertInScope(principal, schema);
  if (against) assertInScope(principal, against);
}

/** Drift from templates (lib/admin/drift): read on the catalog, no tenant code. */
const driftRoutes = [
  defineRoute({
    method: 'GET',
    path: '/api/drift',
    summary:
      "Every tenant schema's structure fingerprint and, for one cloned from a template, whether it still matches the template's",
    access: 'admin',
    permission: 'read',
    query: z.strictObject({
      template: schemaRef.optional().describe('Only this template and the schemas cloned from it'),
    }),
    response: z.object({
      schemas: z.array(
        z.object({
          schema: z.string(),
          fingerprint: z.string().describe('Equal for two schemas of one structure, whatever their names'),
          objects: z.number().int(),
          template: z.string().nullable(),
          drifted: z.boolean().nullable().describe('Differs from its template; null without one'),
        }),
      ),
    }),
    errors: [CATALOG_CHANGED],
    // A person scoped to some schemas sees those alone, and names a template among them.
    handler: async ({ query, principal }) => {
      if (query.template) assertInScope(principal, query.template);
      return fingerprints(await getDatabase(), {
        within: principal?.kind === 'person' ? principal.schemas : null,
        template: query.template,
      });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/drift/{schema}',
    summary:
      "How a schema's structure differs from its template's, or another schema's: missing, extra, different",
    access: 'admin',
    permission: 'read',
    params: z.object({ schema: schemaRef }),
    query: AgainstQuery,
    response: z.object({
      schema: z.string(),
      against: z.string(),
      same: z.boolean(),
      missing: z.array(DefinitionEntry).describe('In `against`, not in `schema`'),
      extra: z.array(DefinitionEntry).describe('In `schema`, not in `against`'),
      different: z.array(
        z.object({ kind: z.string(), name: z.string(), expected: z.string(), actual: z.string() }),
      ),
    }),
    errors: COMPARED,
    handler: async ({ params, query, principal }) => {
      assertComparable(principal, params.schema, query.against);
      return drift(await getDatabase(), params.schema, query.against);
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/drift/{schema}/fix',
    summary:
      'The SQL that brings a schema back in line with its template (or another schema), previewed with its locks: create it as a migration over the schema to apply it',
    access: 'admin',
    permission: 'read',
    params: z.object({ schema: schemaRef }),
    query: AgainstQuery,
    response: z.object({
      schema: z.string(),
      against: z.string(),
      sql: z.string().describe('Empty when nothing differs; else a migration’s SQL, names unqualified'),
      statements: z.array(
        z.object({
          sql: z.string(),
          kind: z.string(),
          locks: z.array(z.object({ table: z.string(), level: z.string() })),
          mayRewrite: z.boolean(),
        }),
      ),
      destructive: z.boolean().describe('It drops a table, column, function, type or sequence'),
      notWritten: z
        .array(z.object({ kind: z.string(), name: z.string(), why: z.string() }))
        .describe('Differences the SQL does not mend, to write by hand'),
    }),
    errors: [
      {
        status: 400,
        why: 'the SQL written would not run as a migration (it names another schema, say): the message says which statement',
      },
      ...COMPARED,
    ],
    handler: async ({ params, query, principal }) => {
      assertComparable(principal, params.schema, query.against);
      return driftFix(await getDatabase(), params.schema, query.against);
    },
  }),
];

const tenantRoutes = [
  defineRoute({
    method: 'GET',
    path: '/api/tenants',
    summary:
      'Every tenant schema side by side: size, tables, rows, its roles’ connections and running statements',
    access: 'admin',
    permission: 'read',
    query: z.strictObject({
      sort: z
        .enum(TENANT_SORTS, { message: `sort must be one of ${TENANT_SORTS.join(', ')}` })
        .default('size')
        .meta({ description: 'size, connections, active (time in running statements), or name' }),
      limit: queryInt('limit', 1, 10_000).default(1000),
    }),
    response: z.object({ tenants: z.array(z.object(Figures)) }),
    // A person scoped to some schemas sees those tenants alone.
    handler: async ({ query, principal }) =>
      listTenants(await getDatabase(), {
        ...query,
        within: principal?.kind === 'person' ? principal.schemas : null,
      }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/tenants/{schema}',
    summary:
      'One tenant: its figures, its sessions (statement, wait, locks held, blocked by), the sessions it blocks, its keys',
    access: 'admin',
    permission: 'read',
    params: z.object({ schema: schemaRef }),
    response: z.object({
      ...Figures,
      sessions: z.array(
        z.object({
          pid: z.number(),
          backendStart: z
            .string()
            .meta({ description: 'when the session began: with pid, what cancel and terminate name' }),
          queryStart: z.string().nullable(),
          role: z.string(),
          application: z.string().nullable(),
          state: z.string().nullable(),
          transactionSeconds: z.number().nullable(),
          querySeconds: z.number().nullable().meta({ description: 'how long its running statement has run' }),
          wait: z.string().nullable().meta({ description: 'what it waits for (wait event type: event)' }),
          query: z.string().nullable().meta({
            description:
              'the first 200 characters of its statement (the running one, else the last); null when poolReset',
          }),
          poolReset: z.boolean().meta({
            description:
              'one of the service’s pooled sessions, idle since the reset it gets after each request (CLOSE ALL; ...): its statement is ours, not the tenant’s, and is not shown',
          }),
          blockedBy: z.array(z.number()),
          locks: z.array(Lock).meta({ description: 'the table locks it holds' }),
        }),
      ),
      blocking: z
        .array(z.object({ pid: z.number(), role: z.string(), blockedBy: z.array(z.number()) }))
        .meta({ description: 'other sessions waiting for one of its sessions' }),
      keys: z.array(
        z.object({
          name: z.string(),
          type: z.string(),
          active: z.boolean(),
          lastUsedAt: z.string().nullable(),
          requests: z.number().meta({
            description:
              'requests it made, written at most once a minute per container: a floor, not an audit',
          }),
        }),
      ),
    }),
    errors: [NO_SCHEMA],
    // Its keys' names only to those who may list keys.
    handler: async ({ params, principal }) => {
      const tenant = await describeTenant(await getDatabase(), params.schema);
      if (principal?.kind !== 'person' || granted(principal, 'keys.read')) return tenant;
      return { ...tenant, keys: [] };
    },
  }),
  defineRoute({
    method: 'PUT',
    path: '/api/tenants/{schema}/quota',
    audit: { action: 'tenant.quota', target: ({ params }) => `schema ${params.schema}` },
    summary:
      'Set a tenant’s quotas: statement timeout of its roles, connection limit of its login, storage (over it, writes that add data answer 507)',
    access: 'admin',
    permission: 'tenants.manage',
    params: z.object({ schema: schemaRef }),
    body: QuotaBody,
    response: Quota,
    errors: [NO_SCHEMA],
    handler: async ({ params, body, audit }) => setQuota(await getDatabase(), params.schema, body, audit),
  }),
  ...(['cancel', 'terminate'] as const).map((how) =>
    defineRoute({
      method: 'POST',
      path: `/api/tenants/{schema}/sessions/{pid}/${how}`,
      audit: { action: `session.${how}`, target: ({ params }) => `pid ${params.pid}` },
      summary:
        how === 'cancel'
          ? 'Cancel the statement one of the tenant’s sessions runs (pg_cancel_backend)'
          : 'End one of the tenant’s own logins (pg_terminate_backend); never the service’s own sessions',
      access: 'admin',
      permission: 'tenants.manage',
      params: SessionPath,
      body: SessionBody,
      response: Stopped,
      errors: [NO_SESSION, NOT_ENDED, NOT_NOW],
      handler: async ({ params, body }) =>
        stopTenantSession(await getDatabase(), params.schema, { pid: params.pid, ...body }, how),
    }),
  ),
];

export const routes = [...tenantRoutes, ...driftRoutes];

export const handler = httpHandler(routes);
