import { z } from 'zod';
import {
  BUNDLE_PARTS_MAX,
  backupManifest,
  backupPart,
  backupSchema,
  bundleLimits,
  deleteBackup,
  listBackups,
} from '#lib/admin/bundle';
import { PART_BYTES } from '#lib/admin/bundle-format';
import {
  abandonRestore,
  commitRestore,
  openRestore,
  putRestorePart,
  type RestoreScope,
  restoreStatus,
} from '#lib/admin/restore';
import { getConfig } from '#lib/config';
import { getDatabase } from '#lib/db/pool';
import { NO_SCHEMA, SCHEMA_SESSION } from '#lib/http/answers';
import { defineRoute, type RouteInput } from '#lib/http/route';
import { inSchema, Outcome, queryInt, schemaPassword, schemaRef } from '#lib/validation';

/**
 * A tenant's own backup and restore (lib/admin/bundle, lib/admin/restore), served by the schemas
 * function: a backup made in one snapshot and downloaded in parts; a restore opened with its
 * manifest, sent in parts, committed all or nothing, into a new schema or over the schema's rows.
 */

const limits = async () => bundleLimits(await getConfig());

const BackupSummary = z.object({
  id: z.string(),
  schema: z.string(),
  state: z.enum(['writing', 'ready']),
  createdAt: z.string(),
  expiresAt: z.string().describe('Unread past this (IMPORT_SESSION_TTL_SECONDS), it is deleted'),
  tables: z.number().int().optional(),
  rows: z.number().int().optional(),
  bytes: z.number().int().optional(),
  parts: z.number().int().optional().describe('Download parts 1 to this'),
});

const Manifest = z
  .object({
    format: z.literal('dbadmin-bundle'),
    version: z.number().int(),
    id: z.string(),
    schema: z.string(),
    createdAt: z.string(),
    postgres: z.number().int(),
    fingerprint: z.string(),
    selfNamed: z.array(z.string()),
    header: z.number().int(),
    tables: z.array(z.object({ table: z.string(), rows: z.number().int(), bytes: z.number().int() })),
    rows: z.number().int(),
    bytes: z.number().int(),
    sha256: z.string(),
    parts: z.array(z.object({ bytes: z.number().int(), sha256: z.string() })),
    mac: z.string(),
  })
  .describe(
    'What a bundle holds and each part’s SHA-256, signed by the service (HMAC under DBADMIN_SECRET): restore it as it is',
  );

const backupId = z.object({ backupId: z.uuid('a backup id is a UUID, as POST /api/backups answered') });
const restoreId = z.object({ restoreId: z.uuid('a restore id is a UUID, as POST /api/restores answered') });
const part = queryInt('part', 1, BUNDLE_PARTS_MAX);
const NO_BACKUP = {
  status: 404 as const,
  why: 'no such backup of the schema (expired, deleted, or never made)',
};
const NO_RESTORE = {
  status: 404 as const,
  why: 'no such restore of the caller’s into the schema (expired or never opened)',
};
const BUNDLE_REFUSED = {
  status: 400 as const,
  why: 'the manifest or a part is not the bundle the service made (edited, damaged, or signed under another DBADMIN_SECRET)',
};

const RestoreOutcome = z.object({
  schema: z.string(),
  mode: z.enum(['new', 'replace']),
  from: z.string().describe('The schema the bundle was made from'),
  tables: z.number().int(),
  rows: z.number().int(),
});

const restoreScope = (
  schema: string,
  { principal, audit }: Pick<RouteInput<unknown, unknown, unknown>, 'principal' | 'audit'>,
): RestoreScope => ({
  schema,
  principal,
  audit,
});

export const routes = [
  defineRoute({
    method: 'POST',
    path: '/api/backups',
    audit: { action: 'backup.create', target: ({ query }) => `schema ${query.schema}` },
    summary: `Back up a schema: its structure and rows in one snapshot, kept as a bundle to download in parts of at most ${PART_BYTES} bytes`,
    access: 'write',
    permission: 'backups',
    query: z.strictObject({ schema: inSchema }),
    response: BackupSummary,
    status: 201,
    errors: [
      ...SCHEMA_SESSION,
      {
        status: 400,
        why: 'the schema holds what a bundle cannot carry (named), or code that names its own schema',
      },
      { status: 409, why: 'the schema keeps 4 backups already, or its tenant holds a lock' },
      { status: 413, why: 'the bundle would pass IMPORT_MAX_BYTES' },
    ],
    handler: async ({ query, principal, audit, accessTo }) =>
      backupSchema(
        await getDatabase(),
        (await getConfig()).DBADMIN_SECRET,
        await accessTo(query.schema),
        principal,
        audit,
        await limits(),
      ),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/backups',
    summary: 'The schema’s backups kept, newest first',
    access: 'write',
    permission: 'backups',
    query: z.strictObject({ schema: inSchema }),
    response: z.array(BackupSummary),
    handler: async ({ query }) => listBackups(await getDatabase(), query.schema),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/backups/{backupId}',
    summary: 'A backup’s manifest: its tables, parts and their checksums, signed; open a restore with it',
    access: 'write',
    permission: 'backups',
    params: backupId,
    query: z.strictObject({ schema: inSchema }),
    response: Manifest,
    errors: [NO_BACKUP, { status: 409, why: 'the backup is still being made' }],
    handler: async ({ params, query }) => backupManifest(await getDatabase(), query.schema, params.backupId),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/backups/{backupId}/parts/{part}',
    summary: 'Part n of a backup (from 1): bytes of its compressed stream, to keep as they are',
    access: 'write',
    permission: 'backups',
    params: backupId.extend({ part }),
    query: z.strictObject({ schema: inSchema }),
    response: z.string(),
    alsoProduces: 'application/octet-stream',
    errors: [NO_BACKUP, { status: 409, why: 'the backup is still being made' }],
    handler: async ({ params, query }) =>
      backupPart(await getDatabase(), query.schema, params.backupId, params.part),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/backups/{backupId}',
    audit: { action: 'backup.delete', target: ({ params }) => `backup ${params.backupId}` },
    summary: 'Delete a backup and its parts',
    access: 'write',
    permission: 'backups',
    params: backupId,
    query: z.strictObject({ schema: inSchema }),
    response: Outcome,
    errors: [NO_BACKUP],
    handler: async ({ params, query, audit }) =>
      deleteBackup(await getDatabase(), query.schema, params.backupId, audit),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/restores',
    audit: { action: 'restore.open', target: ({ body }) => `schema ${body.schema}` },
    summary:
      'Open a restore of a bundle: into a new schema ("new": people who may create schemas) or over the rows of a schema shaped as the bundle’s source ("replace")',
    access: 'write',
    permission: 'backups',
    body: z.strictObject({
      schema: schemaRef.describe('The schema to restore into: a new name ("new"), or the schema to replace'),
      mode: z.enum(['new', 'replace']).describe('"new": a new schema; "replace": replace this schema’s rows'),
      manifest: z.unknown().describe('The backup’s manifest, as GET /api/backups/{backupId} gave it'),
    }),
    response: z.object({
      id: z.string(),
      schema: z.string(),
      mode: z.enum(['new', 'replace']),
      from: z.string(),
      parts: z.number().int().describe('Send parts 1 to this'),
      expiresAt: z.string(),
    }),
    status: 201,
    errors: [
      BUNDLE_REFUSED,
      { status: 403, why: '"new" by an API key, or by a person who may not create schemas' },
      NO_SCHEMA,
      {
        status: 409,
        why: '"new" into a schema that exists, "replace" of a schema no longer shaped as the bundle’s or with a table forcing row-level security, or a bundle made on a later PostgreSQL major',
      },
      { status: 413, why: 'the bundle is larger than IMPORT_MAX_BYTES' },
    ],
    handler: async ({ body, ...request }) => {
      const { DBADMIN_SECRET } = await getConfig();
      return openRestore(
        await getDatabase(),
        DBADMIN_SECRET,
        restoreScope(body.schema, request),
        { manifest: body.manifest, mode: body.mode },
        await limits(),
      );
    },
  }),
  defineRoute({
    method: 'PUT',
    path: '/api/restores/{restoreId}/parts/{part}',
    audit: {
      action: 'restore.part',
      target: ({ params }) => `restore ${params.restoreId} part ${params.part}`,
    },
    addsData: true,
    summary:
      'Send part n of the bundle (from 1), exactly as downloaded, beside others if you like; sent again, it replaces itself',
    access: 'write',
    permission: 'backups',
    params: restoreId.extend({ part }),
    query: z.strictObject({ schema: inSchema }),
    upload: {
      types: ['application/octet-stream'],
      maxBytes: PART_BYTES,
      tooLarge: ': send the parts as the backup cut them',
    },
    response: z.object({
      part: z.number().int(),
      bytes: z.number().int(),
      received: z.number().int(),
      missing: z.array(z.number().int()),
    }),
    errors: [
      BUNDLE_REFUSED,
      NO_RESTORE,
      { status: 409, why: 'the restore was committed, or is being committed or abandoned' },
    ],
    handler: async ({ params, query, upload, ...request }) =>
      putRestorePart(
        await getDatabase(),
        params.restoreId,
        restoreScope(query.schema, request),
        params.part,
        (upload as NonNullable<typeof upload>).bytes,
        await limits(),
      ),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/restores/{restoreId}',
    summary: 'A restore’s state: the parts received and missing, and its outcome once committed',
    access: 'write',
    permission: 'backups',
    params: restoreId,
    query: z.strictObject({ schema: inSchema }),
    response: z.object({
      id: z.string(),
      schema: z.string(),
      mode: z.enum(['new', 'replace']),
      from: z.string(),
      state: z.enum(['open', 'restored']),
      parts: z.number().int(),
      received: z.number().int(),
      missing: z.array(z.number().int()),
      expiresAt: z.string(),
      outcome: RestoreOutcome.optional(),
    }),
    errors: [NO_RESTORE],
    handler: async ({ params, query, ...request }) =>
      restoreStatus(await getDatabase(), params.restoreId, restoreScope(query.schema, request)),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/restores/{restoreId}',
    audit: { action: 'restore.abandon', target: ({ params }) => `restore ${params.restoreId}` },
    summary: 'Abandon an open restore; its parts are deleted',
    access: 'write',
    permission: 'backups',
    params: restoreId,
    query: z.strictObject({ schema: inSchema }),
    response: Outcome,
    errors: [
      NO_RESTORE,
      { status: 409, why: 'the restore was committed, or is being committed, or a part of it sent' },
    ],
    handler: async ({ params, query, ...request }) =>
      abandonRestore(await getDatabase(), params.restoreId, restoreScope(query.schema, request)),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/restores/{restoreId}/commit',
    audit: { action: 'restore.commit', target: ({ body }) => `schema ${body.schema}` },
    addsData: true,
    summary:
      'Restore the bundle, all or nothing, as the schema’s own role; sent again once done, the same answer',
    access: 'write',
    permission: 'backups',
    params: restoreId,
    body: z.strictObject({
      schema: schemaRef,
      password: schemaPassword.optional().describe('With "new": the new schema’s login password'),
    }),
    response: RestoreOutcome,
    errors: [
      {
        status: 400,
        why: 'a new schema without its password, or parts that are not the bundle the manifest describes',
      },
      {
        status: 404,
        why: 'no such restore of the caller’s into the schema (expired or never opened), or its schema is gone',
      },
      {
        status: 409,
        why: 'parts missing, the restore being committed or a part of it sent, a lock, a change of structure or forced row-level security in the schema, or the new schema created meanwhile',
      },
    ],
    handler: async ({ params, body, accessTo, ...request }) => {
      const { DBADMIN_SECRET } = await getConfig();
      return commitRestore(
        await getDatabase(),
        DBADMIN_SECRET,
        params.restoreId,
        restoreScope(body.schema, request),
        { password: body.password },
        accessTo,
      );
    },
  }),
];
