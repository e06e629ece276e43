import { z } from 'zod';
import { statementBounds } from '#lib/admin/query-statements';
import { forgetHistory, HISTORY_KEPT, readHistory } from '#lib/admin/sql-history';
import {
  createSnippet,
  deleteSnippet,
  listSnippets,
  SNIPPET_SQL_CHARS,
  SNIPPETS_KEPT,
  SNIPPETS_LISTED,
  updateSnippet,
} from '#lib/admin/sql-snippets';
import { getDatabase } from '#lib/db/pool';
import type { Answer } from '#lib/http/answers';
import { defineRoute } from '#lib/http/route';
import { queryInt, schemaRef, sqlText } from '#lib/validation';

/**
 * The SQL editor's library, served by the query function: each person's history of what they ran
 * (kept by POST /api/query with history: true) and the named snippets they save for themselves or
 * share with the team. People and the administrator only; API keys have neither.
 */

const HistoryEntry = z.object({
  id: z.number(),
  schema: z.string(),
  sql: z.string(),
  cut: z
    .boolean()
    .meta({ description: 'the script was longer than is kept (100,000 characters) and is cut' }),
  ranAt: z.string().meta({ description: 'when it ended, UTC, to the microsecond' }),
  durationMs: z.number().nullable(),
  ok: z.boolean(),
  rowCount: z.number().nullable(),
  error: z.string().nullable().meta({ description: 'why it failed, as its answer said' }),
});

const Snippet = z.object({
  id: z.number(),
  name: z.string(),
  sql: z.string(),
  schema: z.string().nullable().meta({ description: 'the schema it is meant for; null: any' }),
  shared: z.boolean(),
  author: z.string().meta({ description: 'who saved it: a person’s login, or admin' }),
  mine: z.boolean().meta({ description: 'whether you saved it (and may change it)' }),
  updatedAt: z.string(),
});

const snippetName = z
  .string()
  .trim()
  .min(1, 'name must not be empty')
  .max(200, 'name must be at most 200 characters');
const snippetSql = z
  .string()
  .min(1, 'sql must not be empty')
  .max(
    SNIPPET_SQL_CHARS,
    `sql must be at most ${SNIPPET_SQL_CHARS} characters: keep longer scripts in files`,
  );
const snippetId = z.object({ id: queryInt('id', 1, 2_147_483_647) });
const NO_SNIPPET: Answer = { status: 404, why: 'no snippet of that id is yours or shared with you' };
const NOT_YOURS: Answer = {
  status: 403,
  why: 'the snippet is someone else’s, shared with you: read, not changed',
};
const NAME_TAKEN: Answer = { status: 409, why: 'you already have a snippet of that name' };

export const libraryRoutes = [
  defineRoute({
    method: 'POST',
    path: '/api/sql/split',
    // Parses, runs nothing, changes nothing: no entry.
    audit: false,
    summary:
      'Where each statement of a script starts and ends, as PostgreSQL’s parser splits it (character offsets): the console runs them one transaction each',
    access: 'person',
    body: z.strictObject({ sql: sqlText }),
    response: z.object({
      statements: z.array(
        z.object({
          start: z.number().meta({ description: 'characters (code points) before it' }),
          end: z.number().meta({ description: 'characters up to its end' }),
          query: z.boolean().meta({ description: 'a plain query (SELECT, VALUES, TABLE)' }),
        }),
      ),
    }),
    errors: [{ status: 400, why: 'the parser cannot read the script (the message says where)' }],
    handler: async ({ body }) => ({ statements: await statementBounds(body.sql) }),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/sql/history',
    summary: `Your SQL history, newest first (the last ${HISTORY_KEPT} runs kept), searched by the text it holds`,
    access: 'person',
    query: z.strictObject({
      q: z.string().min(1).max(200).optional().meta({ description: 'text the SQL holds, any case' }),
      before: queryInt('before', 1, Number.MAX_SAFE_INTEGER).optional().meta({
        description: 'the previous page’s next: runs older than it',
      }),
      limit: queryInt('limit', 1, 100).default(50),
    }),
    response: z.object({
      entries: z.array(HistoryEntry),
      next: z.number().nullable().meta({ description: 'pass as before for older runs; null at the oldest' }),
    }),
    handler: async ({ query, principal }) => readHistory(await getDatabase(), principal, query),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/sql/history',
    audit: { action: 'sql.history.clear' },
    summary: 'Forget your whole SQL history',
    access: 'person',
    response: z.object({ success: z.literal(true), forgotten: z.number() }),
    handler: async ({ principal, audit }) => forgetHistory(await getDatabase(), principal, audit),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/sql/snippets',
    summary: `Your snippets and those shared with you whose schema is in your scope, by name (yours first, ${SNIPPETS_LISTED} at most)`,
    access: 'person',
    response: z.object({ snippets: z.array(Snippet) }),
    handler: async ({ principal }) => ({ snippets: await listSnippets(await getDatabase(), principal) }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/sql/snippets',
    audit: { action: 'sql.snippet.create', target: ({ body }) => `snippet ${body.name}` },
    summary: 'Save named SQL for yourself, or shared with the team (shared: true)',
    access: 'person',
    body: z.strictObject({
      name: snippetName,
      sql: snippetSql,
      schema: schemaRef.nullable().optional().meta({
        description:
          'the schema it is meant for, one in your scope; shared, it is read by that schema’s people',
      }),
      shared: z.boolean().optional(),
    }),
    response: Snippet,
    status: 201,
    errors: [
      NAME_TAKEN,
      { status: 403, why: 'the schema is outside your scope' },
      { status: 409, why: `you keep ${SNIPPETS_KEPT} snippets already: delete some first` },
    ],
    handler: async ({ body, principal, audit }) => createSnippet(await getDatabase(), principal, body, audit),
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/sql/snippets/{id}',
    audit: { action: 'sql.snippet.change', target: ({ params }) => `snippet ${params.id}` },
    summary: 'Change your snippet: its name, SQL, schema or whether it is shared',
    access: 'person',
    params: snippetId,
    body: z
      .strictObject({
        name: snippetName.optional(),
        sql: snippetSql.optional(),
        schema: schemaRef.nullable().optional(),
        shared: z.boolean().optional(),
      })
      .refine((body) => Object.keys(body).length > 0, 'name at least one of name, sql, schema, shared'),
    response: Snippet,
    errors: [NO_SNIPPET, NOT_YOURS, NAME_TAKEN],
    handler: async ({ params, body, principal, audit }) =>
      updateSnippet(await getDatabase(), principal, params.id, body, audit),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/sql/snippets/{id}',
    audit: { action: 'sql.snippet.delete', target: ({ params }) => `snippet ${params.id}` },
    summary: 'Delete your snippet (the administrator and unscoped owners may delete anyone’s)',
    access: 'person',
    params: snippetId,
    response: z.object({ success: z.literal(true), message: z.string() }),
    errors: [NO_SNIPPET, NOT_YOURS],
    handler: async ({ params, principal, audit }) =>
      deleteSnippet(await getDatabase(), principal, params.id, audit),
  }),
];
