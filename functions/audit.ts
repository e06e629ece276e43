import { z } from 'zod';
import { granted } from '#lib/access';
import { listAudit } from '#lib/admin/audit';
import { drainedLog } from '#lib/http/audit';
import { httpHandler } from '#lib/http/handler';
import { defineRoute } from '#lib/http/route';
import { queryInt, schemaRef } from '#lib/validation';

/**
 * The audit log (lib/db/audit-log writes it, lib/admin/audit reads it), for the admin and people
 * with audit.read (those scoped to some schemas see entries about them alone): what every request
 * that changed something did, and who asked, newest first.
 */

const when = (label: string) =>
  z.iso
    .datetime({ offset: true, message: `${label} must be an ISO 8601 time, e.g. 2026-11-26T00:00:00Z` })
    .transform((value) => new Date(value));

const Entry = z.object({
  seq: z.number().meta({ description: 'the order entries were written in; `before` pages by it' }),
  id: z.string(),
  at: z.iso.datetime().meta({ description: 'when the change was written (the database’s clock)' }),
  requestId: z.string().meta({ description: 'the x-request-id its answer carried' }),
  actor: z.enum(['admin', 'person', 'key', 'public']),
  keyId: z.number().nullable(),
  keyName: z.string().nullable(),
  keyType: z.string().nullable(),
  personId: z.number().nullable().meta({ description: 'the person who asked (actor person)' }),
  personLogin: z.string().nullable().meta({ description: 'their login when they asked' }),
  via: z
    .string()
    .nullable()
    .meta({ description: 'how the person signed in: password, sso, or token (a personal token)' }),
  schema: z.string().nullable(),
  action: z.string().meta({ description: 'what it did: row.insert, table.create, sql.run, ...' }),
  target: z.string().nullable().meta({ description: 'what it changed, by name; never a row’s values' }),
  status: z.number().meta({ description: 'the HTTP status it answered' }),
  rows: z
    .number()
    .nullable()
    .meta({ description: 'rows it inserted, changed or deleted, where it counts them' }),
  sqlKind: z.string().nullable().meta({ description: 'ad-hoc SQL: its statements’ kinds' }),
  sqlFingerprint: z
    .string()
    .nullable()
    .meta({ description: 'ad-hoc SQL: the same statement with other values has the same fingerprint' }),
  sqlText: z.string().nullable().meta({ description: 'ad-hoc SQL: its text, only with AUDIT_SQL_TEXT=on' }),
});

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/audit',
    summary: 'The audit log: every change made through the API, newest first, with filters and paging',
    access: 'admin',
    permission: 'audit.read',
    query: z.strictObject({
      from: when('from').optional().meta({ description: 'entries at or after this time' }),
      to: when('to').optional().meta({ description: 'entries before this time' }),
      schema: schemaRef.optional(),
      actor: z
        .enum(['admin', 'person', 'key', 'public'], { message: 'actor must be admin, person, key or public' })
        .optional(),
      keyId: queryInt('keyId', 1, 2_147_483_647).optional(),
      personId: queryInt('personId', 1, 2_147_483_647)
        .optional()
        .meta({ description: 'one person’s entries' }),
      action: z
        .string()
        .regex(/^[a-z_]+(\.[a-z_]+)?$/, 'action is an action (row.insert) or a family of them (row)')
        .optional(),
      before: queryInt('before', 1, Number.MAX_SAFE_INTEGER)
        .optional()
        .meta({ description: 'the nextCursor of the page before: entries older than it' }),
      limit: queryInt('limit', 1, 1000).default(100),
    }),
    response: z.object({ entries: z.array(Entry), nextCursor: z.string().nullable() }),
    // A person scoped to some schemas sees the entries about those alone; SQL text (AUDIT_SQL_TEXT)
    // only those who may run SQL with the service's rights, whose statements it may show.
    handler: async ({ query, principal }) => {
      const found = await listAudit(await drainedLog(), {
        ...query,
        schemas: principal?.kind === 'person' ? (principal.schemas ?? undefined) : undefined,
      });
      if (principal?.kind !== 'person' || granted(principal, 'sql.admin')) return found;
      return { ...found, entries: found.entries.map((entry) => ({ ...entry, sqlText: null })) };
    },
  }),
];

export const handler = httpHandler(routes);
