import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import pg from 'pg';
import * as imports from '#functions/imports';
import * as keys from '#functions/keys';
import * as meta from '#functions/meta';
import * as people from '#functions/people';
import * as query from '#functions/query';
import * as schemas from '#functions/schemas';
import * as tenants from '#functions/tenants';
import { resetConfig } from '#lib/config';
import { closePool } from '#lib/db/pool';
import { RESPONSE_LIMIT } from '#lib/http/answers';
import { MAX_BODY_BYTES } from '#lib/http/json-body';
import { type AnyRoute, behindLicenseGate, type Method, requiresJsonContentType } from '#lib/http/route';
import { drained } from '#test/support/audit';
import { ADMIN, type Call, call, type Reply } from '#test/support/http';
import { LicensingHarness } from '#test/support/licensing';
import { uniqueName } from '#test/support/names';
import { TestOidcProvider } from '#test/support/oidc-provider';
import { operationOf, ROUTES } from '#test/support/routes';
import { changingSettings } from '#test/support/settings';
import { freshSchema } from '#test/support/tables';

/**
 * The OpenAPI document against the service's real answers: every operation is driven through its
 * handler (and the catch-all's) into each status a test can provoke, and each answer's status,
 * content type, body and headers must be the ones the document lists for that operation.
 */

// The document's types, as far as this test reads them.
type Json = Record<string, unknown>;
interface Response {
  description: string;
  headers?: Record<string, Json>;
  content?: Record<string, { schema: Json }>;
}
interface Operation {
  responses: Record<string, Response | { $ref: string }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
}

const h = new LicensingHarness();
let document: Document & Json;
let schema: string;
let otherSchema: string;
let anonKey: string;
let serviceKey: string;

/** What the suite provoked: `METHOD path status`. */
const exercised = new Set<string>();

// ---------------------------------------------------------------- checking an answer

const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats(ajv);
const compiled = new Map<unknown, ValidateFunction>();

function resolve<T>(value: T | { $ref: string }): T {
  if (!value || typeof value !== 'object' || !('$ref' in value)) return value as T;
  const found = value.$ref
    .replace(/^#\//, '')
    .split('/')
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, part) => (node as Json | undefined)?.[part], document);
  if (found === undefined) throw new Error(`unresolved ${value.$ref}`);
  return resolve(found as T);
}

/** A schema with its references to the document's components put in place, for ajv. */
function inline(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(inline);
  if (!schema || typeof schema !== 'object') return schema;
  const resolved = resolve(schema as Json);
  return Object.fromEntries(Object.entries(resolved).map(([key, value]) => [key, inline(value)]));
}

function validator(schema: Json): ValidateFunction {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(inline(schema) as Json);
    compiled.set(schema, validate);
  }
  return validate;
}

const headerOf = (reply: Reply, name: string) =>
  Object.entries(reply.headers).find(([key]) => key.toLowerCase() === name.toLowerCase())?.[1];

/** Headers worth documenting: a client acts on them. */
const MEANINGFUL_HEADERS = [
  'allow',
  'retry-after',
  'www-authenticate',
  'x-license-status',
  'x-license-warning',
  'content-disposition',
  'set-cookie',
  'location',
];

/** The body against the schema of its content type. */
function bodyDeviations(response: Response, reply: Reply): string[] {
  const type = (headerOf(reply, 'content-type') ?? '').split(';')[0]?.trim() ?? '';
  // A redirect documented with no content, and sent with none.
  if (!response.content && type === '' && reply.text === '') return [];
  const media = response.content?.[type];
  if (!media) return [`content type "${type}" is not documented for ${reply.status}`];
  const validate = validator(media.schema);
  const body = type === 'application/json' ? reply.body : reply.text;
  return validate(body) ? [] : [`body: ${ajv.errorsText(validate.errors)} in ${reply.text.slice(0, 300)}`];
}

/** Required headers that are missing, and headers a client acts on that are not documented. */
function headerDeviations(response: Response, reply: Reply): string[] {
  const documented = Object.entries(response.headers ?? {}).map(([name, header]) => ({
    name: name.toLowerCase(),
    required: resolve(header).required === true,
  }));
  const missing = documented
    .filter(({ name, required }) => required && headerOf(reply, name) === undefined)
    .map(({ name }) => `required header ${name} is missing`);
  const undocumented = Object.keys(reply.headers)
    .map((key) => key.toLowerCase())
    .filter((name) => MEANINGFUL_HEADERS.includes(name) && !documented.some((header) => header.name === name))
    .map((name) => `header ${name} is sent but not documented for ${reply.status}`);
  return [...missing, ...undocumented];
}

/** Everything about the answer that the document does not say; empty when it conforms. */
function deviations(operation: Operation, reply: Reply): string[] {
  const listed = operation.responses[String(reply.status)];
  if (!listed) return [`status ${reply.status} is not listed (${reply.text.slice(0, 200)})`];
  const response = resolve(listed);
  return [...bodyDeviations(response, reply), ...headerDeviations(response, reply)];
}

function operationIn(path: string, method: string): Operation {
  const operation = document.paths[path]?.[method.toLowerCase()];
  if (!operation) throw new Error(`the document has no ${method} ${path}`);
  return operation;
}

function expectDocumented(route: AnyRoute, status: number, reply: Reply): void {
  exercised.add(`${operationOf(route)} ${reply.status}`);
  expect({
    status: reply.status,
    deviations: deviations(operationIn(route.path, route.method), reply),
  }).toEqual({
    status,
    deviations: [],
  });
}

/** Changing operations whose success was seen to write their audit entry. */
const audited = new Set<string>();

/**
 * Changes made outside any transaction of ours (the license's, a session's cancel), whose entry
 * is written once they are made: every other change commits its entry in its own transaction
 * (sealed for it: xact_id set), so a route whose lib call is not handed the request's entry fails
 * here. An index built CONCURRENTLY is the one change that may be either (the samples build none).
 */
const WRITTEN_AFTER = new Set([
  'POST /api/license/activate',
  'POST /api/license/deactivate',
  'POST /api/trial/start',
  'DELETE /api/table/{tableName}/imports/{importId}',
  'POST /api/tenants/{schema}/sessions/{pid}/cancel',
  'POST /api/query/cancel',
  'POST /api/tenants/{schema}/sessions/{pid}/terminate',
  // Each schema's change is a transaction of its own, recorded in the migration's ledger.
  'POST /api/migrations/{id}/run',
]);

/**
 * A success that changed something has exactly its one audit entry, under the request id its
 * answer carried; a dry run, an anon key's SQL and a refusal answered as `{success: false}` none.
 */
async function expectAudited(route: AnyRoute, request: Call, reply: Reply): Promise<void> {
  if (route.method === 'GET' || route.audit === false) return;
  const entries = await drained(
    async (c) =>
      (
        await c.query(
          `SELECT action, xact_id IS NOT NULL AS "withChange" FROM _dbadmin.audit_log WHERE request_id = $1`,
          [reply.headers['x-request-id']],
        )
      ).rows,
  );
  const body = request.body as { dryRun?: unknown } | undefined;
  const preview = request.query?.dryRun === 'true' || body?.dryRun === true;
  const anon = request.headers?.authorization === `Bearer ${anonKey}`;
  if (preview || anon || reply.body?.success === false) {
    expect(entries).toEqual([]);
    return;
  }
  const withChange = !WRITTEN_AFTER.has(operationOf(route));
  expect({ route: operationOf(route), entries }).toEqual({
    route: operationOf(route),
    entries: [{ action: route.audit?.action, withChange }],
  });
  audited.add(operationOf(route));
}

// ---------------------------------------------------------------- requests

/** Path parameters filled with objects the fixtures made. */
function pathOf(route: AnyRoute, values: Record<string, string> = {}): string {
  const defaults: Record<string, string> = {
    schema,
    schemaName: schema,
    tableName: 'items',
    rowId: '1',
    keyId: '1',
    importId: NO_IMPORT,
    part: '1',
    pid: '999999',
    id: '1',
    ...values,
  };
  return route.path.replace(/\{(\w+)\}/g, (_, name: string) => defaults[name] ?? name);
}

const takes = (schema: unknown, field: string) =>
  !!schema && typeof schema === 'object' && 'shape' in schema && field in (schema.shape as object);

/** A request that gets past routing to the chain: the right path, a body when one is taken. */
function sample(route: AnyRoute, inSchema = schema): Call {
  return {
    method: route.method,
    path: pathOf(route),
    ...(takes(route.query, 'schema') ? { query: { schema: inSchema } } : {}),
    ...(route.body ? { body: takes(route.body, 'schema') ? { schema: inSchema } : {} } : {}),
    // An authenticated POST without a body still says it is JSON (lib/http/json-body jsonContentType).
    ...(!route.body && requiresJsonContentType(route) ? { body: {} } : {}),
    ...(route.upload
      ? { body: 'name\nsample\n', headers: { 'content-type': route.upload.types[0] as string } }
      : {}),
  };
}

const bearer = (key: string) => ({ auth: null, headers: { authorization: `Bearer ${key}` } });

async function makeKey(keyType: 'anon' | 'service_role'): Promise<string> {
  const reply = await call(keys.handler, {
    method: 'POST',
    path: `/api/project/${schema}/keys`,
    body: { keyName: uniqueName(keyType), keyType },
  });
  if (reply.status !== 201) throw new Error(`key: ${reply.text}`);
  return reply.body.key;
}

/** The admin's SQL in the fixtures' schema. */
async function run(sql: string): Promise<void> {
  const reply = await call(query.handler, { method: 'POST', path: '/api/query', body: { sql, schema } });
  if (reply.status !== 200) throw new Error(`${sql}: ${reply.text}`);
}

/** A migration of one harmless statement over the fixtures' schema; its id. */
async function newMigration(): Promise<string> {
  const reply = await call(schemas.handler, {
    method: 'POST',
    path: '/api/migrations',
    body: { name: uniqueName('oas'), sql: 'SELECT 1', target: { schemas: [schema] } },
  });
  if (reply.status !== 201) throw new Error(`migration: ${reply.text}`);
  return reply.body.id;
}

const migrationBody = (target: unknown) => ({ name: uniqueName('oas'), sql: 'SELECT 1', target });

/** A table made for one case, so cases that delete or change things do not disturb others. */
async function scratchTable(): Promise<string> {
  const name = uniqueName('t');
  await run(
    `CREATE TABLE ${name} (id serial PRIMARY KEY, name text); INSERT INTO ${name} (name) VALUES ('a')`,
  );
  return name;
}

// ---------------------------------------------------------------- bundles

const JSON_TYPE = { 'content-type': 'application/json' };
const PART_TYPE = { 'content-type': 'application/octet-stream' };

/** A schema of its own with one table: the fixtures' schema keeps four backups at most. */
async function bundleSchema(sql = 'CREATE TABLE items (id serial PRIMARY KEY, name text)'): Promise<string> {
  const name = await freshSchema('oasb');
  const reply = await call(query.handler, {
    method: 'POST',
    path: '/api/query',
    body: { sql, schema: name },
  });
  if (reply.status !== 200) throw new Error(`${sql}: ${reply.text}`);
  return name;
}

interface Backup {
  schema: string;
  id: string;
  manifest: Json & { parts: unknown[] };
  parts: Buffer[];
}

/** A backup of `of` (a schema of its own by default), its manifest and parts downloaded. */
async function madeBackup(of?: string): Promise<Backup> {
  const name = of ?? (await bundleSchema());
  const made = await call(schemas.handler, {
    method: 'POST',
    path: '/api/backups',
    query: { schema: name },
    headers: JSON_TYPE,
  });
  if (made.status !== 201) throw new Error(`backup: ${made.text}`);
  const id = made.body.id as string;
  const manifest = (await call(schemas.handler, { path: `/api/backups/${id}`, query: { schema: name } }))
    .body;
  const parts: Buffer[] = [];
  for (let n = 1; n <= manifest.parts.length; n++)
    parts.push(
      (await call(schemas.handler, { path: `/api/backups/${id}/parts/${n}`, query: { schema: name } })).bytes,
    );
  return { schema: name, id, manifest, parts };
}

/** A restore over the schema it was made of, opened, with every part sent when `sent`. */
async function openedRestore(backup: Backup, sent: boolean): Promise<string> {
  const opened = await call(schemas.handler, {
    method: 'POST',
    path: '/api/restores',
    body: { schema: backup.schema, mode: 'replace', manifest: backup.manifest },
  });
  if (opened.status !== 201) throw new Error(`restore: ${opened.text}`);
  const id = opened.body.id as string;
  for (const [i, part] of (sent ? backup.parts : []).entries()) {
    await call(schemas.handler, {
      method: 'PUT',
      path: `/api/restores/${id}/parts/${i + 1}`,
      query: { schema: backup.schema },
      headers: PART_TYPE,
      body: part,
    });
  }
  return id;
}

/** A restore over the schema it was made of, committed: its id. */
async function committedRestore(backup: Backup): Promise<string> {
  const id = await openedRestore(backup, true);
  const done = await call(schemas.handler, {
    method: 'POST',
    path: `/api/restores/${id}/commit`,
    body: { schema: backup.schema },
  });
  if (done.status !== 200) throw new Error(`commit: ${done.text}`);
  return id;
}

/** A backup shown as still being made: its row as the backup's first transaction leaves it. */
async function backupBeingMade(): Promise<{ schema: string; id: string }> {
  const name = await bundleSchema();
  const id = '00000000-0000-4000-8000-00000000b0b0'.replace('b0b0', Math.random().toString(16).slice(2, 6));
  const reply = await call(query.handler, {
    method: 'POST',
    path: '/api/query',
    body: {
      runAs: 'admin',
      sql: `INSERT INTO _dbadmin.bundles (id, kind, schema_name, schema_oid, owner, state, created_at, expires_at)
            VALUES ('${id}', 'backup', '${name}', '"${name}"'::regnamespace, 'admin', 'writing', now(), now() + interval '1 hour')`,
    },
  });
  if (reply.status !== 200) throw new Error(`writing backup: ${reply.text}`);
  return { schema: name, id };
}

// ---------------------------------------------------------------- the cases

interface Case {
  status: number;
  why: string;
  request: () => Call | Promise<Call>;
}

const NO_SCHEMA = 'no_such_schema';
/** An import id no import has. */
const NO_IMPORT = '00000000-0000-4000-8000-000000000000';

/** An import of `items`, open, with part 1 sent when `part` is given. */
async function openedImport(part?: string): Promise<string> {
  const opened = await call(imports.handler, {
    method: 'POST',
    path: '/api/table/items/imports',
    body: { schema, format: 'csv' },
  });
  if (opened.status !== 201) throw new Error(`import: ${opened.text}`);
  const id = opened.body.id as string;
  if (part !== undefined) {
    await call(imports.handler, {
      method: 'PUT',
      path: `/api/table/items/imports/${id}/parts/1`,
      query: { schema },
      headers: { 'content-type': 'text/csv' },
      body: part,
    });
  }
  return id;
}

const importPath = (id: string, rest = '') => `/api/table/items/imports/${id}${rest}`;

/**
 * A login of the fixtures' tenant (`<schema>_user`), left open, running a long statement when
 * `active`: how the tenants page names it (pid, backendStart, queryStart).
 */
async function tenantSession(
  active = false,
): Promise<{ pid: number; backendStart: string; queryStart: string }> {
  const url = new URL(process.env.DATABASE_URL as string);
  url.username = `${schema}_user`;
  url.password = 'schema-pass-1';
  const client = new pg.Client({ connectionString: url.toString() });
  client.on('error', () => undefined);
  await client.connect();
  opened.push(client);
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid as number;
  if (active) client.query('SELECT pg_sleep(30)').catch(() => undefined);
  for (let tries = 0; tries < 500; tries++) {
    const { rows } = await h.db.query(
      `SELECT backend_start::text AS "backendStart", query_start::text AS "queryStart", state
         FROM pg_stat_activity WHERE pid = $1`,
      [pid],
    );
    if (!active || rows[0]?.state === 'active')
      return { pid, backendStart: rows[0].backendStart, queryStart: rows[0].queryStart };
  }
  throw new Error('the tenant’s statement never ran');
}
const opened: pg.Client[] = [];

/** The pid of the service's own pooled session of the schema's exec role (the admin's SQL there). */
async function execSession(): Promise<{ pid: number; backendStart: string }> {
  const reply = await call(query.handler, {
    method: 'POST',
    path: '/api/query',
    body: { schema, sql: 'SELECT pg_backend_pid() AS pid' },
  });
  const pid = reply.body.rows[0].pid as number;
  const { rows } = await h.db.query(
    'SELECT backend_start::text AS start FROM pg_stat_activity WHERE pid = $1',
    [pid],
  );
  return { pid, backendStart: rows[0].start };
}

// ---------------------------------------------------------------- people

const PERSON_PASSWORD = 'openapi person password';

/** A new person (a password unless `invited`), and their id, login and invitation if any. */
async function newPerson(role = 'analyst', { invited = false, sourceIp = '127.0.0.1' } = {}) {
  const reply = await call(people.handler, {
    method: 'POST',
    path: '/api/people',
    sourceIp,
    body: { login: uniqueName('p'), role, ...(invited ? {} : { password: PERSON_PASSWORD }) },
  });
  if (reply.status !== 201) throw new Error(`person: ${reply.text}`);
  return {
    id: reply.body.person.id as number,
    login: reply.body.person.login as string,
    invitation: reply.body.invitation?.token as string | undefined,
  };
}

interface Session {
  id: number;
  cookie: string;
  csrf: string;
}

async function signedIn(login: string): Promise<Session> {
  const reply = await call(people.handler, {
    method: 'POST',
    path: '/api/session',
    auth: null,
    body: { login, password: PERSON_PASSWORD },
  });
  if (reply.status !== 200) throw new Error(`sign-in: ${reply.text}`);
  return {
    id: reply.body.person.id,
    cookie: String(reply.headers['set-cookie']).split(';')[0] as string,
    csrf: reply.body.csrfToken,
  };
}

/** A person of `role`, signed in. */
const personSession = async (role = 'analyst') => signedIn((await newPerson(role)).login);

/** A new snippet of the administrator's (shared with everyone: true), by its id. */
async function snippetId(shared = false): Promise<number> {
  const reply = await call(query.handler, {
    method: 'POST',
    path: '/api/sql/snippets',
    body: { name: uniqueName('snip'), sql: 'SELECT 1', shared },
  });
  if (reply.status !== 201) throw new Error(`snippet: ${reply.text}`);
  return reply.body.id;
}

/** The request, carried by the session's cookie and CSRF token instead of Basic credentials. */
const asSession = (session: Session, request: Call): Call => ({
  ...request,
  auth: null,
  headers: { ...request.headers, cookie: session.cookie, 'x-csrf-token': session.csrf },
});

/** The id of one of the session's person's sessions (another one, signed in now). */
async function sessionIdOf(session: Session): Promise<number> {
  const reply = await call(people.handler, asSession(session, { path: '/api/me/sessions' }));
  return reply.body.sessions[0].id;
}

/** A personal token of the session's person. */
async function tokenOf(session: Session, name = uniqueName('t')) {
  const reply = await call(
    people.handler,
    asSession(session, { method: 'POST', path: '/api/me/tokens', body: { name } }),
  );
  if (reply.status !== 201) throw new Error(`token: ${reply.text}`);
  return { id: reply.body.id as number, name };
}

/** Per operation: its success, and what only this operation can answer. */
const CASES: Record<string, Case[]> = {
  'GET /api/health': [
    { status: 200, why: 'the database answers', request: () => ({ path: '/api/health', auth: null }) },
  ],
  'GET /api/openapi.json': [
    { status: 200, why: 'the document', request: () => ({ path: '/api/openapi.json', auth: null }) },
  ],
  'GET /api/schemas': [{ status: 200, why: 'the list', request: () => ({ path: '/api/schemas' }) }],
  'POST /api/schema/create': [
    {
      status: 201,
      why: 'a new schema',
      request: () => ({
        method: 'POST',
        path: '/api/schema/create',
        body: { schemaName: uniqueName('oas'), password: 'schema-pass-1' },
      }),
    },
    {
      status: 400,
      why: 'the schema exists',
      request: () => ({
        method: 'POST',
        path: '/api/schema/create',
        body: { schemaName: schema, password: 'schema-pass-1' },
      }),
    },
    {
      status: 201,
      why: 'a new schema from a template, with its rows',
      request: () => ({
        method: 'POST',
        path: '/api/schema/create',
        body: { schemaName: uniqueName('oas'), password: 'schema-pass-1', template: schema, withData: true },
      }),
    },
    {
      status: 404,
      why: 'no such template',
      request: () => ({
        method: 'POST',
        path: '/api/schema/create',
        body: { schemaName: uniqueName('oas'), password: 'schema-pass-1', template: NO_SCHEMA },
      }),
    },
  ],
  'DELETE /api/schema/{schemaName}': [
    {
      status: 200,
      why: 'deleted',
      request: async () => ({ method: 'DELETE', path: `/api/schema/${await freshSchema('oasdel')}` }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ method: 'DELETE', path: `/api/schema/${NO_SCHEMA}` }),
    },
  ],
  'GET /api/schema/{schemaName}/connection': [
    {
      status: 200,
      why: 'psql’s command and the URL',
      request: () => ({ path: `/api/schema/${schema}/connection` }),
    },
    { status: 400, why: 'a system schema', request: () => ({ path: '/api/schema/public/connection' }) },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ path: `/api/schema/${NO_SCHEMA}/connection` }),
    },
  ],
  'GET /api/migrations': [{ status: 200, why: 'the list', request: () => ({ path: '/api/migrations' }) }],
  'POST /api/migrations/preview': [
    {
      status: 200,
      why: 'the dry run',
      request: () => ({
        method: 'POST',
        path: '/api/migrations/preview',
        body: migrationBody({ schemas: [schema] }),
      }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({
        method: 'POST',
        path: '/api/migrations/preview',
        body: migrationBody({ schemas: [NO_SCHEMA] }),
      }),
    },
  ],
  'POST /api/migrations': [
    {
      status: 201,
      why: 'recorded',
      request: () => ({ method: 'POST', path: '/api/migrations', body: migrationBody({ all: true }) }),
    },
    {
      status: 404,
      why: 'no such template',
      request: () => ({
        method: 'POST',
        path: '/api/migrations',
        body: migrationBody({ template: NO_SCHEMA }),
      }),
    },
  ],
  'GET /api/migrations/{id}': [
    {
      status: 200,
      why: 'its progress',
      request: async () => ({ path: `/api/migrations/${await newMigration()}` }),
    },
    { status: 404, why: 'no such migration', request: () => ({ path: '/api/migrations/999999999' }) },
  ],
  'POST /api/migrations/{id}/run': [
    {
      status: 200,
      why: 'a slice run',
      request: async () => ({
        method: 'POST',
        path: `/api/migrations/${await newMigration()}/run`,
        body: {},
      }),
    },
    {
      status: 404,
      why: 'no such migration',
      request: () => ({ method: 'POST', path: '/api/migrations/999999999/run', body: {} }),
    },
  ],
  'POST /api/migrations/{id}/retry': [
    {
      status: 200,
      why: 'failed ones pending again',
      request: async () => ({
        method: 'POST',
        path: `/api/migrations/${await newMigration()}/retry`,
        body: {},
      }),
    },
    {
      status: 404,
      why: 'no such migration',
      request: () => ({ method: 'POST', path: '/api/migrations/999999999/retry', body: {} }),
    },
  ],
  'POST /api/backups': [
    {
      status: 201,
      why: 'backed up',
      request: async () => ({
        method: 'POST',
        path: '/api/backups',
        query: { schema: await bundleSchema() },
        headers: JSON_TYPE,
      }),
    },
    {
      status: 400,
      why: 'a schema holding what a bundle cannot carry',
      request: async () => ({
        method: 'POST',
        path: '/api/backups',
        query: { schema: await bundleSchema('CREATE DOMAIN positive AS int CHECK (VALUE > 0)') },
        headers: JSON_TYPE,
      }),
    },
    {
      status: 403,
      why: 'a table its own role may no longer read',
      request: async () => {
        const name = await bundleSchema();
        await call(query.handler, {
          method: 'POST',
          path: '/api/query',
          body: { schema: name, sql: `REVOKE SELECT ON items FROM "${name}_owner"` },
        });
        return { method: 'POST', path: '/api/backups', query: { schema: name }, headers: JSON_TYPE };
      },
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({
        method: 'POST',
        path: '/api/backups',
        query: { schema: NO_SCHEMA },
        headers: JSON_TYPE,
      }),
    },
    {
      status: 409,
      why: 'a fifth backup of one schema',
      request: async () => {
        const name = await bundleSchema();
        for (let i = 0; i < 4; i++) await madeBackup(name);
        return { method: 'POST', path: '/api/backups', query: { schema: name }, headers: JSON_TYPE };
      },
    },
  ],
  'GET /api/backups': [
    {
      status: 200,
      why: 'the list',
      request: async () => ({ path: '/api/backups', query: { schema: (await madeBackup()).schema } }),
    },
  ],
  'GET /api/backups/{backupId}': [
    {
      status: 200,
      why: 'the manifest',
      request: async () => {
        const { schema: name, id } = await madeBackup();
        return { path: `/api/backups/${id}`, query: { schema: name } };
      },
    },
    {
      status: 404,
      why: 'no such backup',
      request: () => ({ path: `/api/backups/${NO_IMPORT}`, query: { schema } }),
    },
    {
      status: 409,
      why: 'still being made',
      request: async () => {
        const { schema: name, id } = await backupBeingMade();
        return { path: `/api/backups/${id}`, query: { schema: name } };
      },
    },
  ],
  'GET /api/backups/{backupId}/parts/{part}': [
    {
      status: 200,
      why: 'a part',
      request: async () => {
        const { schema: name, id } = await madeBackup();
        return { path: `/api/backups/${id}/parts/1`, query: { schema: name } };
      },
    },
    {
      status: 404,
      why: 'no such backup',
      request: () => ({ path: `/api/backups/${NO_IMPORT}/parts/1`, query: { schema } }),
    },
    {
      status: 409,
      why: 'still being made',
      request: async () => {
        const { schema: name, id } = await backupBeingMade();
        return { path: `/api/backups/${id}/parts/1`, query: { schema: name } };
      },
    },
  ],
  'DELETE /api/backups/{backupId}': [
    {
      status: 200,
      why: 'deleted',
      request: async () => {
        const { schema: name, id } = await madeBackup();
        return { method: 'DELETE', path: `/api/backups/${id}`, query: { schema: name } };
      },
    },
    {
      status: 404,
      why: 'no such backup',
      request: () => ({ method: 'DELETE', path: `/api/backups/${NO_IMPORT}`, query: { schema } }),
    },
  ],
  'POST /api/restores': [
    {
      status: 201,
      why: 'opened',
      request: async () => {
        const backup = await madeBackup();
        return {
          method: 'POST',
          path: '/api/restores',
          body: { schema: backup.schema, mode: 'replace', manifest: backup.manifest },
        };
      },
    },
    {
      status: 400,
      why: 'not a manifest the service signed',
      request: () => ({
        method: 'POST',
        path: '/api/restores',
        body: { schema, mode: 'replace', manifest: {} },
      }),
    },
    {
      status: 403,
      why: 'a new schema asked for by a key',
      request: async () => ({
        method: 'POST',
        path: '/api/restores',
        body: { schema, mode: 'new', manifest: (await madeBackup()).manifest },
        ...bearer(serviceKey),
      }),
    },
    {
      status: 404,
      why: 'no schema to replace',
      request: async () => ({
        method: 'POST',
        path: '/api/restores',
        body: { schema: NO_SCHEMA, mode: 'replace', manifest: (await madeBackup()).manifest },
      }),
    },
    {
      status: 409,
      why: 'a new schema that exists',
      request: async () => {
        const backup = await madeBackup();
        return {
          method: 'POST',
          path: '/api/restores',
          body: { schema: backup.schema, mode: 'new', manifest: backup.manifest },
        };
      },
    },
  ],
  'PUT /api/restores/{restoreId}/parts/{part}': [
    {
      status: 200,
      why: 'a part',
      request: async () => {
        const backup = await madeBackup(schema);
        return {
          method: 'PUT',
          path: `/api/restores/${await openedRestore(backup, false)}/parts/1`,
          query: { schema },
          headers: PART_TYPE,
          body: backup.parts[0],
        };
      },
    },
    {
      status: 400,
      why: 'a part edited',
      request: async () => {
        const backup = await madeBackup();
        return {
          method: 'PUT',
          path: `/api/restores/${await openedRestore(backup, false)}/parts/1`,
          query: { schema: backup.schema },
          headers: PART_TYPE,
          body: Buffer.concat([backup.parts[0] as Buffer, Buffer.from(' ')]),
        };
      },
    },
    {
      status: 404,
      why: 'no such restore',
      request: () => ({
        method: 'PUT',
        path: `/api/restores/${NO_IMPORT}/parts/1`,
        query: { schema },
        headers: PART_TYPE,
        body: 'x',
      }),
    },
    {
      status: 409,
      why: 'committed',
      request: async () => {
        const backup = await madeBackup();
        const id = await committedRestore(backup);
        return {
          method: 'PUT',
          path: `/api/restores/${id}/parts/1`,
          query: { schema: backup.schema },
          headers: PART_TYPE,
          body: backup.parts[0],
        };
      },
    },
  ],
  'GET /api/restores/{restoreId}': [
    {
      status: 200,
      why: 'its state',
      request: async () => {
        const backup = await madeBackup();
        return {
          path: `/api/restores/${await openedRestore(backup, false)}`,
          query: { schema: backup.schema },
        };
      },
    },
    {
      status: 404,
      why: 'no such restore',
      request: () => ({ path: `/api/restores/${NO_IMPORT}`, query: { schema } }),
    },
  ],
  'DELETE /api/restores/{restoreId}': [
    {
      status: 200,
      why: 'abandoned',
      request: async () => {
        const backup = await madeBackup();
        return {
          method: 'DELETE',
          path: `/api/restores/${await openedRestore(backup, true)}`,
          query: { schema: backup.schema },
        };
      },
    },
    {
      status: 404,
      why: 'no such restore',
      request: () => ({ method: 'DELETE', path: `/api/restores/${NO_IMPORT}`, query: { schema } }),
    },
    {
      status: 409,
      why: 'committed',
      request: async () => {
        const backup = await madeBackup();
        const id = await committedRestore(backup);
        return { method: 'DELETE', path: `/api/restores/${id}`, query: { schema: backup.schema } };
      },
    },
  ],
  'POST /api/restores/{restoreId}/commit': [
    {
      status: 200,
      why: 'restored',
      request: async () => {
        const backup = await madeBackup(schema);
        return {
          method: 'POST',
          path: `/api/restores/${await openedRestore(backup, true)}/commit`,
          body: { schema },
        };
      },
    },
    {
      status: 400,
      why: 'a new schema without its password',
      request: async () => {
        const backup = await madeBackup();
        const name = uniqueName('oasr');
        const opened = await call(schemas.handler, {
          method: 'POST',
          path: '/api/restores',
          body: { schema: name, mode: 'new', manifest: backup.manifest },
        });
        for (const [i, part] of backup.parts.entries()) {
          await call(schemas.handler, {
            method: 'PUT',
            path: `/api/restores/${opened.body.id}/parts/${i + 1}`,
            query: { schema: name },
            headers: PART_TYPE,
            body: part,
          });
        }
        return { method: 'POST', path: `/api/restores/${opened.body.id}/commit`, body: { schema: name } };
      },
    },
    {
      status: 404,
      why: 'no such restore',
      request: () => ({ method: 'POST', path: `/api/restores/${NO_IMPORT}/commit`, body: { schema } }),
    },
    {
      status: 409,
      why: 'parts missing',
      request: async () => {
        const backup = await madeBackup();
        return {
          method: 'POST',
          path: `/api/restores/${await openedRestore(backup, false)}/commit`,
          body: { schema: backup.schema },
        };
      },
    },
  ],
  'GET /api/drift': [{ status: 200, why: 'the fingerprints', request: () => ({ path: '/api/drift' }) }],
  'GET /api/drift/{schema}/fix': [
    {
      status: 200,
      why: 'the SQL, previewed',
      request: () => ({ path: `/api/drift/${schema}/fix`, query: { against: schema } }),
    },
    {
      status: 404,
      why: 'no such schema, or no template',
      request: () => ({ path: `/api/drift/${schema}/fix` }),
    },
  ],
  'GET /api/drift/{schema}': [
    {
      status: 200,
      why: 'the differences',
      request: () => ({ path: `/api/drift/${schema}`, query: { against: schema } }),
    },
    { status: 404, why: 'no such schema, or no template', request: () => ({ path: `/api/drift/${schema}` }) },
  ],
  'GET /api/tables': [
    { status: 200, why: 'the list', request: () => ({ path: '/api/tables', query: { schema } }) },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ path: '/api/tables', query: { schema: NO_SCHEMA } }),
    },
  ],
  'GET /api/table/{tableName}': [
    { status: 200, why: 'a page', request: () => ({ path: '/api/table/items', query: { schema } }) },
    { status: 404, why: 'no such table', request: () => ({ path: '/api/table/missing', query: { schema } }) },
  ],
  'DELETE /api/table/{tableName}': [
    {
      status: 200,
      why: 'deleted',
      request: async () => ({
        method: 'DELETE',
        path: `/api/table/${await scratchTable()}`,
        query: { schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({ method: 'DELETE', path: '/api/table/missing', query: { schema } }),
    },
  ],
  'POST /api/table/create': [
    {
      status: 201,
      why: 'created',
      request: () => ({
        method: 'POST',
        path: '/api/table/create',
        body: {
          tableName: uniqueName('t'),
          schema,
          columns: [{ name: 'id', type: 'SERIAL', primaryKey: true }],
        },
      }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({
        method: 'POST',
        path: '/api/table/create',
        body: { tableName: 'x', schema: NO_SCHEMA, columns: [{ name: 'id', type: 'INTEGER' }] },
      }),
    },
  ],
  'POST /api/table/{tableName}/clone': [
    {
      status: 201,
      why: 'copied',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/clone',
        body: { newTableName: uniqueName('copy'), copyData: true, schema },
      }),
    },
    {
      status: 404,
      why: 'no table to copy',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/clone',
        body: { newTableName: 'x', schema },
      }),
    },
  ],
  'GET /api/table/{tableName}/export': [
    { status: 200, why: 'JSON', request: () => ({ path: '/api/table/items/export', query: { schema } }) },
    {
      status: 200,
      why: 'CSV',
      request: () => ({ path: '/api/table/items/export', query: { schema, format: 'csv' } }),
    },
    { status: 404, why: 'no rows', request: () => ({ path: '/api/table/empty/export', query: { schema } }) },
  ],
  'POST /api/table/{tableName}/column': [
    {
      status: 201,
      why: 'added',
      request: async () => ({
        method: 'POST',
        path: `/api/table/${await scratchTable()}/column`,
        body: { columnName: 'added', dataType: 'TEXT', schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/column',
        body: { columnName: 'added', dataType: 'TEXT', schema },
      }),
    },
  ],
  'PATCH /api/table/{tableName}/column/{columnName}': [
    {
      status: 200,
      why: 'renamed',
      request: async () => ({
        method: 'PATCH',
        path: `/api/table/${await scratchTable()}/column/name`,
        body: { rename: 'title', schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'PATCH',
        path: '/api/table/missing/column/name',
        body: { comment: 'c', schema },
      }),
    },
  ],
  'DELETE /api/table/{tableName}/column/{columnName}': [
    {
      status: 200,
      why: 'dropped',
      request: async () => ({
        method: 'DELETE',
        path: `/api/table/${await scratchTable()}/column/name`,
        query: { schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({ method: 'DELETE', path: '/api/table/missing/column/name', query: { schema } }),
    },
  ],
  'GET /api/table/{tableName}/indexes': [
    {
      status: 200,
      why: 'the list',
      request: () => ({ path: '/api/table/items/indexes', query: { schema } }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({ path: '/api/table/missing/indexes', query: { schema } }),
    },
  ],
  'GET /api/table/{tableName}/indexes/progress': [
    {
      status: 200,
      why: 'the builds running',
      request: () => ({ path: '/api/table/items/indexes/progress', query: { schema } }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({ path: '/api/table/missing/indexes/progress', query: { schema } }),
    },
  ],
  'POST /api/table/{tableName}/indexes': [
    {
      status: 200,
      why: 'built',
      request: async () => ({
        method: 'POST',
        path: `/api/table/${await scratchTable()}/indexes`,
        body: { columns: ['name'], schema },
      }),
    },
    {
      status: 200,
      why: 'dryRun',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/indexes',
        body: { columns: ['name'], dryRun: true, schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/indexes',
        body: { columns: ['name'], schema },
      }),
    },
  ],
  'DELETE /api/table/{tableName}/indexes/{indexName}': [
    {
      status: 200,
      why: 'dropped',
      request: async () => {
        const table = await scratchTable();
        await run(`CREATE INDEX ${table}_name ON ${table} (name)`);
        return { method: 'DELETE', path: `/api/table/${table}/indexes/${table}_name`, query: { schema } };
      },
    },
    {
      status: 404,
      why: 'no such index',
      request: () => ({ method: 'DELETE', path: '/api/table/items/indexes/missing', query: { schema } }),
    },
  ],
  'GET /api/schema': [
    { status: 200, why: 'the structure', request: () => ({ path: '/api/schema', query: { schema } }) },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ path: '/api/schema', query: { schema: NO_SCHEMA } }),
    },
  ],
  'GET /api/table/{tableName}/constraints': [
    {
      status: 200,
      why: 'the list',
      request: () => ({ path: '/api/table/items/constraints', query: { schema } }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({ path: '/api/table/missing/constraints', query: { schema } }),
    },
  ],
  'POST /api/table/{tableName}/constraints': [
    {
      status: 200,
      why: 'added',
      request: async () => ({
        method: 'POST',
        path: `/api/table/${await scratchTable()}/constraints`,
        body: { type: 'check', check: 'id > 0', schema },
      }),
    },
    {
      status: 200,
      why: 'dryRun',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/constraints',
        body: { type: 'unique', columns: ['name'], dryRun: true, schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/constraints',
        body: { type: 'check', check: 'true', schema },
      }),
    },
  ],
  'DELETE /api/table/{tableName}/constraints/{constraintName}': [
    {
      status: 200,
      why: 'dropped',
      request: async () => {
        const table = await scratchTable();
        return { method: 'DELETE', path: `/api/table/${table}/constraints/${table}_pkey`, query: { schema } };
      },
    },
    {
      status: 404,
      why: 'no such constraint',
      request: () => ({ method: 'DELETE', path: '/api/table/items/constraints/missing', query: { schema } }),
    },
  ],
  'PATCH /api/table/{tableName}': [
    {
      status: 200,
      why: 'commented',
      request: async () => ({
        method: 'PATCH',
        path: `/api/table/${await scratchTable()}`,
        body: { comment: 'c', schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({ method: 'PATCH', path: '/api/table/missing', body: { comment: 'c', schema } }),
    },
  ],
  'GET /api/types': [
    { status: 200, why: 'the list', request: () => ({ path: '/api/types', query: { schema } }) },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ path: '/api/types', query: { schema: NO_SCHEMA } }),
    },
  ],
  'POST /api/types': [
    {
      status: 200,
      why: 'created',
      request: () => ({
        method: 'POST',
        path: '/api/types',
        body: { name: uniqueName('e'), values: ['a'], schema },
      }),
    },
    {
      status: 200,
      why: 'dryRun',
      request: () => ({
        method: 'POST',
        path: '/api/types',
        body: { name: uniqueName('e'), values: ['a'], dryRun: true, schema },
      }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({
        method: 'POST',
        path: '/api/types',
        body: { name: 'e', values: ['a'], schema: NO_SCHEMA },
      }),
    },
  ],
  'POST /api/types/{typeName}/values': [
    {
      status: 200,
      why: 'added',
      request: async () => {
        const name = uniqueName('e');
        await run(`CREATE TYPE ${name} AS ENUM ('a')`);
        return {
          method: 'POST',
          path: `/api/types/${name}/values`,
          body: { value: 'b', before: 'a', schema },
        };
      },
    },
    {
      status: 404,
      why: 'no such type',
      request: () => ({ method: 'POST', path: '/api/types/missing/values', body: { value: 'b', schema } }),
    },
  ],
  'GET /api/functions': [
    {
      status: 200,
      why: 'the list',
      request: async () => {
        await run(
          `CREATE FUNCTION ${uniqueName('f')}(a int DEFAULT 1) RETURNS int LANGUAGE sql AS 'SELECT a'`,
        );
        return { path: '/api/functions', query: { schema } };
      },
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ path: '/api/functions', query: { schema: NO_SCHEMA } }),
    },
  ],
  'GET /api/views': [
    {
      status: 200,
      why: 'the list',
      request: async () => {
        await run(`CREATE VIEW ${uniqueName('v')} AS SELECT id FROM items`);
        return { path: '/api/views', query: { schema } };
      },
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ path: '/api/views', query: { schema: NO_SCHEMA } }),
    },
  ],
  'POST /api/view/{viewName}/refresh': [
    {
      status: 200,
      why: 'refreshed',
      request: async () => {
        const name = uniqueName('m');
        await run(`CREATE MATERIALIZED VIEW ${name} AS SELECT id FROM items`);
        return { method: 'POST', path: `/api/view/${name}/refresh`, body: { schema } };
      },
    },
    {
      status: 404,
      why: 'no such view',
      request: () => ({ method: 'POST', path: '/api/view/missing/refresh', body: { schema } }),
    },
  ],
  'POST /api/table/{tableName}/row': [
    {
      status: 201,
      why: 'inserted',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/row',
        body: { data: { name: 'c' }, schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/row',
        body: { data: { name: 'c' }, schema },
      }),
    },
  ],
  'PATCH /api/table/{tableName}/rows': [
    {
      status: 200,
      why: 'the rows a filter finds, updated',
      request: () => ({
        method: 'PATCH',
        path: '/api/table/items/rows',
        query: { filter: 'id.eq.1' },
        body: { set: { name: 'z' }, schema },
      }),
    },
    {
      status: 200,
      why: 'SPEC’s update of the row whose key is "rows"',
      request: async () => {
        const table = uniqueName('named');
        await run(
          `CREATE TABLE ${table} (k text PRIMARY KEY, v text); INSERT INTO ${table} VALUES ('rows', 'a')`,
        );
        return {
          method: 'PATCH',
          path: `/api/table/${table}/rows`,
          body: { column: 'v', value: 'b', schema },
        };
      },
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'PATCH',
        path: '/api/table/missing/rows',
        query: { all: 'true' },
        body: { set: { name: 'z' }, schema },
      }),
    },
    {
      status: 409,
      why: 'more rows than maxAffected',
      request: () => ({
        method: 'PATCH',
        path: '/api/table/items/rows',
        query: { all: 'true', maxAffected: '0' },
        body: { set: { name: 'z' }, schema },
      }),
    },
  ],
  'PATCH /api/table/{tableName}/{rowId}': [
    {
      status: 200,
      why: 'updated',
      request: () => ({
        method: 'PATCH',
        path: '/api/table/items/1',
        body: { column: 'name', value: 'z', schema },
      }),
    },
    {
      status: 404,
      why: 'no such row',
      request: () => ({
        method: 'PATCH',
        path: '/api/table/items/999999',
        body: { column: 'name', value: 'z', schema },
      }),
    },
  ],
  'DELETE /api/table/{tableName}/row/{rowId}': [
    {
      status: 200,
      why: 'deleted',
      request: async () => ({
        method: 'DELETE',
        path: `/api/table/${await scratchTable()}/row/1`,
        query: { schema },
      }),
    },
    {
      status: 404,
      why: 'no such row',
      request: () => ({ method: 'DELETE', path: '/api/table/items/row/999999', query: { schema } }),
    },
  ],
  'POST /api/table/{tableName}/rows': [
    {
      status: 201,
      why: 'inserted',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/rows',
        body: { rows: [{ name: 'c' }, { name: 'd' }], schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/rows',
        body: { rows: [{ name: 'c' }], schema },
      }),
    },
  ],
  'POST /api/table/{tableName}/rows/delete': [
    {
      status: 200,
      why: 'deleted',
      request: async () => ({
        method: 'POST',
        path: `/api/table/${await scratchTable()}/rows/delete`,
        body: { rowIds: [1], schema },
      }),
    },
    {
      status: 200,
      why: 'deleted by a filter',
      request: async () => ({
        method: 'POST',
        path: `/api/table/${await scratchTable()}/rows/delete`,
        query: { filter: 'name.eq.a' },
        body: { schema },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/rows/delete',
        body: { rowIds: [1], schema },
      }),
    },
    {
      status: 409,
      why: 'more rows than maxAffected',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/rows/delete',
        query: { all: 'true', maxAffected: '0' },
        body: { schema },
      }),
    },
  ],
  'POST /api/sql/split': [
    {
      status: 200,
      why: 'the statements',
      request: () => ({ method: 'POST', path: '/api/sql/split', body: { sql: 'SELECT 1; SELECT 2' } }),
    },
    {
      status: 400,
      why: 'a script the parser cannot read',
      request: () => ({ method: 'POST', path: '/api/sql/split', body: { sql: 'SELEC 1' } }),
    },
  ],
  'GET /api/sql/history': [
    {
      status: 200,
      why: 'the runs kept',
      request: async () => {
        await call(query.handler, {
          method: 'POST',
          path: '/api/query',
          body: { sql: 'SELECT 1', schema, history: true },
        });
        return { path: '/api/sql/history', query: { limit: '5' } };
      },
    },
  ],
  'DELETE /api/sql/history': [
    {
      status: 200,
      why: 'forgotten',
      request: async () => asSession(await personSession(), { method: 'DELETE', path: '/api/sql/history' }),
    },
  ],
  'GET /api/sql/snippets': [{ status: 200, why: 'the list', request: () => ({ path: '/api/sql/snippets' }) }],
  'POST /api/sql/snippets': [
    {
      status: 201,
      why: 'saved',
      request: () => ({
        method: 'POST',
        path: '/api/sql/snippets',
        body: { name: uniqueName('snip'), sql: 'SELECT 1', schema, shared: true },
      }),
    },
    {
      status: 409,
      why: 'a name of one’s own taken',
      request: async () => {
        const body = { name: uniqueName('snip'), sql: 'SELECT 1' };
        await call(query.handler, { method: 'POST', path: '/api/sql/snippets', body });
        return { method: 'POST', path: '/api/sql/snippets', body };
      },
    },
    {
      status: 403,
      why: 'a schema outside the person’s scope',
      request: async () => {
        const { id, login } = await newPerson('analyst');
        await call(people.handler, {
          method: 'PATCH',
          path: `/api/people/${id}`,
          body: { schemas: [otherSchema] },
        });
        return asSession(await signedIn(login), {
          method: 'POST',
          path: '/api/sql/snippets',
          body: { name: 'outside', sql: 'SELECT 1', schema },
        });
      },
    },
  ],
  'PATCH /api/sql/snippets/{id}': [
    {
      status: 200,
      why: 'changed',
      request: async () => {
        const id = await snippetId();
        return { method: 'PATCH', path: `/api/sql/snippets/${id}`, body: { sql: 'SELECT 2' } };
      },
    },
    {
      status: 404,
      why: 'no such snippet',
      request: async () =>
        asSession(await personSession(), {
          method: 'PATCH',
          path: '/api/sql/snippets/2000000000',
          body: { shared: true },
        }),
    },
    {
      status: 403,
      why: 'someone else’s shared snippet',
      request: async () => {
        const id = await snippetId(true);
        return asSession(await personSession(), {
          method: 'PATCH',
          path: `/api/sql/snippets/${id}`,
          body: { sql: 'x' },
        });
      },
    },
    {
      status: 409,
      why: 'renamed to a name of one’s own taken',
      request: async () => {
        const taken = uniqueName('snip');
        await call(query.handler, {
          method: 'POST',
          path: '/api/sql/snippets',
          body: { name: taken, sql: 'SELECT 1' },
        });
        return { method: 'PATCH', path: `/api/sql/snippets/${await snippetId()}`, body: { name: taken } };
      },
    },
  ],
  'DELETE /api/sql/snippets/{id}': [
    {
      status: 200,
      why: 'deleted',
      request: async () => ({ method: 'DELETE', path: `/api/sql/snippets/${await snippetId()}` }),
    },
    {
      status: 404,
      why: 'no such snippet',
      request: async () =>
        asSession(await personSession(), { method: 'DELETE', path: '/api/sql/snippets/2000000000' }),
    },
    {
      status: 403,
      why: 'someone else’s shared snippet',
      request: async () => {
        const id = await snippetId(true);
        return asSession(await personSession(), { method: 'DELETE', path: `/api/sql/snippets/${id}` });
      },
    },
  ],
  'POST /api/query/export': [
    {
      status: 200,
      why: 'the rows',
      request: () => ({
        method: 'POST',
        path: '/api/query/export',
        body: { sql: 'SELECT * FROM items', schema, format: 'json' },
      }),
    },
    {
      status: 400,
      why: 'not one query',
      request: () => ({
        method: 'POST',
        path: '/api/query/export',
        body: { sql: 'SELECT 1; SELECT 2', schema },
      }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({
        method: 'POST',
        path: '/api/query/export',
        body: { sql: 'SELECT 1', schema: NO_SCHEMA },
      }),
    },
    {
      status: 403,
      why: 'another schema with a key',
      request: () => ({
        method: 'POST',
        path: '/api/query/export',
        body: { sql: 'SELECT 1', schema: otherSchema },
        ...bearer(anonKey),
      }),
    },
  ],
  'POST /api/query/cancel': [
    {
      status: 200,
      why: 'nothing of the caller’s runs under it',
      request: () => ({ method: 'POST', path: '/api/query/cancel', body: { queryId: 'nothing-running-1' } }),
    },
    {
      status: 400,
      why: 'a queryId that is not one',
      request: () => ({ method: 'POST', path: '/api/query/cancel', body: { queryId: 'a b' } }),
    },
  ],
  'POST /api/query': [
    {
      status: 200,
      why: 'rows',
      request: () => ({ method: 'POST', path: '/api/query', body: { sql: 'SELECT * FROM items', schema } }),
    },
    {
      status: 400,
      why: 'an SQL error, with its position',
      request: () => ({ method: 'POST', path: '/api/query', body: { sql: 'SELECT FROM WHERE', schema } }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ method: 'POST', path: '/api/query', body: { sql: 'SELECT 1', schema: NO_SCHEMA } }),
    },
    {
      status: 403,
      why: 'a write with an anon key',
      request: () => ({
        method: 'POST',
        path: '/api/query',
        body: { sql: "INSERT INTO items (name) VALUES ('x')" },
        ...bearer(anonKey),
      }),
    },
  ],
  'POST /api/project/{schema}/keys': [
    {
      status: 201,
      why: 'a new key',
      request: () => ({
        method: 'POST',
        path: `/api/project/${schema}/keys`,
        body: { keyName: uniqueName('k') },
      }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({ method: 'POST', path: `/api/project/${NO_SCHEMA}/keys`, body: { keyName: 'k' } }),
    },
  ],
  'GET /api/project/{schema}/keys': [
    { status: 200, why: 'the list', request: () => ({ path: `/api/project/${schema}/keys` }) },
    { status: 404, why: 'no such schema', request: () => ({ path: `/api/project/${NO_SCHEMA}/keys` }) },
  ],
  'DELETE /api/project/{schema}/keys/{keyId}': [
    {
      status: 200,
      why: 'deleted',
      request: async () => {
        const made = await call(keys.handler, {
          method: 'POST',
          path: `/api/project/${schema}/keys`,
          body: { keyName: uniqueName('gone') },
        });
        return { method: 'DELETE', path: `/api/project/${schema}/keys/${made.body.id}` };
      },
    },
    {
      status: 404,
      why: 'no such key',
      request: () => ({ method: 'DELETE', path: `/api/project/${schema}/keys/999999999` }),
    },
  ],
  'GET /api/license/status': [
    { status: 200, why: 'the status', request: () => ({ path: '/api/license/status', auth: null }) },
  ],
  'POST /api/license/refresh': [
    {
      status: 200,
      why: 'the status',
      request: () => ({ method: 'POST', path: '/api/license/refresh', auth: null }),
    },
  ],
  'POST /api/license/validate': [
    {
      status: 200,
      why: 'a key the license server knows',
      request: async () => ({
        method: 'POST',
        path: '/api/license/validate',
        auth: null,
        body: { licenseKey: await h.server.issue('owner@example.com') },
      }),
    },
  ],
  'POST /api/license/activate': [
    {
      status: 200,
      why: 'activated',
      request: async () => {
        await h.deploy();
        return {
          method: 'POST',
          path: '/api/license/activate',
          auth: null,
          body: { licenseKey: await h.server.issue('owner@example.com'), email: 'owner@example.com' },
        };
      },
    },
  ],
  'POST /api/license/deactivate': [
    {
      status: 400,
      why: 'nothing activated',
      request: async () => {
        await h.deploy();
        return { method: 'POST', path: '/api/license/deactivate', body: {} };
      },
    },
    {
      status: 200,
      why: 'deactivated',
      request: async () => {
        await h.activated();
        return { method: 'POST', path: '/api/license/deactivate', body: {} };
      },
    },
  ],
  'POST /api/trial/start': [
    {
      status: 200,
      why: 'started',
      request: async () => {
        await h.deploy();
        return { method: 'POST', path: '/api/trial/start', auth: null, body: { email: 'me@example.com' } };
      },
    },
    {
      status: 400,
      why: 'started before',
      request: () => ({
        method: 'POST',
        path: '/api/trial/start',
        auth: null,
        body: { email: 'me@example.com' },
      }),
    },
  ],
  'POST /api/table/{tableName}/import': [
    {
      status: 200,
      why: 'imported',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/import',
        query: { schema },
        headers: { 'content-type': 'text/csv' },
        body: 'name\nimported\n',
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/import',
        query: { schema },
        headers: { 'content-type': 'text/csv' },
        body: 'name\nx\n',
      }),
    },
  ],
  'POST /api/import/columns': [
    {
      status: 200,
      why: 'the columns',
      request: () => ({
        method: 'POST',
        path: '/api/import/columns',
        headers: { 'content-type': 'text/csv' },
        body: 'id,First Name,joined\n1,Ann,2024-01-02\n',
      }),
    },
  ],
  'POST /api/table/{tableName}/imports': [
    {
      status: 201,
      why: 'opened',
      request: () => ({
        method: 'POST',
        path: '/api/table/items/imports',
        body: { schema, format: 'ndjson' },
      }),
    },
    {
      status: 404,
      why: 'no such table',
      request: () => ({
        method: 'POST',
        path: '/api/table/missing/imports',
        body: { schema, format: 'csv' },
      }),
    },
  ],
  'PUT /api/table/{tableName}/imports/{importId}/parts/{part}': [
    {
      status: 200,
      why: 'a part',
      request: async () => ({
        method: 'PUT',
        path: importPath(await openedImport(), '/parts/1'),
        query: { schema },
        headers: { 'content-type': 'text/csv' },
        body: 'name\nin parts\n',
      }),
    },
    {
      status: 404,
      why: 'no such import',
      request: () => ({
        method: 'PUT',
        path: importPath(NO_IMPORT, '/parts/1'),
        query: { schema },
        headers: { 'content-type': 'text/csv' },
        body: 'name\n',
      }),
    },
  ],
  'GET /api/table/{tableName}/imports/{importId}': [
    {
      status: 200,
      why: 'its state',
      request: async () => ({ path: importPath(await openedImport('name\n')), query: { schema } }),
    },
    {
      status: 404,
      why: 'no such import',
      request: () => ({ path: importPath(NO_IMPORT), query: { schema } }),
    },
  ],
  'POST /api/table/{tableName}/imports/{importId}/commit': [
    {
      status: 200,
      why: 'committed',
      request: async () => ({
        method: 'POST',
        path: importPath(await openedImport('name\ncommitted\n'), '/commit'),
        body: { schema, parts: 1 },
      }),
    },
    {
      status: 404,
      why: 'no such import',
      request: () => ({ method: 'POST', path: importPath(NO_IMPORT, '/commit'), body: { schema, parts: 1 } }),
    },
  ],
  'DELETE /api/table/{tableName}/imports/{importId}': [
    {
      status: 200,
      why: 'abandoned',
      request: async () => ({ method: 'DELETE', path: importPath(await openedImport()), query: { schema } }),
    },
    {
      status: 404,
      why: 'no such import',
      request: () => ({ method: 'DELETE', path: importPath(NO_IMPORT), query: { schema } }),
    },
  ],
  'GET /api/tenants': [
    {
      status: 200,
      why: 'the tenants',
      request: () => ({ path: '/api/tenants', query: { sort: 'connections' } }),
    },
  ],
  'PUT /api/tenants/{schema}/quota': [
    {
      status: 200,
      why: 'set',
      request: () => ({
        method: 'PUT',
        path: `/api/tenants/${schema}/quota`,
        body: { statementTimeoutMs: 20_000, connectionLimit: 5, storageBytes: 1024 ** 3 },
      }),
    },
    {
      status: 404,
      why: 'no such schema',
      request: () => ({
        method: 'PUT',
        path: `/api/tenants/${NO_SCHEMA}/quota`,
        body: { statementTimeoutMs: null, connectionLimit: null, storageBytes: null },
      }),
    },
  ],
  'GET /api/audit': [
    {
      status: 200,
      why: 'the entries',
      request: () => ({ path: '/api/audit', query: { schema, limit: '5' } }),
    },
  ],
  'POST /api/session': [
    {
      status: 200,
      why: 'signed in',
      request: async () => ({
        method: 'POST',
        path: '/api/session',
        auth: null,
        body: { login: (await newPerson()).login, password: PERSON_PASSWORD },
      }),
    },
    {
      status: 401,
      why: 'a wrong password',
      request: async () => ({
        method: 'POST',
        path: '/api/session',
        auth: null,
        body: { login: (await newPerson()).login, password: 'not the password' },
      }),
    },
  ],
  'POST /api/session/invitation': [
    {
      status: 200,
      why: 'password set, signed in',
      request: async () => ({
        method: 'POST',
        path: '/api/session/invitation',
        auth: null,
        body: {
          token: (await newPerson('analyst', { invited: true })).invitation,
          password: PERSON_PASSWORD,
        },
      }),
    },
    {
      status: 400,
      why: 'no such invitation',
      request: () => ({
        method: 'POST',
        path: '/api/session/invitation',
        auth: null,
        body: { token: `dbi_${'A'.repeat(43)}`, password: PERSON_PASSWORD },
      }),
    },
  ],
  'GET /api/session': [
    {
      status: 200,
      why: 'who is signed in',
      request: async () => asSession(await personSession(), { path: '/api/session' }),
    },
  ],
  'DELETE /api/session': [
    {
      status: 200,
      why: 'signed out',
      request: async () => asSession(await personSession(), { method: 'DELETE', path: '/api/session' }),
    },
  ],
  'POST /api/me/password': [
    {
      status: 200,
      why: 'changed',
      request: async () =>
        asSession(await personSession(), {
          method: 'POST',
          path: '/api/me/password',
          body: { currentPassword: PERSON_PASSWORD, newPassword: 'another long password' },
        }),
    },
    {
      status: 403,
      why: 'the current password is wrong',
      request: async () =>
        asSession(await personSession(), {
          method: 'POST',
          path: '/api/me/password',
          body: { currentPassword: 'not it', newPassword: 'another long password' },
        }),
    },
  ],
  'GET /api/me/sessions': [
    {
      status: 200,
      why: 'one’s sessions',
      request: async () => asSession(await personSession(), { path: '/api/me/sessions' }),
    },
  ],
  'DELETE /api/me/sessions/{id}': [
    {
      status: 200,
      why: 'ended',
      request: async () => {
        const session = await personSession();
        return asSession(session, {
          method: 'DELETE',
          path: `/api/me/sessions/${await sessionIdOf(session)}`,
        });
      },
    },
    {
      status: 404,
      why: 'no such session',
      request: async () =>
        asSession(await personSession(), { method: 'DELETE', path: '/api/me/sessions/999999' }),
    },
  ],
  'GET /api/me/tokens': [
    {
      status: 200,
      why: 'one’s tokens',
      request: async () => asSession(await personSession(), { path: '/api/me/tokens' }),
    },
  ],
  'POST /api/me/tokens': [
    {
      status: 201,
      why: 'made',
      request: async () =>
        asSession(await personSession(), { method: 'POST', path: '/api/me/tokens', body: { name: 'ci' } }),
    },
    {
      status: 403,
      why: 'a role above one’s own',
      request: async () =>
        asSession(await personSession(), {
          method: 'POST',
          path: '/api/me/tokens',
          body: { name: 'ci', role: 'owner' },
        }),
    },
    {
      status: 409,
      why: 'a token of that name exists',
      request: async () => {
        const session = await personSession();
        const { name } = await tokenOf(session);
        return asSession(session, { method: 'POST', path: '/api/me/tokens', body: { name } });
      },
    },
  ],
  'DELETE /api/me/tokens/{id}': [
    {
      status: 200,
      why: 'revoked',
      request: async () => {
        const session = await personSession();
        return asSession(session, {
          method: 'DELETE',
          path: `/api/me/tokens/${(await tokenOf(session)).id}`,
        });
      },
    },
    {
      status: 404,
      why: 'no such token',
      request: async () =>
        asSession(await personSession(), { method: 'DELETE', path: '/api/me/tokens/999999' }),
    },
  ],
  'GET /api/people': [{ status: 200, why: 'everyone', request: () => ({ path: '/api/people' }) }],
  'POST /api/people': [
    {
      status: 201,
      why: 'added, invited',
      request: () => ({
        method: 'POST',
        path: '/api/people',
        body: { login: uniqueName('p'), role: 'developer', schemas: [schema] },
      }),
    },
    {
      status: 400,
      why: 'a schema that does not exist',
      request: () => ({
        method: 'POST',
        path: '/api/people',
        body: { login: uniqueName('p'), role: 'analyst', schemas: [NO_SCHEMA] },
      }),
    },
    {
      status: 409,
      why: 'the login is taken',
      request: async () => ({
        method: 'POST',
        path: '/api/people',
        body: { login: (await newPerson()).login, role: 'analyst' },
      }),
    },
  ],
  'PATCH /api/people/{id}': [
    {
      status: 200,
      why: 'changed',
      request: async () => ({
        method: 'PATCH',
        path: `/api/people/${(await newPerson()).id}`,
        body: { role: 'developer' },
      }),
    },
    {
      status: 403,
      why: 'an owner changing their own role',
      request: async () => {
        const owner = await personSession('owner');
        return asSession(owner, {
          method: 'PATCH',
          path: `/api/people/${owner.id}`,
          body: { role: 'analyst' },
        });
      },
    },
    {
      status: 404,
      why: 'no such person',
      request: () => ({ method: 'PATCH', path: '/api/people/999999', body: { name: 'nobody' } }),
    },
  ],
  'DELETE /api/people/{id}': [
    {
      status: 200,
      why: 'removed',
      request: async () => ({ method: 'DELETE', path: `/api/people/${(await newPerson()).id}` }),
    },
    {
      status: 403,
      why: 'an owner removing themselves',
      request: async () => {
        const owner = await personSession('owner');
        return asSession(owner, { method: 'DELETE', path: `/api/people/${owner.id}` });
      },
    },
    { status: 404, why: 'no such person', request: () => ({ method: 'DELETE', path: '/api/people/999999' }) },
  ],
  'POST /api/people/{id}/reset': [
    {
      status: 200,
      why: 'reset, invited again',
      request: async () => ({
        method: 'POST',
        path: `/api/people/${(await newPerson()).id}/reset`,
        body: {},
      }),
    },
    {
      status: 404,
      why: 'no such person',
      request: () => ({ method: 'POST', path: '/api/people/999999/reset', body: {} }),
    },
  ],
  'GET /api/people/{id}/sessions': [
    {
      status: 200,
      why: 'their sessions',
      request: async () => ({ path: `/api/people/${(await personSession()).id}/sessions` }),
    },
    { status: 404, why: 'no such person', request: () => ({ path: '/api/people/999999/sessions' }) },
  ],
  'DELETE /api/people/{id}/sessions': [
    {
      status: 200,
      why: 'ended',
      request: async () => ({ method: 'DELETE', path: `/api/people/${(await personSession()).id}/sessions` }),
    },
    {
      status: 404,
      why: 'no such person',
      request: () => ({ method: 'DELETE', path: '/api/people/999999/sessions' }),
    },
  ],
  'GET /api/metrics': [
    { status: 200, why: 'the figures', request: () => ({ path: '/api/metrics' }) },
    {
      status: 403,
      why: 'a person whose role lacks metrics',
      request: async () => asSession(await personSession('developer'), { path: '/api/metrics' }),
    },
  ],
  'GET /api/tenants/{schema}': [
    { status: 200, why: 'the tenant', request: () => ({ path: `/api/tenants/${schema}` }) },
    { status: 404, why: 'no such schema', request: () => ({ path: `/api/tenants/${NO_SCHEMA}` }) },
  ],
  'POST /api/tenants/{schema}/sessions/{pid}/cancel': [
    {
      status: 200,
      why: 'cancelled',
      request: async () => {
        const { pid, ...named } = await tenantSession(true);
        return { method: 'POST', path: `/api/tenants/${schema}/sessions/${pid}/cancel`, body: named };
      },
    },
    {
      status: 404,
      why: 'no such session',
      request: () => ({
        method: 'POST',
        path: `/api/tenants/${schema}/sessions/999999/cancel`,
        body: { backendStart: '2000-01-01 00:00:00+00' },
      }),
    },
  ],
  'POST /api/tenants/{schema}/sessions/{pid}/terminate': [
    {
      status: 200,
      why: 'ended',
      request: async () => {
        const { pid, backendStart } = await tenantSession();
        return {
          method: 'POST',
          path: `/api/tenants/${schema}/sessions/${pid}/terminate`,
          body: { backendStart },
        };
      },
    },
    {
      status: 403,
      why: 'the service’s own session',
      request: async () => {
        const { pid, backendStart } = await execSession();
        return {
          method: 'POST',
          path: `/api/tenants/${schema}/sessions/${pid}/terminate`,
          body: { backendStart },
        };
      },
    },
    {
      status: 404,
      why: 'no such session',
      request: () => ({
        method: 'POST',
        path: `/api/tenants/${schema}/sessions/999999/terminate`,
        body: { backendStart: '2000-01-01 00:00:00+00' },
      }),
    },
  ],
  'GET /api/trial/status': [
    { status: 200, why: 'the status', request: () => ({ path: '/api/trial/status', auth: null }) },
  ],
};

/** Invalid input the chain checks for any route that takes some: an unknown field or parameter. */
function badInput(route: AnyRoute): Call {
  const base = sample(route);
  if (route.body) return { ...base, body: [] };
  // A name no query takes, with a value longer than any takes (a query of any names still refuses it).
  if (route.query) return { ...base, query: { ...base.query, bogus: 'x'.repeat(5000) } };
  return {
    ...base,
    path: pathOf(route, { schema: '1bad', schemaName: '1bad', tableName: '1bad', keyId: 'x', id: 'x' }),
  };
}

/** What the route's access refuses: keys on admin routes, anon keys writing, any key elsewhere. */
function refusedKey(route: AnyRoute): Call {
  const as = (request: Call, key: string) => ({
    ...request,
    auth: null,
    headers: { ...request.headers, ...bearer(key).headers },
  });
  if (route.access === 'admin' || route.access === 'metrics') return as(sample(route), serviceKey);
  if (route.access === 'write') return as(sample(route), anonKey);
  return as(sample(route, otherSchema), anonKey);
}

/** The methods of every route whose template matches `path`, as API Gateway would match them. */
function methodsAt(path: string, among = ROUTES): Method[] {
  const matches = (template: string) =>
    new RegExp(`^${template.replace(/\{[^/]+\}/g, '[^/]+')}/?$`).test(path);
  return [...new Set(among.filter(({ route }) => matches(route.path)).map(({ route }) => route.method))];
}
const sameFunction = (entry: (typeof ROUTES)[number]) =>
  ROUTES.filter(({ handler }) => handler === entry.handler);

const inputs = (route: AnyRoute) => Boolean(route.params || route.query || route.body);
const authenticated = ROUTES.filter(({ route }) => route.access !== 'public');
const withBody = ROUTES.filter(({ route }) => route.body);
const sayingJson = ROUTES.filter(({ route }) => route.body || requiresJsonContentType(route));
const uploading = ROUTES.filter(({ route }) => route.upload);
const named = (entries: typeof ROUTES) => entries.map((entry) => [operationOf(entry.route), entry] as const);

// ---------------------------------------------------------------- setup

beforeAll(async () => {
  await h.start();
  await h.deploy();
  document = (await call(meta.handler, { path: '/api/openapi.json', auth: null })).body;
  schema = await freshSchema('oas');
  otherSchema = await freshSchema('oasother');
  await run(
    "CREATE TABLE items (id serial PRIMARY KEY, name text); INSERT INTO items (name) VALUES ('a'), ('b'); CREATE TABLE empty (id serial PRIMARY KEY)",
  );
  anonKey = await makeKey('anon');
  serviceKey = await makeKey('service_role');
}, 60_000);

afterAll(async () => {
  await Promise.all(opened.map((c) => c.end().catch(() => undefined)));
  await h.close();
  await closePool();
});

/** Settings changed for the enclosing describe, as a restart with them would. */
function withSettings(settings: Record<string, string>) {
  const saved: Record<string, string | undefined> = {};
  beforeAll(() => {
    for (const [name, value] of Object.entries(settings)) {
      saved[name] = process.env[name];
      process.env[name] = value;
    }
    resetConfig();
  });
  afterAll(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    resetConfig();
  });
}

// ---------------------------------------------------------------- the tests

describe('each operation’s own answers', () => {
  const cases = ROUTES.flatMap(({ route, handler }) =>
    (CASES[operationOf(route)] ?? []).map(
      (c) => [operationOf(route), c.status, c.why, route, handler, c] as const,
    ),
  );
  it.each(cases)('%s answers %i (%s) as documented', async (_, status, _why, route, handler, c) => {
    const request = await c.request();
    const reply = await call(handler, request);
    expectDocumented(route, status, reply);
    if (reply.status < 300) await expectAudited(route, request, reply);
  });
});

describe('507 while the schema is over its storage quota', () => {
  const setQuota = (storageBytes: number | null) =>
    call(tenants.handler, {
      method: 'PUT',
      path: `/api/tenants/${schema}/quota`,
      body: { statementTimeoutMs: null, connectionLimit: null, storageBytes },
    });
  const adding = ROUTES.filter(({ route }) => route.addsData);
  const requests = new Map<AnyRoute, Call>();
  // Each route's success request, made (an import opened, a table to copy) before the quota is.
  beforeAll(async () => {
    for (const { route } of adding) {
      const success = (CASES[operationOf(route)] ?? []).find((c) => c.status < 300);
      if (success) requests.set(route, await success.request());
    }
    expect((await setQuota(1)).body.overStorage).toBe(true);
  });
  afterAll(async () => {
    await setQuota(null);
  });

  it.each(named(adding))('%s: 507', async (_, entry) => {
    const request = requests.get(entry.route);
    if (!request) throw new Error(`${operationOf(entry.route)} has no success case`);
    expectDocumented(entry.route, 507, await call(entry.handler, request));
  });

  it('POST /api/query: 507 for a key’s statement that writes', async () => {
    const route = query.routes[0] as AnyRoute;
    const reply = await call(query.handler, {
      method: 'POST',
      path: '/api/query',
      body: { sql: "INSERT INTO items (name) VALUES ('over')" },
      ...bearer(serviceKey),
    });
    expectDocumented(route, 507, reply);
  });
});

describe('bundles past IMPORT_MAX_BYTES', () => {
  const { set, restore } = changingSettings();
  const routeOf = (operation: string) =>
    ROUTES.find(({ route }) => operationOf(route) === operation)?.route as AnyRoute;

  it('POST /api/backups and POST /api/restores: 413', async () => {
    const backup = await madeBackup();
    set({ IMPORT_MAX_BYTES: '100' });
    try {
      const made = await call(schemas.handler, {
        method: 'POST',
        path: '/api/backups',
        query: { schema: backup.schema },
        headers: JSON_TYPE,
      });
      expectDocumented(routeOf('POST /api/backups'), 413, made);
      const opened = await call(schemas.handler, {
        method: 'POST',
        path: '/api/restores',
        body: { schema: backup.schema, mode: 'replace', manifest: backup.manifest },
      });
      expectDocumented(routeOf('POST /api/restores'), 413, opened);
    } finally {
      restore();
    }
  });
});

describe('answers of the chain, from the route table', () => {
  it.each(named(ROUTES.filter(({ route }) => inputs(route))))(
    '%s: 400 for invalid input',
    async (_, entry) => {
      expectDocumented(entry.route, 400, await call(entry.handler, badInput(entry.route)));
    },
  );

  it.each(named(authenticated))('%s: 401 without credentials', async (_, entry) => {
    expectDocumented(entry.route, 401, await call(entry.handler, { ...sample(entry.route), auth: null }));
  });

  it.each(named(authenticated.filter(({ route }) => route.access !== 'metrics')))(
    '%s: 403 for a key it refuses',
    async (_, entry) => {
      expectDocumented(entry.route, 403, await call(entry.handler, refusedKey(entry.route)));
    },
  );

  it.each(named(withBody))('%s: 413 for a body over 1 MiB', async (_, entry) => {
    const body = JSON.stringify({ padding: 'x'.repeat(MAX_BODY_BYTES) });
    const headers = { 'content-type': 'application/json' };
    expectDocumented(entry.route, 413, await call(entry.handler, { ...sample(entry.route), body, headers }));
  });

  it.each(named(uploading))('%s: 413 for a file over its limit', async (_, entry) => {
    const body = 'x'.repeat((entry.route.upload?.maxBytes ?? 0) + 1);
    expectDocumented(entry.route, 413, await call(entry.handler, { ...sample(entry.route), body }));
  });

  it.each(named(uploading))('%s: 415 for a body of a type it does not take', async (_, entry) => {
    const request = { ...sample(entry.route), body: 'a=1', headers: { 'content-type': 'text/plain' } };
    expectDocumented(entry.route, 415, await call(entry.handler, request));
  });

  it.each(named(sayingJson))('%s: 415 for a body that is not JSON', async (_, entry) => {
    const request = { ...sample(entry.route), body: 'a=1', headers: { 'content-type': 'text/plain' } };
    expectDocumented(entry.route, 415, await call(entry.handler, request));
  });

  const paths = [...new Set(ROUTES.map(({ route }) => route.path))];
  it.each(paths)(
    '%s: 405 with Allow for a method no route there takes, from its function and from the catch-all',
    async (template) => {
      const here = ROUTES.filter(({ route }) => route.path === template);
      const first = here[0] as (typeof ROUTES)[number];
      const path = pathOf(first.route);
      const method = (['PUT', 'PATCH', 'DELETE', 'POST', 'GET'] as Method[]).find(
        (m) => !methodsAt(path).includes(m),
      );
      for (const handler of [first.handler, meta.handler]) {
        const reply = await call(handler, { ...sample(first.route), method });
        for (const { route } of here) expectDocumented(route, 405, reply);
        expect(String(headerOf(reply, 'allow')).split(', ')).toEqual(
          expect.arrayContaining(methodsAt(path, handler === meta.handler ? ROUTES : sameFunction(first))),
        );
      }
    },
  );
});

describe('402 with LICENSE_ENFORCEMENT=strict and no license', () => {
  withSettings({ LICENSE_ENFORCEMENT: 'strict' });
  beforeAll(() => h.deploy({ env: { LICENSE_ENFORCEMENT: 'strict' } }));
  afterAll(() => h.deploy());

  it.each(named(authenticated.filter(({ route }) => behindLicenseGate(route))))(
    '%s: 402',
    async (_, entry) => {
      expectDocumented(entry.route, 402, await call(entry.handler, sample(entry.route)));
    },
  );
});

describe('429 from an address that failed to sign in too often', () => {
  const BLOCKED = '192.0.2.99';
  withSettings({ AUTH_MAX_FAILURES: '1' });
  beforeAll(async () => {
    await call(schemas.handler, {
      path: '/api/schemas',
      auth: { ...ADMIN, pass: 'guess' },
      sourceIp: BLOCKED,
    });
  });

  it('POST /api/session: 429 for a right password from it', async () => {
    // Made from an address of its own: this block allows one failure, and 401s were asked before.
    const { login } = await newPerson('analyst', { sourceIp: '192.0.2.100' });
    const entry = ROUTES.find(({ route }) => operationOf(route) === 'POST /api/session');
    const reply = await call(people.handler, {
      method: 'POST',
      path: '/api/session',
      auth: null,
      sourceIp: BLOCKED,
      body: { login, password: PERSON_PASSWORD },
    });
    expectDocumented((entry as (typeof ROUTES)[number]).route, 429, reply);
  });

  it.each(named(authenticated))('%s: 429 even with the right credentials', async (_, entry) => {
    expectDocumented(
      entry.route,
      429,
      await call(entry.handler, { ...sample(entry.route), sourceIp: BLOCKED }),
    );
  });
});

describe('413 for results over QUERY_MAX_ROWS / QUERY_MAX_BYTES', () => {
  withSettings({ QUERY_MAX_ROWS: '1', QUERY_MAX_BYTES: '1000' });
  const route = (operation: string) => {
    const entry = ROUTES.find(({ route }) => operationOf(route) === operation);
    if (!entry) throw new Error(`no route ${operation}`);
    return entry;
  };

  it.each<[string, () => Call]>([
    ['GET /api/table/{tableName}', () => ({ path: '/api/table/items', query: { schema } })],
    ['GET /api/table/{tableName}/export', () => ({ path: '/api/table/items/export', query: { schema } })],
    [
      'POST /api/query',
      () => ({ method: 'POST', path: '/api/query', body: { sql: 'SELECT * FROM items', schema } }),
    ],
    [
      'POST /api/table/{tableName}/rows',
      () => ({ method: 'POST', path: '/api/table/items/rows', body: { rows: [{}, {}], schema } }),
    ],
    [
      'PATCH /api/table/{tableName}/rows',
      () => ({
        method: 'PATCH',
        path: '/api/table/items/rows',
        query: { all: 'true' },
        body: { set: { name: 'z' }, schema },
      }),
    ],
  ])('%s: 413 for too many rows', async (operation, request) => {
    const { route: found, handler } = route(operation);
    expectDocumented(found, 413, await call(handler, request()));
  });

  it('DELETE /api/table/{tableName}/row/{rowId}: 413 when code planted in the schema floods the wire', async () => {
    const table = await scratchTable();
    await run(`
      CREATE FUNCTION ${table}_noise() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE NOTICE '%', repeat('x', 3000000); PERFORM pg_sleep(0.2); RETURN OLD; END $$;
      CREATE TRIGGER noise AFTER DELETE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${table}_noise()`);
    const { route: found, handler } = route('DELETE /api/table/{tableName}/row/{rowId}');

    const reply = await call(handler, {
      method: 'DELETE',
      path: `/api/table/${table}/row/1`,
      query: { schema },
    });

    expectDocumented(found, 413, reply);
  });
});

describe('413 for an answer over the 6 MB a Lambda response may carry', () => {
  withSettings({ QUERY_MAX_BYTES: String(20 * 1024 * 1024) });

  it('POST /api/query: 413', async () => {
    const entry = ROUTES.find(({ route }) => operationOf(route) === 'POST /api/query');
    const big = { sql: "SELECT repeat('x', 7000000) AS big", schema };

    const reply = await call(query.handler, { method: 'POST', path: '/api/query', body: big });

    expectDocumented((entry as (typeof ROUTES)[number]).route, 413, reply);
  });
});

/** Statuses no request can provoke on demand: a lock fight, an outage, a bug. */
const UNPROVOKED = new Set(['409', '500', '503']);

/** Without input, only the function's deadline answers 400 (Query timeout). */
const onlyDeadline = (route: AnyRoute, status: string) =>
  status === '400' && !inputs(route) && !route.errors?.some((answer) => answer.status === 400);

/** A 413 that only an answer of 6 MB gives: lists or catalogs that large are not made here. */
const onlyResponseLimit = (route: AnyRoute, status: string) =>
  status === '413' &&
  !route.body &&
  (route.errors ?? []).filter((answer) => answer.status === 413).every((answer) => answer === RESPONSE_LIMIT);

describe('single sign-on, not set up', () => {
  it('GET /api/sso/start: 404', async () => {
    const route = ROUTES.find(({ route }) => operationOf(route) === 'GET /api/sso/start');
    expectDocumented(
      route?.route as AnyRoute,
      404,
      await call(people.handler, { path: '/api/sso/start', auth: null }),
    );
  });

  it('GET /api/sso/callback: 404', async () => {
    const route = ROUTES.find(({ route }) => operationOf(route) === 'GET /api/sso/callback');
    const query = { state: 'x', code: 'y' };
    expectDocumented(
      route?.route as AnyRoute,
      404,
      await call(people.handler, { path: '/api/sso/callback', auth: null, query }),
    );
  });
});

describe('single sign-on, with its provider', () => {
  const REDIRECT = 'http://localhost:3000/api/sso/callback';
  let provider: TestOidcProvider;
  const { saved, set, restore } = changingSettings();
  const routeOf = (operation: string) =>
    ROUTES.find(({ route }) => operationOf(route) === operation)?.route as AnyRoute;
  const start = async () => {
    const reply = await call(people.handler, { path: '/api/sso/start', auth: null });
    return { reply, cookie: (reply.headers['set-cookie'] ?? '').split(';')[0] ?? '' };
  };
  const answered = async (login: string) => {
    const { reply, cookie } = await start();
    const back = await provider.signIn(reply.headers.location ?? '', login);
    return { query: Object.fromEntries(back.searchParams), cookie };
  };
  const callback = (query: Record<string, string>, cookie: string) =>
    call(people.handler, { path: '/api/sso/callback', auth: null, query, headers: { cookie } });

  beforeAll(async () => {
    provider = await TestOidcProvider.start([REDIRECT], {
      owner: { email: 'sso-owner@example.test', email_verified: true, groups: ['admins'] },
    });
    set(provider.settings(REDIRECT, { OIDC_ROLE_MAP: 'admins=owner' }));
  }, 60_000);
  afterAll(async () => {
    restore();
    await provider?.stop();
  });

  it('GET /api/sso: 200', async () => {
    const reply = await call(people.handler, { path: '/api/sso', auth: null });
    expectDocumented(routeOf('GET /api/sso'), 200, reply);
    expect(reply.body).toEqual({ enabled: true, ssoOnly: false, startUrl: '/api/sso/start' });
  });

  it('GET /api/sso/start: 303 to the provider, 400 for a page outside the console', async () => {
    expectDocumented(routeOf('GET /api/sso/start'), 303, (await start()).reply);
    const outside = await call(people.handler, {
      path: '/api/sso/start',
      auth: null,
      query: { returnTo: 'https://elsewhere.example' },
    });
    expectDocumented(routeOf('GET /api/sso/start'), 400, outside);
  });

  it('GET /api/sso/callback: 303 signed in, 400 forged, 403 without a role', async () => {
    const route = routeOf('GET /api/sso/callback');
    const good = await answered('owner');
    expectDocumented(route, 303, await callback(good.query, good.cookie));
    expectDocumented(route, 400, await callback({ ...good.query }, good.cookie));
    const stranger = await answered('stranger');
    expectDocumented(route, 403, await callback(stranger.query, stranger.cookie));
  });

  it('GET /api/sso/callback: 429 for an address whose answers keep being refused', async () => {
    set({ AUTH_MAX_FAILURES: '1' });
    try {
      const refused = (query: Record<string, string>) =>
        call(people.handler, { path: '/api/sso/callback', auth: null, sourceIp: '100.64.42.9', query });
      await refused({ state: 'x' });
      expectDocumented(routeOf('GET /api/sso/callback'), 429, await refused({ state: 'y' }));
    } finally {
      set({ AUTH_MAX_FAILURES: saved.AUTH_MAX_FAILURES ?? '100000' });
    }
  });

  it('POST /api/session and /api/session/invitation: 403 for a person under SSO_ONLY', async () => {
    const person = await newPerson();
    const invited = await newPerson('analyst', { invited: true });
    set({ SSO_ONLY: 'true' });
    try {
      const signIn = await call(people.handler, {
        method: 'POST',
        path: '/api/session',
        auth: null,
        body: { login: person.login, password: PERSON_PASSWORD },
      });
      expectDocumented(routeOf('POST /api/session'), 403, signIn);
      const accept = await call(people.handler, {
        method: 'POST',
        path: '/api/session/invitation',
        auth: null,
        body: { token: invited.invitation as string, password: PERSON_PASSWORD },
      });
      expectDocumented(routeOf('POST /api/session/invitation'), 403, accept);
    } finally {
      set({ SSO_ONLY: 'false' });
    }
  });

  it('GET /api/sso/start and /api/sso/callback: 502 when the provider does not answer', async () => {
    const pending = await answered('owner');
    set({ OIDC_ISSUER: 'https://127.0.0.1:9' });
    try {
      expectDocumented(routeOf('GET /api/sso/start'), 502, (await start()).reply);
      expectDocumented(routeOf('GET /api/sso/callback'), 502, await callback(pending.query, pending.cookie));
    } finally {
      set({ OIDC_ISSUER: provider.issuer });
    }
  });
});

describe('the document and this test', () => {
  it('saw every route that changes something write its audit entry with its change', () => {
    const changing = ROUTES.filter(({ route }) => route.method !== 'GET' && route.audit !== false);
    expect(ROUTES.filter(({ route }) => route.method !== 'GET' && route.audit === undefined)).toEqual([]);
    expect(changing.map(({ route }) => operationOf(route)).filter((op) => !audited.has(op))).toEqual([]);
  });

  it('drive every operation of the document to its success', () => {
    const operations = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`),
    );
    const succeeded = operations.filter((operation) =>
      [...exercised].some((seen) => seen.startsWith(`${operation} 2`) || seen.startsWith(`${operation} 303`)),
    );

    expect(operations.length).toBe(ROUTES.length);
    expect(succeeded).toEqual(operations);
  });

  it('provoke every status an operation lists, but those no request can cause', () => {
    const missed = ROUTES.flatMap(({ route }) =>
      Object.keys(operationIn(route.path, route.method).responses)
        .filter((status) => !UNPROVOKED.has(status))
        .filter((status) => !onlyDeadline(route, status) && !onlyResponseLimit(route, status))
        .filter((status) => !exercised.has(`${operationOf(route)} ${status}`))
        .map((status) => `${operationOf(route)} ${status}`),
    );

    expect(missed).toEqual([]);
  });
});
