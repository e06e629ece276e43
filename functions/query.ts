import { z } from 'zod';
import { libraryRoutes } from '#functions/sql-library';
import { granted } from '#lib/access';
import { runQuery } from '#lib/admin/query';
import { cancelRunning, runningTag } from '#lib/admin/query-cancel';
import { exportQuery } from '#lib/admin/query-export';
import { querySchema } from '#lib/admin/query-schema';
import { describeSql } from '#lib/admin/sql-fingerprint';
import { keptInHistory } from '#lib/admin/sql-history';
import { getConfig, resultLimits } from '#lib/config';
import { auditing, describeChange } from '#lib/db/audit-log';
import { schemaExists } from '#lib/db/catalog';
import { adminAccess } from '#lib/db/executor';
import { sqlState } from '#lib/db/pg-errors';
import { getDatabase } from '#lib/db/pool';
import { currentQuotas, overStorageQuota, StorageQuotaExceeded } from '#lib/db/quotas';
import { Forbidden } from '#lib/errors';
import { RESPONSE_LIMIT, RESULT_LIMITS, SCHEMA_SESSION } from '#lib/http/answers';
import { toApiError } from '#lib/http/error-mapper';
import { httpHandler } from '#lib/http/handler';
import { assertGranted } from '#lib/http/person-scope';
import { defineRoute } from '#lib/http/route';
import { schemaRef, sqlText } from '#lib/validation';

/** The most of a statement's text an audit entry keeps (AUDIT_SQL_TEXT=on): 16 KiB of it. */
const KEPT_SQL = 16 * 1024;
const keptText = (sql: string) =>
  sql.length <= KEPT_SQL ? sql : `${sql.slice(0, KEPT_SQL)}… (${sql.length} characters in all)`;

const QueryId = z
  .string()
  .regex(/^[A-Za-z0-9_-]{8,64}$/, 'queryId must be 8 to 64 letters, digits, - or _ (a UUID fits)');

const Fields = z.array(z.object({ name: z.string(), dataTypeID: z.number() }));

const StatementResult = z.object({
  command: z.string().nullable().meta({ description: 'PostgreSQL’s command tag: SELECT, INSERT, CREATE, …' }),
  rowCount: z.number().nullable().meta({
    description: 'Rows returned or changed; null when a SELECT was stopped at the rows shown',
  }),
  rows: z.array(z.record(z.string(), z.unknown())),
  fields: Fields,
  truncated: z.boolean().meta({ description: 'It had more rows than are shown' }),
  duration: z.number().nullable().meta({
    description:
      'milliseconds; null for statements sent in one round trip with the next ones (that run’s time is on its last statement)',
  }),
});

const queryRoute = defineRoute({
  method: 'POST',
  path: '/api/query',
  audit: { action: 'sql.run' },
  summary:
    "Run SQL in one transaction as the schema's role (admin: a statement or a script, described by its last result, in the one schema it names when no schema is sent; API keys: one statement, read-only for anon). runAs admin: the admin's own rights.",
  access: 'read',
  body: z.strictObject({
    sql: sqlText,
    schema: schemaRef.optional().meta({
      description:
        "Schema to run in, first on the search path. Left out: an API key's own schema; for the admin, the one schema the SQL names (read with PostgreSQL's parser; pg_catalog, information_schema and pg_toast do not count), public when it names none, 400 when it names several; with runAs admin, public.",
      example: 'shop',
    }),
    runAs: z.enum(['schema', 'admin'], { message: 'runAs must be schema or admin' }).default('schema').meta({
      description:
        "schema (default): as the schema's own role, so code planted there runs with the schema's rights only; admin: with the service's own database rights (admin credentials only)",
    }),
    queryId: QueryId.optional().meta({
      description:
        'An id of your choosing (a UUID) for this statement while it runs: POST /api/query/cancel with it cancels it. Only who sent it can.',
      example: '8f0c6f8e-2d0b-4f7e-9c7b-1f6a3c2d9e10',
    }),
    explain: z.enum(['plan', 'analyze'], { message: 'explain must be plan or analyze' }).optional().meta({
      description:
        'The one statement’s plan instead of its rows, in `plan` (EXPLAIN (FORMAT JSON)); analyze: run with ANALYZE and BUFFERS. Either way in a transaction that is always rolled back, so an explained DELETE deletes nothing.',
    }),
    history: z.boolean().optional().meta({
      description:
        'true: keep this run in your SQL history (GET /api/sql/history), whether it succeeds or fails: the console’s editor sends it. People and the administrator only; from an API key it is a 403.',
    }),
    maxRows: z
      .number()
      .int('maxRows must be a whole number')
      .min(1, 'maxRows must be at least 1')
      .max(1_000_000, 'maxRows must be at most 1000000')
      .optional()
      .meta({
        description:
          "The SQL editor's answer: every statement's result in `results`, each showing its first maxRows rows (at most QUERY_MAX_ROWS, and QUERY_MAX_BYTES of JSON in all) and `truncated` when it had more, instead of 413. A SELECT stops reading at the rows shown (its rowCount is then null); any other statement runs to its end. Left out: one result, the last statement's, refused past the limits.",
        example: 1000,
      }),
  }),
  response: z.object({
    rows: z
      .array(z.record(z.string(), z.unknown()))
      .optional()
      .meta({ description: 'The last statement’s rows; left out with maxRows or explain (see results)' }),
    fields: Fields.optional(),
    rowCount: z.number(),
    duration: z.number().meta({ description: 'milliseconds' }),
    schema: z.string().meta({ description: 'The schema it ran in (first on the search path).' }),
    results: z
      .array(StatementResult)
      .optional()
      .meta({ description: 'With maxRows: each statement’s result, in order.' }),
    plan: z
      .unknown()
      .optional()
      .meta({ description: 'With explain: PostgreSQL’s plan, EXPLAIN (FORMAT JSON)’s' }),
    truncated: z
      .boolean()
      .optional()
      .meta({ description: 'With maxRows: the last statement had more rows than are shown.' }),
  }),
  errors: [
    ...SCHEMA_SESSION,
    {
      status: 400,
      why: 'the admin’s SQL without schema names several schemas (the message names them), or a system schema',
    },
    { status: 403, why: 'runAs admin with an API key, or by a person whose role lacks sql.admin' },
    RESULT_LIMITS,
    RESPONSE_LIMIT,
    { status: 507, why: 'a key’s statement writes while its schema is over its storage quota' },
  ],
  handler: async ({ body, signal, principal, audit, accessTo }) => {
    const asKey = principal?.kind === 'key';
    if (asKey && body.runAs === 'admin')
      throw new Forbidden('API keys cannot run SQL with the admin’s rights');
    const adminRights = body.runAs === 'admin';
    if (adminRights) assertGranted(principal, 'sql.admin');
    const schema = await querySchema({
      sql: body.sql,
      schema: body.schema,
      principal,
      adminRights,
      exists: async (name) => schemaExists(await getDatabase(), name),
    });
    const config = await getConfig();
    if (auditing(audit)) {
      const { kind, fingerprint } = await describeSql(body.sql);
      describeChange(audit, {
        schema,
        sqlKind: kind,
        sqlFingerprint: fingerprint,
        ...(config.AUDIT_SQL_TEXT === 'on' ? { sqlText: keptText(body.sql) } : {}),
      });
    }
    const access = adminRights ? await adminAccess(schema, signal, audit) : await accessTo(schema);
    // A person who may not delete schemas runs as the schema's _exec role all the same (a member
    // of its owner): one statement, and the schema checked still there before our COMMIT.
    const keepSchema = principal?.kind === 'person' && !adminRights && !granted(principal, 'schemas.delete');
    // Over its storage quota, a key's SQL may read but not write (the admin's is the way out).
    const over = asKey ? overStorageQuota((await currentQuotas(access.catalog)).get(schema)) : undefined;
    const run = () =>
      runQuery(access, {
        sql: body.sql,
        schema,
        timeoutMs: access.timeoutMs,
        limits: resultLimits(config),
        // A read-only access (an anon key, a person who may not write) sends one statement, as a key
        // does: a script could end the read-only transaction it runs in and begin another.
        asKey: asKey || access.readOnly || keepSchema,
        keepSchema,
        adminRights,
        readOnly: over !== undefined,
        maxRows: body.maxRows,
        explain: body.explain,
        tag:
          body.queryId === undefined ? undefined : runningTag(config.DBADMIN_SECRET, principal, body.queryId),
      }).catch((error: unknown) => {
        if (over && sqlState(error) === '25006') throw new StorageQuotaExceeded(schema, over);
        throw error;
      });
    const result = body.history
      ? await keptInHistory(await getDatabase(), principal, { schema, sql: body.sql }, run, toldAs)
      : await run();
    return { ...result, schema };
  },
});

/** A failure in the words its answer used (a 5xx's are generic), as the history keeps it. */
function toldAs(error: unknown): string {
  const told = toApiError(error);
  return `${told.title}: ${told.message}`;
}

const cancelRoute = defineRoute({
  method: 'POST',
  path: '/api/query/cancel',
  audit: { action: 'sql.cancel' },
  summary:
    'Cancel your statement that is running under the queryId you sent with it (PostgreSQL’s own cancel): its POST /api/query answers 400 Query cancelled and rolls back.',
  access: 'read',
  body: z.strictObject({
    queryId: QueryId,
    schema: schemaRef.optional().meta({
      description: 'Not needed: for an API key, its own schema (another is 403), as on every route.',
    }),
  }),
  response: z.object({
    cancelled: z.boolean().meta({ description: 'Whether a statement of yours was running under it' }),
    message: z.string(),
  }),
  errors: [],
  handler: async ({ body, principal }) => {
    const [db, { DBADMIN_SECRET }] = await Promise.all([getDatabase(), getConfig()]);
    const cancelled = await cancelRunning(db, runningTag(DBADMIN_SECRET, principal, body.queryId));
    return {
      cancelled,
      message: cancelled
        ? `statement ${body.queryId} is cancelled`
        : `no statement of yours is running under ${body.queryId} (it may have ended)`,
    };
  },
});

const exportRoute = defineRoute({
  method: 'POST',
  path: '/api/query/export',
  // A read, like the table's export (GET): it changes nothing, so it leaves no entry.
  audit: false,
  summary:
    'One query’s rows as a CSV or JSON file, as the schema’s role in a read-only transaction that is always rolled back; a page of QUERY_MAX_ROWS rows at most, offset for the next',
  access: 'read',
  body: z.strictObject({
    sql: sqlText,
    schema: schemaRef.optional().meta({
      description:
        'Schema to run in; left out: an API key’s own, else the one schema the SQL names, as POST /api/query',
    }),
    format: z.enum(['csv', 'json'], { message: 'format must be csv or json' }).default('csv'),
    offset: z
      .number()
      .int('offset must be a whole number')
      .min(0, 'offset must be 0 or more')
      .max(1_000_000_000)
      .default(0),
    header: z
      .boolean()
      .default(true)
      .meta({ description: 'CSV: the header line; false for the pages after the first' }),
  }),
  response: z.object({
    count: z.number(),
    nextOffset: z.number().optional().meta({
      description: 'a full page: more rows may follow from this offset (CSV: the X-Next-Offset header)',
    }),
    data: z.array(z.record(z.string(), z.unknown())),
  }),
  alsoProduces: 'text/csv',
  errors: [
    ...SCHEMA_SESSION,
    { status: 400, why: 'not exactly one query (a SELECT, VALUES or TABLE), or an SQL error' },
    RESULT_LIMITS,
  ],
  handler: async ({ body, principal, accessTo }) => {
    const schema = await querySchema({
      sql: body.sql,
      schema: body.schema,
      principal,
      adminRights: false,
      exists: async (name) => schemaExists(await getDatabase(), name),
    });
    const access = await accessTo(schema);
    return exportQuery(access, resultLimits(await getConfig()), { ...body, timeoutMs: access.timeoutMs });
  },
});

export const routes = [queryRoute, cancelRoute, exportRoute, ...libraryRoutes];

export const handler = httpHandler(routes);
