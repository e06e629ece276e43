import { z } from 'zod';
import { routes as ssoRoutes } from '#functions/sso';
import { granted, PERMISSIONS, PERSON_ROLES, type Permission, ROLE_PERMISSIONS } from '#lib/access';
import {
  checkNewPassword,
  csrfToken,
  PASSWORD_MAX,
  PASSWORD_MIN,
  SECRET_PATTERN,
} from '#lib/admin/passwords';
import {
  acceptInvitation,
  createPerson,
  getPerson,
  INVITATION_DAYS,
  listPeople,
  type PersonView,
  removePerson,
  resetPerson,
  updatePerson,
} from '#lib/admin/people';
import {
  changePassword,
  createToken,
  deleteToken,
  endSession,
  endSessions,
  listSessions,
  listTokens,
  personByPassword,
  TOKEN_MAX_DAYS,
} from '#lib/admin/person-sessions';
import { type Config, getConfig } from '#lib/config';
import { signedInAs } from '#lib/db/audit-log';
import { getDatabase } from '#lib/db/pool';
import { Forbidden, Unauthorized } from '#lib/errors';
import { clientKey } from '#lib/http/auth-throttle';
import { adminCredentials, adminDigest, adminMatches, signInThrottle } from '#lib/http/authenticate';
import { httpHandler } from '#lib/http/handler';
import { Reply } from '#lib/http/respond';
import { defineRoute } from '#lib/http/route';
import { openConsoleSession, type SignInInput, sessionSetCookie } from '#lib/http/session-cookie';
import type { Person, Principal } from '#lib/principal';
import { queryInt, schemaRef } from '#lib/validation';

/**
 * People and their sign-in (lib/access, lib/admin/people, lib/admin/person-sessions): a console
 * session from a password or an invitation, who is signed in, a person's own sessions, password
 * and personal tokens, and the owner's page of people.
 */

const login = z
  .string()
  .trim()
  .toLowerCase()
  .regex(
    /^[a-z0-9][a-z0-9._@+-]{0,99}$/,
    'login is 1 to 100 letters, digits and . _ @ + - (an e-mail address will do), starting with a letter or digit',
  );
const password = z
  .string()
  .min(1, 'password must not be empty')
  .max(PASSWORD_MAX, `password must be at most ${PASSWORD_MAX} characters`);
const newPassword = password.meta({
  description: `${PASSWORD_MIN} to ${PASSWORD_MAX} characters, not the login, not a repeated run`,
});
const role = z.enum(PERSON_ROLES, { message: `role must be one of ${PERSON_ROLES.join(', ')}` });
const scope = z
  .array(schemaRef)
  .min(1, 'schemas lists at least one schema (null: every schema)')
  .max(1000)
  .nullable()
  .meta({ description: 'the schemas they may reach; null: every schema' });
const id = queryInt('id', 1, 2_147_483_647);
/** Sessions are numbered as bigint: any id a session may have. */
const sessionId = queryInt('id', 1, Number.MAX_SAFE_INTEGER);

const PersonOut = z.object({
  id: z.number(),
  login: z.string(),
  name: z.string(),
  role: z.enum(PERSON_ROLES),
  schemas: z.array(z.string()).nullable(),
  signsInWith: z.array(z.enum(['password', 'sso'])),
  createdAt: z.string(),
});
const Invitation = z.object({
  token: z.string().meta({ description: 'shown once: hand it to the person (console: #/welcome/<token>)' }),
  expiresAt: z.string(),
});
const Session = z.object({
  id: z.number(),
  via: z.string(),
  createdAt: z.string(),
  lastSeenAt: z.string(),
  endsAt: z.string().meta({ description: 'when it ends unless used (or at its absolute end)' }),
  address: z.string().nullable(),
  userAgent: z.string().nullable(),
  current: z.boolean().meta({ description: 'the session this request came with' }),
});
const Token = z.object({
  id: z.number(),
  name: z.string(),
  prefix: z.string(),
  role: z.enum(PERSON_ROLES),
  schemas: z.array(z.string()).nullable(),
  createdAt: z.string(),
  expiresAt: z.string(),
  lastUsedAt: z.string().nullable(),
});
const SignedIn = z.object({
  kind: z.enum(['admin', 'person']).meta({ description: 'admin: AUTH_USER’s Basic credentials' }),
  person: PersonOut.nullable(),
  role: z.enum(PERSON_ROLES),
  schemas: z.array(z.string()).nullable(),
  permissions: z.array(z.string()).meta({ description: 'what they may do here (lib/access)' }),
  via: z.string().nullable(),
  csrfToken: z
    .string()
    .nullable()
    .meta({ description: 'send as X-CSRF-Token with every change made with the session’s cookie' }),
  sessionEndsAt: z.string().nullable(),
});
const Done = z.object({ success: z.literal(true) });

/** The one person the request acts for; the AUTH_USER administrator has no account of its own. */
function self(principal: Principal | undefined): Person {
  if (principal?.kind !== 'person')
    throw new Forbidden('AUTH_USER’s Basic credentials are no person’s: sign in as a person for this');
  return principal;
}

/** The person, signed in to the console: a personal token may not change the account it stands for. */
function consoleSelf(principal: Principal | undefined, what: string): Person {
  const person = self(principal);
  if (person.via === 'token') throw new Forbidden(`a personal token cannot ${what}; sign in to the console`);
  return person;
}

function permissionsOf(grant: { role: Person['role']; schemas: readonly string[] | null }): Permission[] {
  return (Object.keys(PERMISSIONS) as Permission[]).filter((p) => granted(grant, p));
}

/** What the AUTH_USER administrator is: every permission, no account of its own. */
const ADMIN_VIEW = {
  kind: 'admin' as const,
  person: null,
  role: 'owner' as const,
  schemas: null,
  permissions: [...ROLE_PERMISSIONS.owner],
  via: null,
};

/** Signed in: the session's cookie, and who it is for (a person, or null: the administrator). */
async function signedIn(config: Config, person: PersonView | null, input: SignInInput) {
  signedInAs(input.audit, person, 'password');
  const owner = person
    ? { personId: person.id }
    : {
        adminDigest: adminDigest(adminCredentials(config.AUTH_USER, config.AUTH_PASS), config.DBADMIN_SECRET),
      };
  const { session, setCookie } = await openConsoleSession(
    await getDatabase(),
    config,
    owner,
    'password',
    input,
  );
  const who = person
    ? {
        kind: 'person' as const,
        person,
        role: person.role,
        schemas: person.schemas,
        permissions: permissionsOf(person),
        via: 'password',
      }
    : ADMIN_VIEW;
  return new Reply(
    { ...who, csrfToken: session.csrfToken, sessionEndsAt: session.endsAt.toISOString() },
    { 'set-cookie': setCookie },
  );
}

/** SSO_ONLY: people sign in through the provider, and have no password here to set or use. */
function refuseIfSsoOnly(config: Config): void {
  if (config.SSO_ONLY)
    throw new Forbidden(
      'people sign in with single sign-on here (SSO_ONLY): use “Sign in with single sign-on”',
    );
}

const personRoutes = [
  defineRoute({
    method: 'POST',
    path: '/api/session',
    setsCookie: true,
    // No target: a login sent might be AUTH_USER, which audit readers must not learn; the entry
    // names whom it signed in (actor, personLogin).
    audit: { action: 'session.start' },
    summary:
      'Sign in to the console with a login and password: a session cookie (HttpOnly, SameSite=Strict) and its CSRF token',
    access: 'public',
    body: z.strictObject({
      login: z
        .string()
        .min(1, 'login must not be empty')
        .max(200)
        .meta({ description: 'a person’s login, or AUTH_USER' }),
      password,
    }),
    response: SignedIn,
    errors: [
      { status: 401, why: 'the login or password is wrong (counted against the address and the login)' },
      { status: 429, why: 'too many failed sign-ins from this address or for this login' },
      { status: 403, why: 'SSO_ONLY: people sign in with single sign-on (AUTH_USER still may)' },
    ],
    handler: async ({ body, clientAddress, userAgent, overHttps, audit }) => {
      const [config, db] = await Promise.all([getConfig(), getDatabase()]);
      const throttle = signInThrottle(config, db);
      const keys = [clientKey(clientAddress), `login:${body.login.toLowerCase()}`];
      // The attempt counts as a failure before it is checked (429 past the limit), and is taken
      // back if it succeeds: a burst of guesses sent at once gets no more than the limit. The
      // address first: one past its limit adds no row for each login it makes up.
      await throttle.countFailures(keys.slice(0, 1));
      await throttle.countFailures(keys.slice(1));
      const input = { clientAddress, userAgent, overHttps, audit };
      // AUTH_USER and AUTH_PASS (compared as digests, in constant time) sign the administrator in.
      const admin = adminCredentials(config.AUTH_USER, config.AUTH_PASS);
      const isAdmin = adminMatches({ user: body.login, pass: body.password }, admin);
      if (!isAdmin) refuseIfSsoOnly(config);
      const found = isAdmin ? undefined : await personByPassword(db, body.login, body.password);
      if (!isAdmin && !found) throw new Unauthorized('wrong login or password');
      await throttle.forgive(keys);
      return signedIn(config, found ? await getPerson(db, found.id) : null, input);
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/session/invitation',
    setsCookie: true,
    audit: { action: 'person.password' },
    summary: 'Accept an invitation (or a password reset): set the password, and be signed in',
    access: 'public',
    body: z.strictObject({
      token: z.string().regex(SECRET_PATTERN, 'token is the invitation as it was handed over (dbi_...)'),
      password: newPassword,
    }),
    response: SignedIn,
    errors: [
      { status: 400, why: 'the invitation was used, replaced or expired; or the password is too weak' },
      { status: 403, why: 'SSO_ONLY: people sign in with single sign-on and set no password' },
    ],
    handler: async ({ body, clientAddress, userAgent, overHttps, audit }) => {
      const [config, db] = await Promise.all([getConfig(), getDatabase()]);
      refuseIfSsoOnly(config);
      const person = await acceptInvitation(db, body.token, body.password, audit);
      return signedIn(config, person, { clientAddress, userAgent, overHttps, audit });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/session',
    summary: 'Who is signed in: their role, scope and permissions, and the session’s CSRF token',
    access: 'person',
    response: SignedIn,
    handler: async ({ principal }) => {
      const config = await getConfig();
      if (principal?.kind !== 'person') {
        const session = principal?.kind === 'admin' ? principal.sessionId : undefined;
        return {
          ...ADMIN_VIEW,
          csrfToken: session === undefined ? null : csrfToken(config.DBADMIN_SECRET, session),
          sessionEndsAt: null,
        };
      }
      const person = await getPerson(await getDatabase(), principal.id);
      const session = principal.sessionId;
      const open =
        session === undefined ? [] : await listSessions(await getDatabase(), principal.id, session);
      return {
        kind: 'person' as const,
        person,
        role: principal.role,
        schemas: principal.schemas as string[] | null,
        permissions: permissionsOf(principal),
        via: principal.via,
        csrfToken: session === undefined ? null : csrfToken(config.DBADMIN_SECRET, session),
        sessionEndsAt: open.find((s) => s.current)?.endsAt ?? null,
      };
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/session',
    setsCookie: true,
    audit: { action: 'session.end' },
    summary: 'Sign out: the session the request came with ends, and its cookie is cleared',
    access: 'person',
    response: Done,
    handler: async ({ principal, overHttps, audit }) => {
      const session = principal?.kind === 'key' ? undefined : principal?.sessionId;
      if (session !== undefined) await endSession(await getDatabase(), session, audit);
      return new Reply({ success: true as const }, { 'set-cookie': sessionSetCookie(overHttps) });
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/me/password',
    audit: { action: 'person.password' },
    summary: 'Change one’s own password (the current one is asked again); one’s other sessions end',
    access: 'person',
    body: z.strictObject({ currentPassword: password, newPassword }),
    response: Done,
    errors: [
      { status: 403, why: 'the current password is wrong, or a personal token asked, or SSO_ONLY is set' },
    ],
    handler: async ({ principal, body, audit, clientAddress }) => {
      const person = consoleSelf(principal, 'change the password');
      const [config, db] = await Promise.all([getConfig(), getDatabase()]);
      refuseIfSsoOnly(config);
      // A new password the rules refuse is said first: it is no guess, and must not count as one.
      checkNewPassword(body.newPassword, person.login);
      // The current password is a guess like any sign-in's: counted before it is checked.
      const throttle = signInThrottle(config, db);
      const keys = [clientKey(clientAddress), `login:${person.login}`];
      await throttle.countFailures(keys);
      await changePassword(db, person, body.currentPassword, body.newPassword, audit);
      await throttle.forgive(keys);
      return { success: true as const };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/me/sessions',
    summary: 'One’s own console sessions still open, newest first',
    access: 'person',
    response: z.object({ sessions: z.array(Session) }),
    handler: async ({ principal }) => {
      const person = self(principal);
      return { sessions: await listSessions(await getDatabase(), person.id, person.sessionId) };
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/me/sessions/{id}',
    audit: { action: 'session.end', target: ({ params }) => `session ${params.id}` },
    summary: 'End one of one’s own sessions (another browser, a lost laptop)',
    access: 'person',
    params: z.object({ id: sessionId }),
    response: Done,
    errors: [{ status: 404, why: 'no such session of yours is open' }],
    handler: async ({ principal, params, audit }) => {
      await endSessions(await getDatabase(), consoleSelf(principal, 'end sessions').id, params.id, audit);
      return { success: true as const };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/me/tokens',
    summary: 'One’s own personal tokens (never their secrets)',
    access: 'person',
    response: z.object({ tokens: z.array(Token) }),
    handler: async ({ principal }) => ({ tokens: await listTokens(await getDatabase(), self(principal).id) }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/me/tokens',
    audit: { action: 'token.create', target: ({ body }) => `token ${body.name}` },
    summary:
      'Create a personal token for automation: at most one’s own rights (a lower role, fewer schemas), with an expiry; shown once',
    access: 'person',
    body: z.strictObject({
      name: z.string().trim().min(1, 'name must not be empty').max(100),
      role: role.optional().meta({ description: 'a role no higher than one’s own; default one’s own' }),
      schemas: scope.optional(),
      expiresInDays: z.number().int().min(1).max(TOKEN_MAX_DAYS).default(90),
    }),
    response: Token.extend({
      token: z.string().meta({ description: 'shown once: Authorization: Bearer <token>' }),
    }),
    status: 201,
    errors: [
      { status: 403, why: 'a role or schemas beyond one’s own' },
      { status: 409, why: 'a token of that name exists' },
    ],
    handler: async ({ principal, body, audit }) =>
      createToken(await getDatabase(), consoleSelf(principal, 'make a token'), body, audit),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/me/tokens/{id}',
    audit: { action: 'token.delete', target: ({ params }) => `token ${params.id}` },
    summary: 'Revoke one of one’s own personal tokens: its next request is refused',
    access: 'person',
    params: z.object({ id }),
    response: Done,
    errors: [{ status: 404, why: 'you have no such token' }],
    handler: async ({ principal, params, audit }) => {
      await deleteToken(await getDatabase(), self(principal).id, params.id, audit);
      return { success: true as const };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/people',
    summary: 'Everyone who may sign in, with their role and scope',
    access: 'admin',
    permission: 'people',
    response: z.object({ people: z.array(PersonOut) }),
    handler: async () => ({ people: await listPeople(await getDatabase()) }),
  }),
  defineRoute({
    method: 'POST',
    path: '/api/people',
    idempotent: { shownOnce: 'invitation' },
    audit: { action: 'person.create', target: ({ body }) => `person ${body.login}` },
    summary: `Add a person with a role and scope; without a password, with an invitation to set one (${INVITATION_DAYS} days)`,
    access: 'admin',
    permission: 'people',
    body: z.strictObject({
      login,
      name: z.string().trim().min(1).max(200).optional(),
      role,
      schemas: scope.default(null),
      password: newPassword.optional(),
    }),
    response: z.object({ person: PersonOut, invitation: Invitation.optional() }),
    status: 201,
    errors: [
      { status: 400, why: 'a schema in the scope does not exist, or the password is too weak' },
      { status: 409, why: 'someone already signs in with that login' },
      { status: 403, why: 'a password under SSO_ONLY' },
    ],
    handler: async ({ body, audit }) => {
      if (body.password !== undefined) refuseIfSsoOnly(await getConfig());
      return createPerson(await getDatabase(), body, audit);
    },
  }),
  defineRoute({
    method: 'PATCH',
    path: '/api/people/{id}',
    audit: { action: 'person.update', target: ({ params }) => `person ${params.id}` },
    summary: 'Change a person’s name, role or scope: it counts from their next request',
    access: 'admin',
    permission: 'people',
    params: z.object({ id }),
    body: z
      .strictObject({
        name: z.string().trim().min(1).max(200).optional(),
        role: role.optional(),
        schemas: scope.optional(),
      })
      .refine((b) => Object.keys(b).length > 0, 'send at least one of name, role, schemas'),
    response: PersonOut,
    errors: [
      { status: 403, why: 'an owner changing their own role or scope' },
      { status: 404, why: 'no such person' },
    ],
    handler: async ({ params, body, principal, audit }) =>
      updatePerson(await getDatabase(), params.id, body, asPerson(principal), audit),
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/people/{id}',
    audit: { action: 'person.delete', target: ({ params }) => `person ${params.id}` },
    summary: 'Remove a person: their sessions and tokens end with them, on their next request',
    access: 'admin',
    permission: 'people',
    params: z.object({ id }),
    response: Done,
    errors: [
      { status: 403, why: 'an owner removing themselves' },
      { status: 404, why: 'no such person' },
    ],
    handler: async ({ params, principal, audit }) => {
      await removePerson(await getDatabase(), params.id, asPerson(principal), audit);
      return { success: true as const };
    },
  }),
  defineRoute({
    method: 'POST',
    path: '/api/people/{id}/reset',
    idempotent: { shownOnce: 'token' },
    audit: { action: 'person.reset', target: ({ params }) => `person ${params.id}` },
    summary:
      'Reset a person’s password: it and their sessions end now; answers an invitation to set a new one',
    access: 'admin',
    permission: 'people',
    params: z.object({ id }),
    response: Invitation,
    errors: [{ status: 404, why: 'no such person' }],
    handler: async ({ params, principal, audit }) =>
      resetPerson(await getDatabase(), params.id, asPerson(principal), audit),
  }),
  defineRoute({
    method: 'GET',
    path: '/api/people/{id}/sessions',
    summary: 'A person’s console sessions still open',
    access: 'admin',
    permission: 'people',
    params: z.object({ id }),
    response: z.object({ sessions: z.array(Session) }),
    errors: [{ status: 404, why: 'no such person' }],
    handler: async ({ params, principal }) => {
      const db = await getDatabase();
      await getPerson(db, params.id);
      return { sessions: await listSessions(db, params.id, asPerson(principal)?.sessionId) };
    },
  }),
  defineRoute({
    method: 'DELETE',
    path: '/api/people/{id}/sessions',
    audit: { action: 'session.end', target: ({ params }) => `person ${params.id}` },
    summary: 'End every console session of a person: their next request signs them out',
    access: 'admin',
    permission: 'people',
    params: z.object({ id }),
    response: z.object({ ended: z.number() }),
    errors: [{ status: 404, why: 'no such person' }],
    handler: async ({ params, audit }) => {
      const db = await getDatabase();
      await getPerson(db, params.id);
      return { ended: await endSessions(db, params.id, undefined, audit) };
    },
  }),
];

const asPerson = (principal: Principal | undefined) => (principal?.kind === 'person' ? principal : undefined);

export const routes = [...personRoutes, ...ssoRoutes];

export const handler = httpHandler(routes);
