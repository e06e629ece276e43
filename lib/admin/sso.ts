import { createCipheriv, createDecipheriv, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import type pg from 'pg';
import { secretDigest } from '#lib/admin/passwords';
import type { Config } from '#lib/config';
import type { AuditDraft } from '#lib/db/audit-log';
import { isPgError } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { ApiError, BadRequest } from '#lib/errors';
import {
  type Attempt,
  authorizationUrl,
  displayNameOf,
  groupGrant,
  type Identity,
  identityAt,
  loginOf,
  newAttempt,
} from '#lib/sso';

/**
 * Single sign-on's part in dbadmin: the attempt a browser has under way (sealed in its own cookie,
 * so starting one writes nothing; each used once), and the person an identity at the provider
 * is here (lib/sso reads the provider).
 */

/** How long a browser may take at the provider. */
export const ATTEMPT_MINUTES = 10;

/** Where a sign-in may send the browser back to: a page of the console, by its #/ route. */
export const RETURN_TO = /^#\/[A-Za-z0-9_\-./%]{0,200}$/;

export interface Sealed extends Attempt {
  returnTo: string;
  /** Epoch milliseconds. */
  expiresAt: number;
}

/** The key attempts are sealed with (AES-256-GCM), derived from DBADMIN_SECRET for this use alone. */
const sealingKey = (secret: string) => Buffer.from(hkdfSync('sha256', secret, 'dbadmin', 'sso attempt', 32));

export function seal(secret: string, attempt: Sealed): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealingKey(secret), iv);
  const text = Buffer.concat([cipher.update(JSON.stringify(attempt), 'utf8'), cipher.final()]);
  return Buffer.concat([iv, text, cipher.getAuthTag()]).toString('base64url');
}

/** The attempt the cookie holds, if it is one this service sealed; undefined for anything else. */
export function unseal(secret: string, cookie: string | undefined): Sealed | undefined {
  const bytes = Buffer.from(cookie ?? '', 'base64url');
  if (bytes.length < 12 + 16 + 2) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealingKey(secret), bytes.subarray(0, 12));
    decipher.setAuthTag(bytes.subarray(-16));
    const text = Buffer.concat([decipher.update(bytes.subarray(12, -16)), decipher.final()]);
    return JSON.parse(text.toString('utf8')) as Sealed;
  } catch {
    return undefined;
  }
}

export interface Started {
  /** The provider's authorization URL, for the browser. */
  url: string;
  /** The attempt, sealed, for the cookie that binds it to this browser. */
  cookie: string;
}

/** A new attempt for this browser to keep; the provider is asked nothing but its metadata. */
export async function startSignIn(config: Config, returnTo: string, now = Date.now()): Promise<Started> {
  const attempt = newAttempt();
  const url = await authorizationUrl(config, attempt);
  const sealed = { ...attempt, returnTo, expiresAt: now + ATTEMPT_MINUTES * 60_000 };
  return { url: url.href, cookie: seal(config.DBADMIN_SECRET, sealed) };
}

const refused = (why: string) => new BadRequest('Sign-in refused', `${why}; start the sign-in again`);

function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(secretDigest(a), secretDigest(b));
}

/**
 * The provider's answer at the callback: the attempt this browser's cookie holds, for this state,
 * not expired and taken once (its state's digest kept until it would have expired), then the
 * answer checked (lib/sso), then the person.
 */
export async function finishSignIn(
  db: pg.Pool,
  config: Config,
  callback: URL,
  cookie: string | undefined,
  audit: AuditDraft | undefined,
  now = new Date(),
): Promise<{ personId: number; returnTo: string }> {
  const state = callback.searchParams.get('state');
  const attempt = unseal(config.DBADMIN_SECRET, cookie);
  if (!state || !attempt || !sameSecret(state, attempt.state))
    throw refused('this browser did not start this sign-in (its state does not match)');
  if (attempt.expiresAt < now.getTime())
    throw refused(`this sign-in took longer than ${ATTEMPT_MINUTES} minutes`);
  const { rowCount } = await db.query(
    `WITH gone AS (DELETE FROM _dbadmin.sso_used WHERE expires_at < $3)
     INSERT INTO _dbadmin.sso_used (state_hash, expires_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
    [secretDigest(state), new Date(attempt.expiresAt), now],
  );
  if (rowCount !== 1) throw refused('this sign-in was used already');
  const identity = await identityAt(config, callback, attempt);
  return { personId: await personFor(db, config, identity, audit), returnTo: attempt.returnTo };
}

const noRole = (why: string) => new ApiError(403, 'No role here', `${why}; ask an owner of dbadmin`);

interface Found {
  id: number;
  login: string;
  sso_managed: boolean;
  sso_subject: string | null;
  has_password: boolean;
}

type Outcome = { id: number } | { refusal: ApiError } | { revoke: Found };

const FOUND = `SELECT id, login, sso_managed, sso_subject, password_hash IS NOT NULL AS has_password
                 FROM _dbadmin.people`;

/**
 * The person an identity is, in one transaction:
 * - the one it signed in as before;
 * - else the person of its login an owner added for single sign-on (no password, no provider
 *   account yet), when the login is a verified e-mail address;
 * - else a new person, when a group of theirs is in OIDC_ROLE_MAP.
 * A mapped group sets the role and scope at every sign-in. A person whose role came from their
 * groups, and whose groups no longer give one, is refused, and loses their sessions, tokens,
 * password and invitations (audited as person.revoke).
 */
async function personFor(
  db: pg.Pool,
  config: Config,
  identity: Identity,
  audit: AuditDraft | undefined,
): Promise<number> {
  const grant = groupGrant(config, identity);
  const outcome = await withTransaction(db, async (client) => {
    const bySubject = await client.query<Found>(
      `${FOUND} WHERE sso_issuer = $1 AND sso_subject = $2 FOR UPDATE`,
      [identity.issuer, identity.subject],
    );
    const person = bySubject.rows[0] ?? (await firstSignIn(client, config, identity, grant, audit));
    return 'refusal' in person ? person : grantedBy(client, config, person, grant, audit);
  });
  if ('refusal' in outcome) throw outcome.refusal;
  if ('revoke' in outcome) {
    await revoke(db, outcome.revoke, audit);
    throw noRole('their groups at the provider no longer give them a role here');
  }
  return outcome.id;
}

/** What the person's groups now make of them: their role and scope, as they were, or refused. */
async function grantedBy(
  client: pg.ClientBase,
  config: Config,
  person: Found,
  grant: ReturnType<typeof groupGrant>,
  audit: AuditDraft | undefined,
): Promise<Outcome> {
  if (grant && grant !== 'unknown') {
    const { rowCount } = await client.query(
      `UPDATE _dbadmin.people SET role = $2, schemas = $3, sso_managed = true, updated_at = now()
        WHERE id = $1 AND (role, schemas, sso_managed) IS DISTINCT FROM ($2, $3::text[], true)`,
      [person.id, grant.role, grant.schemas],
    );
    if (rowCount && audit && !audit.entry.target)
      audit.entry.target = `role from groups: ${grant.role}${grant.schemas ? ` in ${grant.schemas.join(', ')}` : ''}`;
    return { id: person.id };
  }
  if (!person.sso_managed) return { id: person.id };
  if (grant === 'unknown')
    return {
      refusal: noRole(
        `the provider sent no groups claim (${config.OIDC_GROUPS_CLAIM}), and this person’s role comes from their groups`,
      ),
    };
  return { revoke: person };
}

/** The person of a provider account seen for the first time: found by login, made, or refused. */
async function firstSignIn(
  client: pg.ClientBase,
  config: Config,
  identity: Identity,
  grant: ReturnType<typeof groupGrant>,
  audit: AuditDraft | undefined,
): Promise<Found | { refusal: ApiError }> {
  const { login, verified } = loginOf(identity);
  if (login === config.AUTH_USER.toLowerCase())
    return { refusal: noRole(`"${login}" is a login no person may have here`) };
  const named = (await client.query<Found>(`${FOUND} WHERE login = $1 FOR UPDATE`, [login])).rows[0];
  if (named) {
    if (named.sso_subject || named.has_password || !verified)
      return {
        refusal: new ApiError(
          409,
          'Person exists',
          `a person "${login}" is here already and ${
            named.sso_subject
              ? 'signs in with another account at the provider'
              : named.has_password
                ? 'signs in with a password: an owner adds them again without one for single sign-on'
                : 'single sign-on takes such a login only from a verified e-mail address'
          }`,
        ),
      };
    await client.query(
      'UPDATE _dbadmin.people SET sso_issuer = $2, sso_subject = $3, updated_at = now() WHERE id = $1',
      [named.id, identity.issuer, identity.subject],
    );
    return { ...named, sso_subject: identity.subject };
  }
  if (!grant || grant === 'unknown')
    return {
      refusal: noRole(
        `signed in at the provider as "${login}", but none of their groups (${config.OIDC_GROUPS_CLAIM}) is in OIDC_ROLE_MAP and no person "${login}" was added here`,
      ),
    };
  const made = await client
    .query<{ id: number }>(
      `INSERT INTO _dbadmin.people (login, display_name, role, schemas, sso_issuer, sso_subject, sso_managed)
       VALUES ($1, $2, $3, $4, $5, $6, true) RETURNING id`,
      [login, displayNameOf(identity, login), grant.role, grant.schemas, identity.issuer, identity.subject],
    )
    .catch((error: unknown) => {
      if (isPgError(error) && error.code === '23505')
        throw new ApiError(409, 'Person exists', `"${login}" was added meanwhile; sign in again`);
      throw error;
    });
  if (audit) audit.entry.target = `new person from groups: ${grant.role}`;
  return {
    id: made.rows[0]?.id as number,
    login,
    sso_managed: true,
    sso_subject: identity.subject,
    has_password: false,
  };
}

/** Everything a person whose groups no longer give a role could sign in with, gone, with its entry. */
async function revoke(db: pg.Pool, person: Found, audit: AuditDraft | undefined): Promise<void> {
  if (audit) Object.assign(audit.entry, { action: 'person.revoke', status: 403, target: person.login });
  await withTransaction(
    db,
    async (client) => {
      await client.query('DELETE FROM _dbadmin.person_sessions WHERE person_id = $1', [person.id]);
      await client.query('DELETE FROM _dbadmin.person_tokens WHERE person_id = $1', [person.id]);
      await client.query('DELETE FROM _dbadmin.person_invitations WHERE person_id = $1', [person.id]);
      await client.query(
        'UPDATE _dbadmin.people SET password_hash = NULL, updated_at = now() WHERE id = $1',
        [person.id],
      );
    },
    { audit },
  );
}
