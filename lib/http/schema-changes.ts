import type pg from 'pg';
import { z } from 'zod';
import { type Change, LOCK_LEVELS, runChange } from '#lib/admin/schema-change';
import { getConfig } from '#lib/config';
import type { Answer } from '#lib/http/answers';
import type { RouteInput } from '#lib/http/route';
import type { Principal } from '#lib/principal';

/**
 * What every schema-change route shares (lib/admin/schema-change): its answer, its 409, and the
 * options a request runs it with.
 */

const Blocker = z.object({
  pid: z.number(),
  role: z.string(),
  state: z.string().nullable(),
  transactionSeconds: z.number().nullable(),
  lock: z.string(),
  query: z.string().optional().meta({ description: 'the start of its statement; for the admin only' }),
});

/** A schema change's answer: what it did, or with dryRun what it would do and what it would wait for. */
export const SchemaChangeAnswer = z.union([
  z.object({ success: z.boolean(), message: z.string(), sql: z.array(z.string()) }),
  z.object({
    dryRun: z.literal(true),
    summary: z.string(),
    sql: z.array(z.string()),
    locks: z.array(z.object({ table: z.string(), level: z.enum(LOCK_LEVELS), blocks: z.string() })),
    rewrites: z.boolean().meta({ description: 'the table is written anew, every row copied' }),
    scans: z.boolean().meta({ description: 'every row is read, to check or to index' }),
    drops: z
      .array(z.object({ what: z.string(), cascade: z.boolean() }))
      .optional()
      .meta({
        description:
          'for a drop: what goes with it, as PostgreSQL names it; cascade marks what only cascade=true drops (without it the drop fails naming them)',
      }),
    needsUsing: z.object({ message: z.string(), using: z.string() }).optional().meta({
      description:
        'for a type change PostgreSQL does not make by itself, sent without using: it would fail; why, and an expression to send as using',
    }),
    tables: z.array(z.object({ table: z.string(), sizeBytes: z.number(), estimatedRows: z.number() })),
    blockers: z.array(Blocker).meta({ description: 'sessions holding a lock the change would wait for' }),
  }),
]);

export const TABLE_LOCKED: Answer = {
  status: 409,
  why: 'another session holds a lock the change needs for longer than SCHEMA_LOCK_TIMEOUT_MS; the answer names it (blockers)',
};

/** dryRun, the lock timeout, and whether blockers' statements are shown (to the admin only). */
const changeOptions = async (dryRun: boolean, principal: Principal | undefined) => ({
  dryRun,
  lockTimeoutMs: (await getConfig()).SCHEMA_LOCK_TIMEOUT_MS,
  showQueries: principal?.kind !== 'key',
});

/**
 * A schema change a route asks for: planned from the catalog (the service's pool), then run, or
 * with dryRun previewed, on a session of the schema's role as the principal may act there.
 */
export async function schemaChange(
  request: Pick<RouteInput<unknown, unknown, unknown>, 'principal' | 'accessTo'> & {
    schema: string;
    dryRun: boolean;
  },
  plan: (catalog: pg.Pool) => Promise<Change>,
) {
  // The route's own access: the request's audit entry commits with the change.
  const access = await request.accessTo(request.schema);
  return runChange(
    access,
    await plan(access.catalog),
    await changeOptions(request.dryRun, request.principal),
  );
}
