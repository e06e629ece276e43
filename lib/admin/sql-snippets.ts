import type pg from 'pg';
import { inScope, outsideScope } from '#lib/access';
import type { AuditDraft } from '#lib/db/audit-log';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { ApiError, Forbidden, NotFound } from '#lib/errors';
import { ownerOf, type Principal } from '#lib/principal';

/**
 * Named SQL the editor keeps: saved by a person (or AUTH_USER's administrator) for themselves, or
 * shared with the team. A shared snippet is read by everyone whose scope holds its schema (every
 * person when it names none); only whoever saved it changes or deletes it, besides the
 * administrator and owners. A snippet is text: running it is POST /api/query, with its rights.
 */

export interface Snippet {
  id: number;
  name: string;
  sql: string;
  /** The schema it is meant for; null: any. */
  schema: string | null;
  shared: boolean;
  /** Who saved it: a person's login, or "admin". */
  author: string;
  /** Whether the caller saved it (and may change it). */
  mine: boolean;
  updatedAt: string;
}

export interface SnippetInput {
  name: string;
  sql: string;
  schema?: string | null | undefined;
  shared?: boolean | undefined;
}

const COLUMNS = `id, name, sql, schema_name AS schema, shared, author, owner = $1 AS mine,
  pg_catalog.to_char(pg_catalog.timezone('UTC', updated_at), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS "updatedAt"`;

/** The scope a principal reads shared snippets in: null, every schema. */
const scopeOf = (principal: Principal | undefined) =>
  principal?.kind === 'person' && principal.schemas !== null ? [...principal.schemas] : null;

const authorOf = (principal: Principal | undefined) =>
  principal?.kind === 'person' ? principal.login : 'admin';

/** A snippet's schema must be one the person may reach: naming it shares it with that schema's people. */
function assertReachable(principal: Principal | undefined, schema: string | null | undefined) {
  if (principal?.kind === 'person' && schema && !inScope(principal, schema))
    throw outsideScope(principal, schema);
}

/** One statement and its audit entry, committed together. */
const audited = (db: pg.Pool, audit: AuditDraft | undefined, statement: pg.QueryConfig) =>
  withTransaction(db, (client) => client.query<Snippet>(statement), { audit });

const nameTaken = (name: string) =>
  new ApiError(
    409,
    'Snippet exists',
    `you already have a snippet named "${name}"; choose another name or change that one`,
  );

/** The caller's own snippets and the shared ones they may read, by name. */
export async function listSnippets(db: pg.Pool, principal: Principal | undefined): Promise<Snippet[]> {
  const { rows } = await db.query<Snippet>({
    name: 'dbadmin.snippets',
    text: `SELECT ${COLUMNS} FROM _dbadmin.sql_snippets
            WHERE owner = $1
               OR (shared AND (schema_name IS NULL OR $2::text[] IS NULL OR schema_name = ANY ($2)))
            ORDER BY pg_catalog.lower(name), id`,
    values: [ownerOf(principal), scopeOf(principal)],
  });
  return rows;
}

export async function createSnippet(
  db: pg.Pool,
  principal: Principal | undefined,
  input: SnippetInput,
  audit: AuditDraft | undefined,
) {
  assertReachable(principal, input.schema);
  try {
    const { rows } = await audited(db, audit, {
      text: `INSERT INTO _dbadmin.sql_snippets (owner, author, name, sql, schema_name, shared)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${COLUMNS}`,
      values: [
        ownerOf(principal),
        authorOf(principal),
        input.name,
        input.sql,
        input.schema ?? null,
        input.shared ?? false,
      ],
    });
    return rows[0] as Snippet;
  } catch (error) {
    if (isPgError(error) && error.code === '23505') throw nameTaken(input.name);
    throw error;
  }
}

/** Who may change a snippet: whoever saved it, the administrator, an owner. */
const changesAny = (principal: Principal | undefined) =>
  principal === undefined ||
  principal.kind === 'admin' ||
  (principal.kind === 'person' && principal.role === 'owner' && principal.schemas === null);

/**
 * The snippet as the caller may change it: 404 when they cannot read it (so its existence is not
 * told), 403 when they read it but did not save it.
 */
async function changeable(db: pg.Pool, principal: Principal | undefined, id: number) {
  const visible = (await listSnippets(db, principal)).find((snippet) => snippet.id === id);
  const any = changesAny(principal);
  if (!visible && !any)
    throw new NotFound(
      'Snippet not found',
      `there is no snippet ${id} of yours or shared with you; see GET /api/sql/snippets`,
    );
  if (visible && !visible.mine && !any) {
    throw new Forbidden(`snippet ${id} is ${visible.author}'s: save a copy under your own name to change it`);
  }
}

export async function updateSnippet(
  db: pg.Pool,
  principal: Principal | undefined,
  id: number,
  input: Partial<SnippetInput>,
  audit: AuditDraft | undefined,
) {
  await changeable(db, principal, id);
  assertReachable(principal, input.schema);
  try {
    const { rows } = await audited(db, audit, {
      text: `UPDATE _dbadmin.sql_snippets
                SET name = coalesce($3, name), sql = coalesce($4, sql),
                    schema_name = CASE WHEN $5 THEN $6 ELSE schema_name END,
                    shared = coalesce($7, shared), updated_at = pg_catalog.now()
              WHERE id = $2 RETURNING ${COLUMNS}`,
      values: [
        ownerOf(principal),
        id,
        input.name ?? null,
        input.sql ?? null,
        input.schema !== undefined,
        input.schema ?? null,
        input.shared ?? null,
      ],
    });
    if (!rows[0])
      throw new NotFound('Snippet not found', `there is no snippet ${id}; see GET /api/sql/snippets`);
    return rows[0];
  } catch (error) {
    if (isPgError(error) && error.code === '23505') throw nameTaken(input.name ?? '');
    throw error;
  }
}

export async function deleteSnippet(
  db: pg.Pool,
  principal: Principal | undefined,
  id: number,
  audit: AuditDraft | undefined,
) {
  await changeable(db, principal, id);
  const { rowCount } = await audited(db, audit, {
    text: 'DELETE FROM _dbadmin.sql_snippets WHERE id = $1',
    values: [id],
  });
  if (!rowCount)
    throw new NotFound('Snippet not found', `there is no snippet ${id}; see GET /api/sql/snippets`);
  return { success: true as const, message: `Snippet ${id} deleted` };
}
