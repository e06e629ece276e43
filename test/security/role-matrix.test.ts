import { randomBytes } from 'node:crypto';
import * as constraints from '#functions/constraints';
import * as meta from '#functions/meta';
import * as people from '#functions/people';
import * as query from '#functions/query';
import { granted, PERSON_ROLES, type PersonRole } from '#lib/access';
import { closePool } from '#lib/db/pool';
import { type AnyRoute, permissionOf } from '#lib/http/route';
import { tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { type Call, call, type Reply } from '#test/support/http';
import { uniqueName } from '#test/support/names';
import { ROUTES as ALL_ROUTES, operationOf } from '#test/support/routes';

/**
 * Every route × every role × a schema in the person's scope and one outside it, answered as
 * lib/access says (the definition the README's table is generated from): a role without the
 * route's permission is refused before any work; a scoped person naming a schema outside their
 * scope is refused; anyone else gets past access control (whatever the route then answers).
 * SQL a read-only person sends that writes leaves nothing.
 */
jest.setTimeout(120_000);
afterAll(closePool);

type Handler = Parameters<typeof call>[0];
const handlerOf = new Map<AnyRoute, Handler>(
  ALL_ROUTES.map(({ route, handler }) => [route, handler as Handler]),
);

const PASSWORD = 'correct horse battery staple';
const NO_IMPORT = '00000000-0000-4000-8000-000000000000';
const NONE = '999999';
const csv = (text: string) => ({ body: text, headers: { 'content-type': 'text/csv' } });

interface Target {
  /** The schema the request names. */
  schema: string;
  /** A schema made for this request alone (one a route may delete). */
  disposable: () => Promise<string>;
  role: PersonRole;
}

/**
 * A request per route that gets past input validation, naming `schema`; where a route would
 * destroy something, it names nothing that exists, asks for a dry run, or a disposable schema.
 */
const SAMPLES: Record<string, (t: Target) => Call | Promise<Call>> = {
  'GET /api/schemas': () => ({ path: '/api/schemas' }),
  'POST /api/schema/create': () => ({
    method: 'POST',
    path: '/api/schema/create',
    body: { schemaName: uniqueName('m'), password: 'pw-0123456789' },
  }),
  'DELETE /api/schema/{schemaName}': async (t) => ({
    method: 'DELETE',
    path: `/api/schema/${t.schema === inside ? await t.disposable() : t.schema}`,
    query: { cascade: 'true' },
  }),
  'GET /api/drift': ({ schema }) => ({ path: '/api/drift', query: { template: schema } }),
  'GET /api/drift/{schema}': ({ schema }) => ({ path: `/api/drift/${schema}`, query: { against: schema } }),
  'GET /api/drift/{schema}/fix': ({ schema }) => ({
    path: `/api/drift/${schema}/fix`,
    query: { against: schema },
  }),
  'GET /api/migrations': () => ({ path: '/api/migrations' }),
  'POST /api/migrations/preview': ({ schema }) => ({
    method: 'POST',
    path: '/api/migrations/preview',
    body: { name: uniqueName('m'), sql: 'SELECT 1', target: { schemas: [schema] } },
  }),
  'POST /api/migrations': ({ schema }) => ({
    method: 'POST',
    path: '/api/migrations',
    body: { name: uniqueName('m'), sql: 'SELECT 1', target: { schemas: [schema] } },
  }),
  'GET /api/migrations/{id}': () => ({ path: `/api/migrations/${NONE}` }),
  'POST /api/migrations/{id}/run': () => ({ method: 'POST', path: `/api/migrations/${NONE}/run`, body: {} }),
  'POST /api/migrations/{id}/retry': () => ({
    method: 'POST',
    path: `/api/migrations/${NONE}/retry`,
    body: {},
  }),
  'POST /api/backups': ({ schema }) => ({
    method: 'POST',
    path: '/api/backups',
    query: { schema },
    headers: { 'content-type': 'application/json' },
  }),
  'GET /api/backups': ({ schema }) => ({ path: '/api/backups', query: { schema } }),
  'GET /api/backups/{backupId}': ({ schema }) => ({ path: `/api/backups/${NO_IMPORT}`, query: { schema } }),
  'GET /api/backups/{backupId}/parts/{part}': ({ schema }) => ({
    path: `/api/backups/${NO_IMPORT}/parts/1`,
    query: { schema },
  }),
  'DELETE /api/backups/{backupId}': ({ schema }) => ({
    method: 'DELETE',
    path: `/api/backups/${NO_IMPORT}`,
    query: { schema },
  }),
  'POST /api/restores': ({ schema }) => ({
    method: 'POST',
    path: '/api/restores',
    body: { schema, mode: 'replace', manifest: {} },
  }),
  'PUT /api/restores/{restoreId}/parts/{part}': ({ schema }) => ({
    method: 'PUT',
    path: `/api/restores/${NO_IMPORT}/parts/1`,
    query: { schema },
    headers: { 'content-type': 'application/octet-stream' },
    body: 'x',
  }),
  'GET /api/restores/{restoreId}': ({ schema }) => ({
    path: `/api/restores/${NO_IMPORT}`,
    query: { schema },
  }),
  'DELETE /api/restores/{restoreId}': ({ schema }) => ({
    method: 'DELETE',
    path: `/api/restores/${NO_IMPORT}`,
    query: { schema },
  }),
  'POST /api/restores/{restoreId}/commit': ({ schema }) => ({
    method: 'POST',
    path: `/api/restores/${NO_IMPORT}/commit`,
    body: { schema },
  }),
  'GET /api/tables': ({ schema }) => ({ path: '/api/tables', query: { schema } }),
  'GET /api/table/{tableName}': ({ schema }) => ({ path: '/api/table/items', query: { schema } }),
  'POST /api/table/create': ({ schema }) => ({
    method: 'POST',
    path: '/api/table/create',
    body: { schema, tableName: uniqueName('t'), columns: [{ name: 'id', type: 'INTEGER' }] },
  }),
  'DELETE /api/table/{tableName}': ({ schema }) => ({
    method: 'DELETE',
    path: '/api/table/gone',
    query: { schema },
  }),
  'POST /api/table/{tableName}/clone': ({ schema }) => ({
    method: 'POST',
    path: '/api/table/items/clone',
    body: { schema, newTableName: uniqueName('c') },
  }),
  'GET /api/table/{tableName}/export': ({ schema }) => ({
    path: '/api/table/items/export',
    query: { schema },
  }),
  'POST /api/table/{tableName}/column': ({ schema }) => ({
    method: 'POST',
    path: '/api/table/items/column',
    body: { schema, columnName: uniqueName('c'), dataType: 'TEXT' },
  }),
  'GET /api/schema': ({ schema }) => ({ path: '/api/schema', query: { schema } }),
  'PATCH /api/table/{tableName}/column/{columnName}': ({ schema }) => ({
    method: 'PATCH',
    path: '/api/table/items/column/name',
    body: { schema, dryRun: true, comment: 'matrix' },
  }),
  'DELETE /api/table/{tableName}/column/{columnName}': ({ schema }) => ({
    method: 'DELETE',
    path: '/api/table/items/column/gone',
    query: { schema, dryRun: 'true' },
  }),
  'GET /api/table/{tableName}/indexes': ({ schema }) => ({
    path: '/api/table/items/indexes',
    query: { schema },
  }),
  'GET /api/table/{tableName}/indexes/progress': ({ schema }) => ({
    path: '/api/table/items/indexes/progress',
    query: { schema },
  }),
  'POST /api/table/{tableName}/indexes': ({ schema }) => ({
    method: 'POST',
    path: '/api/table/items/indexes',
    body: { schema, columns: ['name'], dryRun: true },
  }),
  'DELETE /api/table/{tableName}/indexes/{indexName}': ({ schema }) => ({
    method: 'DELETE',
    path: '/api/table/items/indexes/gone',
    query: { schema },
  }),
  'GET /api/table/{tableName}/constraints': ({ schema }) => ({
    path: '/api/table/items/constraints',
    query: { schema },
  }),
  'POST /api/table/{tableName}/constraints': ({ schema }) => ({
    method: 'POST',
    path: '/api/table/items/constraints',
    body: { schema, type: 'unique', columns: ['name'], dryRun: true },
  }),
  'DELETE /api/table/{tableName}/constraints/{constraintName}': ({ schema }) => ({
    method: 'DELETE',
    path: '/api/table/items/constraints/gone',
    query: { schema },
  }),
  'PATCH /api/table/{tableName}': ({ schema }) => ({
    method: 'PATCH',
    path: '/api/table/items',
    body: { schema, dryRun: true, comment: 'matrix' },
  }),
  'GET /api/types': ({ schema }) => ({ path: '/api/types', query: { schema } }),
  'POST /api/types': ({ schema }) => ({
    method: 'POST',
    path: '/api/types',
    body: { schema, name: uniqueName('e'), values: ['a'], dryRun: true },
  }),
  'POST /api/types/{typeName}/values': ({ schema }) => ({
    method: 'POST',
    path: '/api/types/mood/values',
    body: { schema, value: 'b', dryRun: true },
  }),
  'GET /api/views': ({ schema }) => ({ path: '/api/views', query: { schema } }),
  'GET /api/functions': ({ schema }) => ({ path: '/api/functions', query: { schema } }),
  'POST /api/view/{viewName}/refresh': ({ schema }) => ({
    method: 'POST',
    path: '/api/view/item_count/refresh',
    body: { schema },
  }),
  'POST /api/table/{tableName}/row': ({ schema, role }) => ({
    method: 'POST',
    path: '/api/table/items/row',
    body: { schema, data: { name: `row by ${role}` } },
  }),
  'PATCH /api/table/{tableName}/rows': ({ schema }) => ({
    method: 'PATCH',
    path: '/api/table/items/rows',
    query: { filter: 'id.eq.-1' },
    body: { schema, set: { name: 'matrix' } },
  }),
  'PATCH /api/table/{tableName}/{rowId}': ({ schema }) => ({
    method: 'PATCH',
    path: `/api/table/items/${NONE}`,
    body: { schema, column: 'name', value: 'matrix' },
  }),
  'DELETE /api/table/{tableName}/row/{rowId}': ({ schema }) => ({
    method: 'DELETE',
    path: `/api/table/items/row/${NONE}`,
    query: { schema },
  }),
  'POST /api/table/{tableName}/rows': ({ schema, role }) => ({
    method: 'POST',
    path: '/api/table/items/rows',
    body: { schema, rows: [{ name: `rows by ${role}` }] },
  }),
  'POST /api/table/{tableName}/rows/delete': ({ schema }) => ({
    method: 'POST',
    path: '/api/table/items/rows/delete',
    query: { filter: 'id.eq.-1' },
    body: { schema },
  }),
  'POST /api/table/{tableName}/import': ({ schema, role }) => ({
    method: 'POST',
    path: '/api/table/items/import',
    query: { schema },
    ...csv(`name\nimported by ${role}\n`),
  }),
  'POST /api/import/columns': () => ({ method: 'POST', path: '/api/import/columns', ...csv('name\nx\n') }),
  'POST /api/table/{tableName}/imports': ({ schema }) => ({
    method: 'POST',
    path: '/api/table/items/imports',
    body: { schema, format: 'csv' },
  }),
  'PUT /api/table/{tableName}/imports/{importId}/parts/{part}': ({ schema }) => ({
    method: 'PUT',
    path: `/api/table/items/imports/${NO_IMPORT}/parts/1`,
    query: { schema },
    ...csv('name\nx\n'),
  }),
  'GET /api/table/{tableName}/imports/{importId}': ({ schema }) => ({
    path: `/api/table/items/imports/${NO_IMPORT}`,
    query: { schema },
  }),
  'POST /api/table/{tableName}/imports/{importId}/commit': ({ schema }) => ({
    method: 'POST',
    path: `/api/table/items/imports/${NO_IMPORT}/commit`,
    body: { schema, parts: 1 },
  }),
  'DELETE /api/table/{tableName}/imports/{importId}': ({ schema }) => ({
    method: 'DELETE',
    path: `/api/table/items/imports/${NO_IMPORT}`,
    query: { schema },
  }),
  'POST /api/query': ({ schema, role }) => ({
    method: 'POST',
    path: '/api/query',
    body: { schema, sql: `INSERT INTO items (name) VALUES ('sql by ${role}')` },
  }),
  'POST /api/query/export': ({ schema }) => ({
    method: 'POST',
    path: '/api/query/export',
    body: { schema, sql: 'SELECT * FROM items' },
  }),
  'POST /api/query/cancel': () => ({
    method: 'POST',
    path: '/api/query/cancel',
    body: { queryId: 'nothing-running-1' },
  }),
  'POST /api/project/{schema}/keys': ({ schema }) => ({
    method: 'POST',
    path: `/api/project/${schema}/keys`,
    body: { keyName: uniqueName('k') },
  }),
  'GET /api/project/{schema}/keys': ({ schema }) => ({ path: `/api/project/${schema}/keys` }),
  'GET /api/schema/{schemaName}/connection': ({ schema }) => ({ path: `/api/schema/${schema}/connection` }),
  'DELETE /api/project/{schema}/keys/{keyId}': ({ schema }) => ({
    method: 'DELETE',
    path: `/api/project/${schema}/keys/${NONE}`,
  }),
  'GET /api/tenants': () => ({ path: '/api/tenants' }),
  'GET /api/tenants/{schema}': ({ schema }) => ({ path: `/api/tenants/${schema}` }),
  'PUT /api/tenants/{schema}/quota': ({ schema }) => ({
    method: 'PUT',
    path: `/api/tenants/${schema}/quota`,
    body: { statementTimeoutMs: null, connectionLimit: null, storageBytes: null },
  }),
  'POST /api/tenants/{schema}/sessions/{pid}/cancel': ({ schema }) => ({
    method: 'POST',
    path: `/api/tenants/${schema}/sessions/${NONE}/cancel`,
    body: { backendStart: '2020-01-01T00:00:00Z' },
  }),
  'POST /api/tenants/{schema}/sessions/{pid}/terminate': ({ schema }) => ({
    method: 'POST',
    path: `/api/tenants/${schema}/sessions/${NONE}/terminate`,
    body: { backendStart: '2020-01-01T00:00:00Z' },
  }),
  'GET /api/audit': ({ schema }) => ({ path: '/api/audit', query: { schema } }),
  'POST /api/sql/split': () => ({ method: 'POST', path: '/api/sql/split', body: { sql: 'SELECT 1' } }),
  'GET /api/sql/history': () => ({ path: '/api/sql/history' }),
  'DELETE /api/sql/history': () => ({ method: 'DELETE', path: '/api/sql/history' }),
  'GET /api/sql/snippets': () => ({ path: '/api/sql/snippets' }),
  'POST /api/sql/snippets': () => ({
    method: 'POST',
    path: '/api/sql/snippets',
    body: { name: uniqueName('snip'), sql: 'SELECT 1' },
  }),
  'PATCH /api/sql/snippets/{id}': () => ({
    method: 'PATCH',
    path: `/api/sql/snippets/${NONE}`,
    body: { shared: true },
  }),
  'DELETE /api/sql/snippets/{id}': () => ({ method: 'DELETE', path: `/api/sql/snippets/${NONE}` }),
  'GET /api/session': () => ({ path: '/api/session' }),
  'DELETE /api/session': () => ({ method: 'DELETE', path: '/api/session' }),
  'POST /api/me/password': () => ({
    method: 'POST',
    path: '/api/me/password',
    body: { currentPassword: PASSWORD, newPassword: PASSWORD },
  }),
  'GET /api/me/sessions': () => ({ path: '/api/me/sessions' }),
  'DELETE /api/me/sessions/{id}': () => ({ method: 'DELETE', path: `/api/me/sessions/${NONE}` }),
  'GET /api/me/tokens': () => ({ path: '/api/me/tokens' }),
  'POST /api/me/tokens': () => ({ method: 'POST', path: '/api/me/tokens', body: { name: uniqueName('t') } }),
  'DELETE /api/me/tokens/{id}': () => ({ method: 'DELETE', path: `/api/me/tokens/${NONE}` }),
  'GET /api/people': () => ({ path: '/api/people' }),
  'POST /api/people': () => ({
    method: 'POST',
    path: '/api/people',
    body: { login: uniqueName('p'), role: 'analyst', schemas: null },
  }),
  'PATCH /api/people/{id}': () => ({
    method: 'PATCH',
    path: `/api/people/${NONE}`,
    body: { name: 'matrix' },
  }),
  'DELETE /api/people/{id}': () => ({ method: 'DELETE', path: `/api/people/${NONE}` }),
  'POST /api/people/{id}/reset': () => ({ method: 'POST', path: `/api/people/${NONE}/reset` }),
  'GET /api/people/{id}/sessions': () => ({ path: `/api/people/${NONE}/sessions` }),
  'DELETE /api/people/{id}/sessions': () => ({ method: 'DELETE', path: `/api/people/${NONE}/sessions` }),
  'GET /api/metrics': () => ({ path: '/api/metrics' }),
  // Last: an owner's deactivation ends the license every other request here stands on.
  'POST /api/license/deactivate': () => ({ method: 'POST', path: '/api/license/deactivate' }),
};

/** The admin's SQL: a permission of its own, asked by the body (runAs), not by the route. */
const RUN_AS_ADMIN: (t: Target) => Call = ({ schema }) => ({
  method: 'POST',
  path: '/api/query',
  body: { schema, sql: 'SELECT 1', runAs: 'admin' },
});

let inside = '';
let outside = '';

interface Person {
  role: PersonRole;
  scoped: boolean;
  as: (handler: Handler, request: Call) => Promise<Reply>;
}

async function personAs(role: PersonRole, scope: string[] | null): Promise<Person> {
  const login = `m${randomBytes(5).toString('hex')}`;
  const made = await call(people.handler as Handler, {
    method: 'POST',
    path: '/api/people',
    body: { login, role, schemas: scope, password: PASSWORD },
  });
  if (made.status !== 201) throw new Error(`person: ${made.text}`);
  const signIn = async () => {
    const reply = await call(people.handler as Handler, {
      method: 'POST',
      path: '/api/session',
      auth: null,
      body: { login, password: PASSWORD },
    });
    if (reply.status !== 200) throw new Error(`sign-in: ${reply.text}`);
    return {
      cookie: (reply.headers['set-cookie'] ?? '').split(';')[0] ?? '',
      csrf: reply.body.csrfToken as string,
    };
  };
  const session = await signIn();
  return {
    role,
    scoped: scope !== null,
    as: async (handler, request) => {
      // Signing out ends the session: that request gets one of its own.
      const { cookie, csrf } =
        request.path === '/api/session' && request.method === 'DELETE' ? await signIn() : session;
      return call(handler, {
        ...request,
        auth: null,
        headers: { ...request.headers, cookie, 'x-csrf-token': csrf },
      });
    },
  };
}

type Expected = 'permission' | 'scope' | 'allowed' | 'read-only';

/**
 * What lib/access says the answer is. SQL that writes from a person without `write` is not
 * refused by the route: it runs read-only, and PostgreSQL refuses the write.
 */
function expectedFor(route: AnyRoute, person: Person, request: Call): Expected {
  const grant = { role: person.role, schemas: person.scoped ? [inside] : null };
  const permission = permissionOf(route);
  if (permission && !granted(grant, permission)) return 'permission';
  if (person.scoped && JSON.stringify(request).includes(outside)) return 'scope';
  if (operationOf(route) === 'POST /api/query' && !granted(grant, 'write')) return 'read-only';
  return 'allowed';
}

function answeredAs(reply: Reply): Expected | `status ${number}: ${string}` {
  const message = String(reply.body?.message ?? '');
  if (reply.status === 403 && /^your role \(/.test(message)) return 'permission';
  if (reply.status === 403 && /you may reach only the schemas/.test(message)) return 'scope';
  if (reply.status === 403 && reply.body?.error === 'Read-only') return 'read-only';
  if ([401, 402, 403].includes(reply.status) || reply.status >= 500)
    return `status ${reply.status}: ${reply.text.slice(0, 200)}`;
  return 'allowed';
}

const ROUTES = meta.apiRoutes.filter((route) => route.access !== 'public');
const persons: Person[] = [];

beforeAll(async () => {
  inside = await tenantSchema('inside');
  outside = await tenantSchema('outside');
  for (const schema of [inside, outside]) {
    const mood = await call(constraints.handler as Handler, {
      method: 'POST',
      path: '/api/types',
      body: { schema, name: 'mood', values: ['a'] },
    });
    if (mood.status !== 200) throw new Error(`mood: ${mood.text}`);
    const summary = await call(query.handler as Handler, {
      method: 'POST',
      path: '/api/query',
      body: { schema, sql: 'CREATE MATERIALIZED VIEW item_count AS SELECT count(*) AS n FROM items' },
    });
    if (summary.status !== 200) throw new Error(`item_count: ${summary.text}`);
  }
  for (const role of PERSON_ROLES)
    for (const scope of [[inside], null]) persons.push(await personAs(role, scope));
});

it('has a request for every route a person may call, and the handler that serves it', () => {
  expect(ROUTES.map(operationOf).filter((op) => !SAMPLES[op])).toEqual([]);
  expect(ROUTES.filter((route) => !handlerOf.has(route)).map(operationOf)).toEqual([]);
});

describe('SQL with the administrator’s rights (runAs: admin)', () => {
  it.each(PERSON_ROLES.map((role) => [role]))('answers %s as sql.admin says', async (role) => {
    for (const person of persons.filter((p) => p.role === role)) {
      const request = RUN_AS_ADMIN({ schema: inside, role, disposable: async () => inside });
      const reply = await person.as(query.handler as Handler, request);
      const may = granted({ role, schemas: person.scoped ? [inside] : null }, 'sql.admin');
      expect({ scoped: person.scoped, answer: answeredAs(reply) }).toEqual({
        scoped: person.scoped,
        answer: may ? 'allowed' : 'permission',
      });
    }
  });
});

/** One person's request to the route naming `schema`: what it answered and what lib/access says. */
async function answerOf(route: AnyRoute, person: Person, schema: string) {
  const target: Target = { schema, role: person.role, disposable: () => tenantSchema('gone') };
  const request = await (SAMPLES[operationOf(route)] as (t: Target) => Call | Promise<Call>)(target);
  const reply = await person.as(handlerOf.get(route) as Handler, request);
  const where = `${person.scoped ? 'scoped' : 'every schema'}, ${schema === inside ? 'in' : 'out'}`;
  return {
    seen: `${where}: ${answeredAs(reply)}`,
    wanted: `${where}: ${expectedFor(route, person, request)}`,
  };
}

describe.each(ROUTES.map((route) => [operationOf(route), route] as const))('%s', (_, route) => {
  it.each(PERSON_ROLES.map((role) => [role]))(
    'answers each %s as lib/access says, in scope and out',
    async (role) => {
      const answers = [];
      for (const person of persons.filter((p) => p.role === role))
        for (const schema of person.scoped ? [inside, outside] : [inside])
          answers.push(await answerOf(route, person, schema));
      expect(answers.map((a) => a.seen)).toEqual(answers.map((a) => a.wanted));
    },
  );
});

describe('what a read-only person’s writes leave', () => {
  it('leaves no row from any role without write, through SQL or the row routes', async () => {
    const { rows: left } = await withAdminClient((c) =>
      c.query(`SELECT DISTINCT name FROM "${inside}".items WHERE name ~ ' by ' ORDER BY 1`),
    );
    const writers = PERSON_ROLES.filter((role) => granted({ role, schemas: null }, 'write'));
    const names = left.map((r) => r.name as string);
    for (const role of PERSON_ROLES) {
      const wrote = names.filter((name) => name.endsWith(` by ${role}`));
      expect({ role, wrote: wrote.length > 0 }).toEqual({ role, wrote: writers.includes(role) });
    }
    const { rows: elsewhere } = await withAdminClient((c) =>
      c.query(`SELECT count(*)::int AS n FROM "${outside}".items WHERE name ~ ' by '`),
    );
    expect(elsewhere[0].n).toBe(0);
  });
});
