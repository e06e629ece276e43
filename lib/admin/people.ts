import type pg from 'pg';
import { type Grant, type PersonRole, within } from '#lib/access';
import { checkNewPassword, hashPassword, newSecret, secretDigest } from '#lib/admin/passwords';
import { type AuditDraft, signedInAs } from '#lib/db/audit-log';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { ApiError, BadRequest, Forbidden, NotFound } from '#lib/errors';
import type { Person } from '#lib/principal';

/**
 * The people who administer dbadmin (owner only, but their own account): who they are, their role
 * and scope (lib/access), their password or the invitation that lets them set one. Sign-in and
 * the sessions and tokens they hold are lib/admin/person-sessions.
 */

export interface PersonView {
  id: number;
  login: string;
  name: string;
  role: PersonRole;
  /** null: every schema. */
  schemas: string[] | null;
  signsInWith: Array<'password' | 'sso'>;
  createdAt: string;
}

const VIEW = `id, login, display_name AS name, role, schemas,
  pg_catalog.array_remove(ARRAY[CASE WHEN password_hash IS NOT NULL THEN 'password' END,
                                CASE WHEN sso_subject IS NOT NULL THEN 'sso' END], NULL) AS "signsInWith",
  pg_catalog.to_char(pg_catalog.timezone('UTC', created_at), 'YYYY-MM-DD"T"HH24:MI:SS"Z"') AS "createdAt"`;

/** How long an invitation (or a password reset) may be used. */
export const INVITATION_DAYS = 7;

export interface Invitation {
  token: string;
  expiresAt: string;
}

export async function listPeople(db: pg.Pool): Promise<PersonView[]> {
  return (await db.query<PersonView>(`SELECT ${VIEW} FROM _dbadmin.people ORDER BY login`)).rows;
}

export async function getPerson(db: pg.Pool | pg.ClientBase, id: number): Promise<PersonView> {
  const row = (await db.query<PersonView>(`SELECT ${VIEW} FROM _dbadmin.people WHERE id = $1`, [id])).rows[0];
  if (!row) throw new NotFound('Person not found', `there is no person with id ${id}; see GET /api/people`);
  return row;
}

export interface NewPerson extends Grant {
  login: string;
  name?: string | undefined;
  /** Set now; without one, the answer carries an invitation to set it. */
  password?: string | undefined;
}

const taken = (login: string) =>
  new ApiError(409, 'Person exists', `someone already signs in as "${login}"; choose another login`);

/** Adds a person; without a password, with an invitation they use to set one. */
export async function createPerson(
  db: pg.Pool,
  input: NewPerson,
  audit: AuditDraft | undefined,
  now = new Date(),
): Promise<{ person: PersonView; invitation?: Invitation }> {
  if (input.password !== undefined) checkNewPassword(input.password, input.login);
  await assertSchemasExist(db, input.schemas);
  const hash = input.password === undefined ? null : await hashPassword(input.password);
  return withTransaction(
    db,
    async (client) => {
      const { rows } = await client
        .query<{ id: number }>(
          `INSERT INTO _dbadmin.people (login, display_name, role, schemas, password_hash)
         VALUES ($1, $2, $3, $4, $5) RETURNING id`,
          [input.login, input.name ?? input.login, input.role, input.schemas, hash],
        )
        .catch((error: unknown) => {
          throw isPgError(error) && error.code === '23505' ? taken(input.login) : error;
        });
      const id = rows[0]?.id as number;
      const invitation = hash === null ? await invite(client, id, now) : undefined;
      const person = await getPerson(client, id);
      return invitation ? { person, invitation } : { person };
    },
    { audit },
  );
}

/** A new invitation for the person, replacing any earlier one. */
async function invite(client: pg.ClientBase, personId: number, now: Date): Promise<Invitation> {
  const token = newSecret('dbi_');
  const expires = new Date(now.getTime() + INVITATION_DAYS * 86_400_000);
  await client.query('DELETE FROM _dbadmin.person_invitations WHERE person_id = $1', [personId]);
  await client.query(
    'INSERT INTO _dbadmin.person_invitations (token_hash, person_id, expires_at) VALUES ($1, $2, $3)',
    [secretDigest(token), personId, expires],
  );
  return { token, expiresAt: expires.toISOString() };
}

/** Who is asking to change `id`: an owner may not lock themselves out (the AUTH_USER administrator always may). */
function notOneself(actor: Person | undefined, id: number, what: string): void {
  if (actor?.id === id)
    throw new Forbidden(`you cannot ${what} yourself; ask another owner (or use AUTH_USER's credentials)`);
}

export interface PersonChange {
  name?: string | undefined;
  role?: PersonRole | undefined;
  schemas?: string[] | null | undefined;
}

/** Changes a person's name, role or scope: their next request acts with it (tokens narrowed to it). */
export async function updatePerson(
  db: pg.Pool,
  id: number,
  change: PersonChange,
  actor: Person | undefined,
  audit: AuditDraft | undefined,
): Promise<PersonView> {
  if (change.role !== undefined || change.schemas !== undefined) notOneself(actor, id, 'change the role of');
  if (change.schemas !== undefined) await assertSchemasExist(db, change.schemas);
  return withTransaction(
    db,
    async (client) => {
      await client.query(
        `UPDATE _dbadmin.people SET
           display_name = coalesce($2, display_name),
           role = coalesce($3, role),
           schemas = CASE WHEN $4::bool THEN $5::text[] ELSE schemas END,
           updated_at = pg_catalog.now()
         WHERE id = $1`,
        [id, change.name ?? null, change.role ?? null, change.schemas !== undefined, change.schemas ?? null],
      );
      // No such person: getPerson answers 404.
      return getPerson(client, id);
    },
    { audit },
  );
}

/** Removes a person: their sessions and tokens go with them, so their next request is refused. */
export async function removePerson(
  db: pg.Pool,
  id: number,
  actor: Person | undefined,
  audit: AuditDraft | undefined,
): Promise<void> {
  notOneself(actor, id, 'remove');
  await withTransaction(
    db,
    async (client) => {
      const { rowCount } = await client.query('DELETE FROM _dbadmin.people WHERE id = $1', [id]);
      if (!rowCount) await getPerson(client, id);
    },
    { audit },
  );
}

/**
 * A password reset: the person's password, sessions and personal tokens end now, and an
 * invitation to set a new one is answered (to hand over as the owner sees fit).
 */
export function resetPerson(
  db: pg.Pool,
  id: number,
  actor: Person | undefined,
  audit: AuditDraft | undefined,
  now = new Date(),
): Promise<Invitation> {
  // Else a token of an owner's could reset its own person and sign in from the invitation.
  notOneself(actor, id, 'reset the password of');
  return withTransaction(
    db,
    async (client) => {
      const { rowCount } = await client.query(
        'UPDATE _dbadmin.people SET password_hash = NULL, updated_at = pg_catalog.now() WHERE id = $1',
        [id],
      );
      if (!rowCount) await getPerson(client, id);
      // A reset answers a compromise: every way in ends, personal tokens too.
      await client.query('DELETE FROM _dbadmin.person_sessions WHERE person_id = $1', [id]);
      await client.query('DELETE FROM _dbadmin.person_tokens WHERE person_id = $1', [id]);
      return invite(client, id, now);
    },
    { audit },
  );
}

/** The person an unexpired invitation is for; it is used up with the password it sets. */
export function acceptInvitation(
  db: pg.Pool,
  token: string,
  password: string,
  audit: AuditDraft | undefined,
  now = new Date(),
): Promise<PersonView> {
  return withTransaction(
    db,
    async (client) => {
      const { rows } = await client.query<{ person_id: number; login: string }>(
        `DELETE FROM _dbadmin.person_invitations i USING _dbadmin.people p
        WHERE i.token_hash = $1 AND i.expires_at > $2 AND p.id = i.person_id
        RETURNING i.person_id, p.login`,
        [secretDigest(token), now],
      );
      const found = rows[0];
      if (!found)
        throw new BadRequest(
          'Invitation not valid',
          'this invitation was used, replaced or has expired; ask an owner for a new one',
        );
      checkNewPassword(password, found.login);
      signedInAs(audit, { id: found.person_id, login: found.login }, 'password');
      await client.query(
        'UPDATE _dbadmin.people SET password_hash = $2, updated_at = pg_catalog.now() WHERE id = $1',
        [found.person_id, await hashPassword(password)],
      );
      return getPerson(client, found.person_id);
    },
    { audit },
  );
}

/** The schemas a grant names must exist: a scope of a typo grants nothing and hides the mistake. */
export async function assertSchemasExist(db: pg.Pool, schemas: readonly string[] | null): Promise<void> {
  if (schemas === null) return;
  const { rows } = await db.query<{ missing: string[] }>(
    `SELECT pg_catalog.array_agg(s) AS missing FROM pg_catalog.unnest($1::text[]) AS s
      WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n WHERE n.nspname = s)`,
    [schemas],
  );
  const missing = rows[0]?.missing;
  if (missing?.length)
    throw new BadRequest('Unknown schema', `no schema named ${missing.map((s) => `"${s}"`).join(', ')}`);
}

/** A token or a change asked for more than its person holds. */
export function assertWithin(inner: Grant, outer: Grant): void {
  if (!within(inner, outer))
    throw new Forbidden(
      `a personal token carries at most its person's rights: role ${outer.role}${outer.schemas ? ` in ${outer.schemas.join(', ')}` : ''}`,
    );
}
