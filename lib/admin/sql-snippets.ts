import type pg from 'pg';
import { inScope, outsideScope } from '#lib/access';
import type { AuditDraft } from '#lib/db/audit-log';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { ApiError, Forbidden, NotFound } from '#lib/errors';
import { ownerOf, type Principal } from '#lib/principal';

/**
 * Named SQL the editor keeps: saved by a person (or AUTH_USER's administrator) for themselves, or
 * shared with the team. A snippet naming a schema is seen only by people whose scope holds it (its
 * author too, through a token narrowed to other schemas); one naming none, by everyone it is
 * shared with. Only whoever saved it changes it; the administrator and unscoped owners may delete
 * anyone's. A snippet is text: running it is POST /api/query, with the runner's rights.
 */

/** A snippet's SQL at most, and how many a person keeps and a list answers: the list stays under 3 MB. */
export const SNIPPET_SQL_CHARS = 10_000;
export const SNIPPETS_KEPT = 200;
export const SNIPPETS_LISTED = 300;

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

/** Which snippets the caller sees ($1 their owner name, $2 their scope, null for every schema). */
const VISIBLE = `(owner = $1 OR shared) AND (schema_name IS NULL OR $2::text[] IS NULL OR schema_name = ANY ($2))`;

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

const notFound = (id: number) =>
  new NotFound(
    'Snippet not found',
    `there is no snippet ${id} of yours or shared with you; see GET /api/sql/snippets`,
  );

/** The caller's own snippets and the shared ones they may read, by name. */
export async function listSnippets(db: pg.Pool, principal: Principal | undefined): Promise<Snippet[]> {
  const { rows } = await db.query<Snippet>({
    name: 'dbadmin.snippets',
    // One's own first within the cap, then all by name.
    text: `SELECT * FROM (SELECT ${COLUMNS} FROM _dbadmin.sql_snippets WHERE ${VISIBLE}
                           ORDER BY owner = $1 DESC, pg_catalog.lower(name), id LIMIT ${SNIPPETS_LISTED}) AS listed
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
  const owner = ownerOf(principal);
  try {
    const { rows } = await audited(db, audit, {
      // Counted in the same statement: two saves at once may both pass, one snippet over at most.
      text: `INSERT INTO _dbadmin.sql_snippets (owner, author, name, sql, schema_name, shared)
             SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::boolean
              WHERE (SELECT pg_catalog.count(*) FROM _dbadmin.sql_snippets WHERE owner = $1) < ${SNIPPETS_KEPT}
             RETURNING ${COLUMNS}`,
      values: [
        owner,
        authorOf(principal),
        input.name,
        input.sql,
        input.schema ?? null,
        input.shared ?? false,
      ],
    });
    if (!rows[0]) {
      throw new ApiError(
        409,
        'Too many snippets',
        `you keep ${SNIPPETS_KEPT} snippets already: delete some first`,
      );
    }
    return rows[0];
  } catch (error) {
    if (isPgError(error) && error.code === '23505') throw nameTaken(input.name);
    throw error;
  }
}

/**
 * The snippet as the caller may change it: 404 when they cannot see it (its existence is not
 * told), 403 when it is someone else's. Deleting, the administrator and unscoped owners may
 * reach anyone's, as they could any row of dbadmin's own data; changing, only its author.
 */
async function changeable(db: pg.Pool, principal: Principal | undefined, id: number, deleting: boolean) {
  const { rows } = await db.query<Snippet>({
    text: `SELECT ${COLUMNS} FROM _dbadmin.sql_snippets WHERE id = $2`,
    values: [ownerOf(principal), id],
  });
  const found = rows[0];
  const anyone =
    deleting &&
    (principal === undefined ||
      principal.kind === 'admin' ||
      (principal.kind === 'person' && principal.role === 'owner' && principal.schemas === null));
  if (found?.mine || (found && anyone)) return;
  const seen =
    found && (found.shared || found.mine) && (found.schema === null || inScopeOf(principal, found.schema));
  if (!seen) throw notFound(id);
  throw new Forbidden(`snippet ${id} is ${found.author}'s: save a copy under your own name to change it`);
}

const inScopeOf = (principal: Principal | undefined, schema: string) =>
  principal?.kind !== 'person' || inScope(principal, schema);

export async function updateSnippet(
  db: pg.Pool,
  principal: Principal | undefined,
  id: number,
  input: Partial<SnippetInput>,
  audit: AuditDraft | undefined,
) {
  await changeable(db, principal, id, false);
  assertReachable(principal, input.schema);
  try {
    const { rows } = await audited(db, audit, {
      text: `UPDATE _dbadmin.sql_snippets
                SET name = coalesce($3, name), sql = coalesce($4, sql),
                    schema_name = CASE WHEN $5 THEN $6 ELSE schema_name END,
                    shared = coalesce($7, shared), updated_at = pg_catalog.now()
              WHERE id = $2 AND owner = $1 RETURNING ${COLUMNS}`,
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
    if (!rows[0]) throw notFound(id);
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
  await changeable(db, principal, id, true);
  const { rowCount } = await audited(db, audit, {
    text: 'DELETE FROM _dbadmin.sql_snippets WHERE id = $1',
    values: [id],
  });
  if (!rowCount) throw notFound(id);
  return { success: true as const, message: `Snippet ${id} deleted` };
}
