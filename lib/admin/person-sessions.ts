import type pg from 'pg';
import type { Grant, PersonRole } from '#lib/access';
import {
  checkNewPassword,
  csrfToken,
  hashPassword,
  newSecret,
  passwordMatches,
  secretDigest,
  standInReady,
} from '#lib/admin/passwords';
import { assertSchemasExist, assertWithin } from '#lib/admin/people';
import type { Config } from '#lib/config';
import type { AuditDraft } from '#lib/db/audit-log';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { ApiError, Forbidden, NotFound } from '#lib/errors';
import type { Person } from '#lib/principal';

/**
 * What a person signs in with and holds: console sessions (a secret in an HttpOnly cookie, kept
 * here as its digest, with an idle and an absolute end) and personal tokens for automation
 * (shown once, kept as a digest, with an expiry, carrying at most the person's rights). The
 * request path finds either with its sign-in read (lib/http/authenticate), every request.
 */

export interface SessionLifetimes {
  idleMinutes: number;
  maxHours: number;
}

export const sessionLifetimes = (config: Config): SessionLifetimes => ({
  idleMinutes: config.SESSION_IDLE_MINUTES,
  maxHours: config.SESSION_MAX_HOURS,
});

export interface StartedSession {
  /** The cookie's value: shown to the browser once, never stored. */
  secret: string;
  csrfToken: string;
  id: number;
  endsAt: Date;
}

/** The person a login and password sign in, or undefined (as slow either way: see passwordMatches). */
export async function personByPassword(
  db: pg.Pool,
  login: string,
  password: string,
): Promise<{ id: number; login: string } | undefined> {
  // The stand-in hash for an unknown login is made before the first lookup, whoever asks, so no
  // first sign-in of a container takes longer for an unknown login than for a known one.
  await standInReady();
  const { rows } = await db.query<{ id: number; login: string; password_hash: string | null }>(
    'SELECT id, login, password_hash FROM _dbadmin.people WHERE login = $1',
    [login.toLowerCase()],
  );
  const found = rows[0];
  const matches = await passwordMatches(found?.password_hash, password);
  return matches && found ? { id: found.id, login: found.login } : undefined;
}

/**
 * Changes one's own password, the current one asked again (a session left open is not enough to
 * take the account over); one's other sessions end.
 */
export async function changePassword(
  db: pg.Pool,
  person: Person,
  current: string,
  next: string,
  audit: AuditDraft | undefined,
): Promise<void> {
  const { rows } = await db.query<{ password_hash: string | null }>(
    'SELECT password_hash FROM _dbadmin.people WHERE id = $1',
    [person.id],
  );
  if (!(await passwordMatches(rows[0]?.password_hash, current)))
    throw new Forbidden('the current password is wrong');
  checkNewPassword(next, person.login);
  const hash = await hashPassword(next);
  await withTransaction(
    db,
    async (client) => {
      await client.query(
        'UPDATE _dbadmin.people SET password_hash = $2, updated_at = pg_catalog.now() WHERE id = $1',
        [person.id, hash],
      );
      await client.query(
        'DELETE FROM _dbadmin.person_sessions WHERE person_id = $1 AND id IS DISTINCT FROM $2',
        [person.id, person.sessionId ?? null],
      );
    },
    { audit },
  );
}

let lastSweep = Number.NEGATIVE_INFINITY;

/**
 * Whose session: a person's, or the AUTH_USER administrator's (bound to the digest of AUTH_USER and
 * AUTH_PASS as they are at sign-in: changing either ends it).
 */
export type SessionOwner = { personId: number } | { adminDigest: Buffer };

/** A new console session (a new secret at every sign-in: never one the browser had before). */
export async function startSession(
  db: pg.Pool,
  owner: SessionOwner,
  via: 'password' | 'sso',
  config: Config,
  seen: { address: string | undefined; userAgent: string | undefined },
  audit: AuditDraft | undefined,
  now = new Date(),
): Promise<StartedSession> {
  const lifetimes = sessionLifetimes(config);
  const secret = newSecret('dbs_');
  const endsAt = new Date(now.getTime() + lifetimes.maxHours * 3_600_000);
  const idleUntil = new Date(Math.min(now.getTime() + lifetimes.idleMinutes * 60_000, endsAt.getTime()));
  const id = await withTransaction(
    db,
    async (client) => {
      // Sessions that ended unused (nobody signed out) go with a sign-in, at most hourly per process.
      if (now.getTime() - lastSweep >= 3_600_000) {
        lastSweep = now.getTime();
        await client.query('DELETE FROM _dbadmin.person_sessions WHERE LEAST(idle_until, ends_at) < $1', [
          now,
        ]);
      }
      const { rows } = await client.query<{ id: string }>(
        `INSERT INTO _dbadmin.person_sessions
           (person_id, admin_digest, token_hash, via, created_at, last_seen_at, idle_until, ends_at, address, user_agent)
         VALUES ($1, $9, $2, $3, $4, $4, $5, $6, $7, $8) RETURNING id`,
        [
          'personId' in owner ? owner.personId : null,
          secretDigest(secret),
          via,
          now,
          idleUntil,
          endsAt,
          seen.address ?? null,
          seen.userAgent?.slice(0, 300) ?? null,
          'adminDigest' in owner ? owner.adminDigest : null,
        ],
      );
      return Number(rows[0]?.id);
    },
    { audit },
  );
  return { secret, csrfToken: csrfToken(config.DBADMIN_SECRET, id), id, endsAt };
}

/**
 * A use to write off the request's path, at most once a minute per id and container: whether
 * this one is due (`seen` keeps the last write of each id, forgotten wholesale past 10,000 ids).
 */
function due(seen: Map<number, number>, id: number, now: number): boolean {
  if (now - (seen.get(id) ?? 0) < 60_000) return false;
  if (seen.size >= 10_000) seen.clear();
  seen.set(id, now);
  return true;
}

const sessionsSeen = new Map<number, number>();

/** A session in use stays open another idle period (a lost write only ends it up to a minute early). */
export function touchSession(db: pg.Pool, id: number, lifetimes: SessionLifetimes, now = Date.now()): void {
  if (!due(sessionsSeen, id, now)) return;
  db.query(
    `UPDATE _dbadmin.person_sessions
        SET last_seen_at = $2, idle_until = LEAST(ends_at, $2::timestamptz + $3 * interval '1 minute')
      WHERE id = $1`,
    [id, new Date(now), lifetimes.idleMinutes],
  ).catch(() => undefined);
}

export interface SessionView {
  id: number;
  via: string;
  createdAt: string;
  lastSeenAt: string;
  endsAt: string;
  address: string | null;
  userAgent: string | null;
  current: boolean;
}

const iso = (column: string) =>
  `pg_catalog.to_char(pg_catalog.timezone('UTC', ${column}), 'YYYY-MM-DD"T"HH24:MI:SS"Z"')`;

/** The person's sessions still open, newest first. */
export async function listSessions(db: pg.Pool, personId: number, current?: number, now = new Date()) {
  const { rows } = await db.query<SessionView>(
    `SELECT id, via, ${iso('created_at')} AS "createdAt", ${iso('last_seen_at')} AS "lastSeenAt",
            ${iso('LEAST(idle_until, ends_at)')} AS "endsAt", address, user_agent AS "userAgent",
            coalesce(id = $2, false) AS current
       FROM _dbadmin.person_sessions
      WHERE person_id = $1 AND idle_until > $3 AND ends_at > $3
      ORDER BY created_at DESC`,
    [personId, current ?? null, now],
  );
  return rows;
}

/** Ends one of the person's sessions (`id`), or all of them; expired ones go with them. */
export async function endSessions(
  db: pg.Pool,
  personId: number,
  id: number | undefined,
  audit: AuditDraft | undefined,
): Promise<number> {
  return withTransaction(
    db,
    async (client) => {
      const { rowCount } = await client.query(
        'DELETE FROM _dbadmin.person_sessions WHERE person_id = $1 AND ($2::int8 IS NULL OR id = $2)',
        [personId, id ?? null],
      );
      if (id !== undefined && !rowCount)
        throw new NotFound('Session not found', `no session ${id} of this person is open`);
      return rowCount ?? 0;
    },
    { audit },
  );
}

/** Signing out: the session the request came with ends. */
export async function endSession(db: pg.Pool, id: number, audit: AuditDraft | undefined): Promise<void> {
  await withTransaction(
    db,
    (client) => client.query('DELETE FROM _dbadmin.person_sessions WHERE id = $1', [id]),
    {
      audit,
    },
  );
}

// --- Personal tokens ----------------------------------------------------------------------------

export const TOKEN_MAX_DAYS = 366;

export interface TokenView {
  id: number;
  name: string;
  prefix: string;
  role: PersonRole;
  schemas: string[] | null;
  createdAt: string;
  expiresAt: string;
  lastUsedAt: string | null;
}

const TOKEN_VIEW = `id, name, token_prefix AS prefix, role, schemas, ${iso('created_at')} AS "createdAt",
  ${iso('expires_at')} AS "expiresAt", ${iso('last_used_at')} AS "lastUsedAt"`;

export interface NewToken {
  name: string;
  role?: PersonRole | undefined;
  schemas?: string[] | null | undefined;
  expiresInDays: number;
}

/** A personal token: at most its person's rights now, and never more later (narrowed at each use). */
export async function createToken(
  db: pg.Pool,
  person: Person,
  input: NewToken,
  audit: AuditDraft | undefined,
  now = new Date(),
): Promise<TokenView & { token: string }> {
  const grant: Grant = {
    role: input.role ?? person.role,
    schemas: input.schemas === undefined ? person.schemas : input.schemas,
  };
  assertWithin(grant, person);
  await assertSchemasExist(db, grant.schemas);
  const token = newSecret('dbp_');
  const expires = new Date(now.getTime() + input.expiresInDays * 86_400_000);
  const view = await withTransaction(
    db,
    async (client) =>
      (
        await client
          .query<TokenView>(
            `INSERT INTO _dbadmin.person_tokens
               (person_id, name, token_hash, token_prefix, role, schemas, created_at, expires_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${TOKEN_VIEW}`,
            [
              person.id,
              input.name,
              secretDigest(token),
              token.slice(0, 8),
              grant.role,
              grant.schemas,
              now,
              expires,
            ],
          )
          .catch((error: unknown) => {
            throw isPgError(error) && error.code === '23505'
              ? new ApiError(409, 'Token exists', `you already have a token named "${input.name}"`)
              : error;
          })
      ).rows[0] as TokenView,
    { audit },
  );
  return { ...view, token };
}

export async function listTokens(db: pg.Pool, personId: number): Promise<TokenView[]> {
  const { rows } = await db.query<TokenView>(
    `SELECT ${TOKEN_VIEW} FROM _dbadmin.person_tokens WHERE person_id = $1 ORDER BY created_at DESC`,
    [personId],
  );
  return rows;
}

export async function deleteToken(
  db: pg.Pool,
  personId: number,
  id: number,
  audit: AuditDraft | undefined,
): Promise<void> {
  await withTransaction(
    db,
    async (client) => {
      const { rowCount } = await client.query(
        'DELETE FROM _dbadmin.person_tokens WHERE person_id = $1 AND id = $2',
        [personId, id],
      );
      if (!rowCount) throw new NotFound('Token not found', `you have no token ${id}; see GET /api/me/tokens`);
    },
    { audit },
  );
}

const tokensSeen = new Map<number, number>();

/** When a token was last used. */
export function touchToken(db: pg.Pool, id: number, now = Date.now()): void {
  if (!due(tokensSeen, id, now)) return;
  db.query('UPDATE _dbadmin.person_tokens SET last_used_at = $2 WHERE id = $1', [id, new Date(now)]).catch(
    () => undefined,
  );
}
