import { z } from 'zod';
import { LOCK_LEVELS } from '#lib/admin/schema-change';
import {
  createMigration,
  listMigrations,
  migrationProgress,
  previewMigration,
  retryMigration,
  runMigration,
  SCHEMA_STATES,
} from '#lib/admin/tenant-migrations';
import { getDatabase } from '#lib/db/pool';
import { NO_SCHEMA } from '#lib/http/answers';
import { defineRoute } from '#lib/http/route';
import type { Principal } from '#lib/principal';
import { queryInt, schemaRef } from '#lib/validation';

/**
 * Migrations across tenant schemas (lib/admin/tenant-migrations), served by the schemas function:
 * preview, create, run in slices, read progress, retry the failed.
 */

const Target = z
  .union([
    z.strictObject({ schemas: z.array(schemaRef).min(1).max(100_000) }),
    z.strictObject({ template: schemaRef }),
    z.strictObject({ all: z.literal(true) }),
  ])
  .describe(
    'The schemas to change: a list; a template and every schema cloned from it; or every tenant schema ({"all": true})',
  );

const MigrationBody = z.strictObject({
  name: z
    .string()
    .min(1)
    .max(200)
    .regex(/^[\w.:-]+$/, 'name may hold letters, digits and _ . : - only')
    .describe('Unique: a schema where a migration of this name was applied skips it'),
  sql: z.string().min(1).max(1_000_000).describe('One statement or several, names unqualified'),
  target: Target,
  runAs: z
    .literal('schema', {
      message:
        "runAs must be schema: a migration runs as each schema's own role. With the service's rights, a tenant could put its own function or trigger in the migration's path (USAGE granted to PUBLIC, a name that shadows), and it would run as the service; change the service's own objects with POST /api/query and runAs admin",
    })
    .default('schema')
    .describe("Each schema's own role: the only way a migration runs"),
  lockTimeoutMs: z
    .number()
    .int()
    .min(100)
    .max(60_000)
    .default(2_000)
    .describe('How long each schema waits for a lock'),
  concurrency: z.number().int().min(1).max(32).default(4).describe('Schemas changed at a time'),
});

const Counts = z.object(Object.fromEntries(SCHEMA_STATES.map((state) => [state, z.number().int()])));

const Statement = z.object({
  sql: z.string(),
  kind: z.string(),
  locks: z.array(z.object({ table: z.string(), level: z.enum(LOCK_LEVELS) })),
  mayRewrite: z.boolean(),
});

const SchemaEntry = z.object({
  schema: z.string(),
  state: z.enum(SCHEMA_STATES),
  reason: z
    .string()
    .nullable()
    .optional()
    .describe("PostgreSQL's error for a failed schema; why one was skipped"),
  sqlstate: z.string().nullable().optional(),
  attempts: z.number().int().optional(),
  startedAt: z.string().nullable().optional(),
  finishedAt: z.string().nullable().optional(),
});

const Progress = z.object({
  id: z.string(),
  name: z.string(),
  sql: z.string(),
  runAs: z.literal('schema'),
  lockTimeoutMs: z.number().int(),
  concurrency: z.number().int(),
  target: z.unknown(),
  createdBy: z.string().nullable(),
  createdAt: z.string(),
  counts: Counts,
  done: z.boolean().describe('No schema pending or running'),
  schemasPerSecond: z.number().nullable(),
  schemas: z.array(SchemaEntry).describe('A page of the schemas, by name'),
  nextAfter: z.string().nullable().describe('Pass as `after` for the next page'),
});

const NO_MIGRATION = { status: 404 as const, why: 'no migration of this id' };
const migrationId = z.object({ id: z.string().regex(/^\d{1,18}$/, 'id must be a migration id (digits)') });

const by = (principal: Principal | undefined) =>
  principal?.kind === 'person' ? principal.login : principal?.kind === 'admin' ? 'admin' : undefined;

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/migrations',
    summary: 'List migrations across tenant schemas, newest first, with their counts',
    access: 'admin',
    permission: 'migrations',
    response: z.array(
      z.object({
        id: z.string(),
        name: z.string(),
        runAs: z.string(),
        createdBy: z.string().nullable(),
        createdAt: z.string(),
        counts: Counts,
      }),
    ),
    handler: async () => listMigrations(await getDatabase()),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/migrations/preview',
    audit: false,
    summary: "A migration's dry run: its statements with the lock each takes, and what each schema would get",
    access: 'admin',
    permission: 'migrations',
    body: MigrationBody,
    response: z.object({
      dryRun: z.literal(true),
      name: z.string(),
      runAs: z.string(),
      statements: z.array(Statement),
      counts: Counts,
      schemas: z.array(SchemaEntry),
    }),
    errors: [NO_SCHEMA],
    handler: async ({ body }) => previewMigration(await getDatabase(), body),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/migrations',
    audit: { action: 'migration.create', target: ({ body }) => `migration ${body.name}` },
    summary: 'Record a migration and the schemas it reaches (run it with POST /api/migrations/{id}/run)',
    access: 'admin',
    permission: 'migrations',
    body: MigrationBody,
    response: Progress,
    status: 201,
    errors: [NO_SCHEMA, { status: 409, why: 'a migration of this name exists' }],
    handler: async ({ body, principal, audit }) =>
      createMigration(await getDatabase(), body, by(principal), audit),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/migrations/{id}',
    summary:
      "A migration's progress: counts, rate, and its schemas a page at a time (failed ones with their error)",
    access: 'admin',
    permission: 'migrations',
    params: migrationId,
    query: z.strictObject({
      state: z.enum(SCHEMA_STATES).optional(),
      after: schemaRef.optional(),
      limit: queryInt('limit', 1, 1000).default(100),
    }),
    response: Progress,
    errors: [NO_MIGRATION],
    handler: async ({ params, query }) => migrationProgress(await getDatabase(), params.id, query),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/migrations/{id}/run',
    audit: { action: 'migration.run', target: ({ params }) => `migration ${params.id}` },
    summary:
      'Run a slice of the migration: schemas changed until budgetMs is spent, each in its own transaction; call again until done',
    access: 'admin',
    permission: 'migrations',
    params: migrationId,
    body: z.strictObject({
      budgetMs: z
        .number()
        .int()
        .min(100)
        .max(25_000)
        .default(10_000)
        .describe('How long this call starts schemas for'),
    }),
    response: Progress,
    errors: [NO_MIGRATION],
    handler: async ({ params, body, accessTo, signal }) =>
      runMigration(await getDatabase(), params.id, {
        budgetMs: body.budgetMs,
        signal,
        schemaAccess: accessTo,
      }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/migrations/{id}/retry',
    audit: { action: 'migration.retry', target: ({ params }) => `migration ${params.id}` },
    summary: 'Make failed schemas pending again (all, or those named), for the next run',
    access: 'admin',
    permission: 'migrations',
    params: migrationId,
    body: z.strictObject({ schemas: z.array(schemaRef).min(1).optional() }),
    response: Progress,
    errors: [NO_MIGRATION],
    handler: async ({ params, body, audit }) =>
      retryMigration(await getDatabase(), params.id, body.schemas, audit),
  }),
];
