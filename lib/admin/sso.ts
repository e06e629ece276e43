import { timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { secretDigest } from '#lib/admin/passwords';
import type { Config } from '#lib/config';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { ApiError, BadRequest } from '#lib/errors';
import {
  authorizationUrl,
  displayNameOf,
  groupGrant,
  type Identity,
  identityAt,
  loginOf,
  newAttempt,
} from '#lib/sso';

/**
 * Single sign-on's part in dbadmin's own tables: the attempts browsers have under way (each used
 * once, bound to the browser that started it), and the person an identity at the provider is here
 * (lib/sso reads the provider).
 */

/** How long a browser may take at the provider. */
export const ATTEMPT_MINUTES = 10;
/** Attempts under way at once, at most: the start is public, and each one is a row. */
const ATTEMPTS_MAX = 10_000;

/** Where a sign-in may send the browser back to: a page of the console, by its #/ route. */
export const RETURN_TO = /^#\/[A-Za-z0-9_\-./%]{0,200}$/;

export interface Started {
  /** The provider's authorization URL, for the browser. */
  url: string;
  /** The attempt's state, for the cookie that binds it to this browser. */
  state: string;
}

/** A new attempt, kept until the browser comes back; the provider is asked nothing but its metadata. */
export async function startSignIn(
  db: pg.Pool,
  config: Config,
  returnTo: string,
  now = new Date(),
): Promise<Started> {
  const attempt = newAttempt();
  const url = await authorizationUrl(config, attempt);
  await withTransaction(db, async (client) => {
    await client.query('DELETE FROM _dbadmin.sso_attempts WHERE expires_at < $1', [now]);
    const { rows } = await client.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM (SELECT 1 FROM _dbadmin.sso_attempts LIMIT $1) a',
      [ATTEMPTS_MAX],
    );
    if ((rows[0]?.n ?? 0) >= ATTEMPTS_MAX)
      throw new ApiError(503, 'Busy', `${ATTEMPTS_MAX} sign-ins are under way; try again in a few minutes`);
    await client.query(
      `INSERT INTO _dbadmin.sso_attempts (state_hash, nonce, verifier, return_to, expires_at)
       VALUES ($1, $2, $3, $4, $5)`,
      [
        secretDigest(attempt.state),
        attempt.nonce,
        attempt.verifier,
        returnTo,
        new Date(now.getTime() + ATTEMPT_MINUTES * 60_000),
      ],
    );
  });
  return { url: url.href, state: attempt.state };
}

const refused = (why: string) => new BadRequest('Sign-in refused', `${why}; start the sign-in again`);

function sameSecret(a: string, b: string): boolean {
  const [x, y] = [secretDigest(a), secretDigest(b)];
  return timingSafeEqual(x, y);
}

/**
 * The provider's answer at the callback: the attempt it belongs to, taken once, from the browser
 * that started it (its cookie holds the state), then the answer checked (lib/sso), then the person.
 */
export async function finishSignIn(
  db: pg.Pool,
  config: Config,
  callback: URL,
  boundState: string | undefined,
  now = new Date(),
): Promise<{ personId: number; returnTo: string }> {
  const state = callback.searchParams.get('state');
  if (!state || !boundState || !sameSecret(state, boundState))
    throw refused('this browser did not start this sign-in (its state does not match)');
  const { rows } = await db.query<{ nonce: string; verifier: string; return_to: string; expires_at: Date }>(
    'DELETE FROM _dbadmin.sso_attempts WHERE state_hash = $1 RETURNING nonce, verifier, return_to, expires_at',
    [secretDigest(state)],
  );
  const attempt = rows[0];
  if (!attempt || attempt.expires_at < now)
    throw refused(`this sign-in was used already, or took longer than ${ATTEMPT_MINUTES} minutes`);
  const identity = await identityAt(config, callback, {
    state,
    nonce: attempt.nonce,
    verifier: attempt.verifier,
  });
  return { personId: await personFor(db, config, identity), returnTo: attempt.return_to };
}

const noRole = (why: string) => new ApiError(403, 'No role here', `${why}; ask an owner of dbadmin`);

/**
 * The person an identity is: the one it signed in as before; else the person of its login that no
 * provider account claimed yet (added by an owner ahead of their first sign-in); else a new one,
 * when a group of theirs is in OIDC_ROLE_MAP. A mapped group sets the role and scope at every
 * sign-in; a person whose role came from their groups and whose groups no longer give one is
 * refused, and their sessions end.
 */
async function personFor(db: pg.Pool, config: Config, identity: Identity): Promise<number> {
  const grant = groupGrant(config, identity);
  const outcome = await withTransaction(db, async (client) => {
    let person = await oneRow<{ id: number; sso_managed: boolean }>(
      client,
      'SELECT id, sso_managed FROM _dbadmin.people WHERE sso_issuer = $1 AND sso_subject = $2 FOR UPDATE',
      [identity.issuer, identity.subject],
    );
    if (!person) {
      const login = loginOf(identity);
      const named = await oneRow<{ id: number; sso_managed: boolean; sso_subject: string | null }>(
        client,
        'SELECT id, sso_managed, sso_subject FROM _dbadmin.people WHERE login = $1 FOR UPDATE',
        [login],
      );
      if (named?.sso_subject)
        throw new ApiError(
          409,
          'Person exists',
          `the person "${login}" signs in with another account at the provider`,
        );
      if (named) {
        await client.query(
          'UPDATE _dbadmin.people SET sso_issuer = $2, sso_subject = $3, updated_at = now() WHERE id = $1',
          [named.id, identity.issuer, identity.subject],
        );
        person = named;
      } else if (grant) {
        const { rows } = await client
          .query<{ id: number }>(
            `INSERT INTO _dbadmin.people (login, display_name, role, schemas, sso_issuer, sso_subject, sso_managed)
             VALUES ($1, $2, $3, $4, $5, $6, true) RETURNING id`,
            [
              login,
              displayNameOf(identity, login),
              grant.role,
              grant.schemas,
              identity.issuer,
              identity.subject,
            ],
          )
          .catch((error: unknown) => {
            if (isPgError(error) && error.code === '23505')
              throw new ApiError(409, 'Person exists', `"${login}" was added meanwhile; sign in again`);
            throw error;
          });
        return { id: rows[0]?.id as number };
      } else {
        return {
          refusal: noRole(
            `signed in at the provider as "${login}", but none of their groups (${config.OIDC_GROUPS_CLAIM}) is in OIDC_ROLE_MAP and no person "${login}" was added here`,
          ),
        };
      }
    }
    if (grant) {
      await client.query(
        `UPDATE _dbadmin.people SET role = $2, schemas = $3, sso_managed = true, updated_at = now()
          WHERE id = $1 AND (role, schemas, sso_managed) IS DISTINCT FROM ($2, $3::text[], true)`,
        [person.id, grant.role, grant.schemas],
      );
    } else if (person.sso_managed) {
      await client.query('DELETE FROM _dbadmin.person_sessions WHERE person_id = $1', [person.id]);
      await client.query('DELETE FROM _dbadmin.person_tokens WHERE person_id = $1', [person.id]);
      return { refusal: noRole('their groups at the provider no longer give them a role here') };
    }
    return { id: person.id };
  });
  if ('refusal' in outcome) throw outcome.refusal;
  return outcome.id;
}

async function oneRow<T extends pg.QueryResultRow>(
  client: pg.ClientBase,
  text: string,
  values: unknown[],
): Promise<T | undefined> {
  return (await client.query<T>(text, values)).rows[0];
}
