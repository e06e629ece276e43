import { z } from 'zod';
import { getPerson } from '#lib/admin/people';
import { ATTEMPT_MINUTES, finishSignIn, RETURN_TO, startSignIn } from '#lib/admin/sso';
import { getConfig } from '#lib/config';
import { signedInAs } from '#lib/db/audit-log';
import { getDatabase } from '#lib/db/pool';
import { ApiError, NotFound } from '#lib/errors';
import { clientKey } from '#lib/http/auth-throttle';
import { signInThrottle } from '#lib/http/authenticate';
import { Redirect } from '#lib/http/respond';
import { defineRoute } from '#lib/http/route';
import { openConsoleSession, SSO_COOKIE, ssoSetCookie } from '#lib/http/session-cookie';
import { ssoEnabled } from '#lib/sso';

/**
 * Single sign-on (lib/sso, lib/admin/sso): whether it is set up, the way to the provider, and the
 * way back, which opens a console session as the browser's sign-in form does. Served by the people
 * function, with the other ways to sign in.
 */

const Redirected = z.null().meta({ description: 'no body: see Location' });

/**
 * Why a browser's sign-in was refused, as the console's sign-in page words it (a code, never
 * text of the request's making on that page).
 */
const REFUSALS: Record<number, string> = { 400: 'refused', 403: 'no-role', 409: 'taken', 429: 'too-many' };

const refusal = (result: unknown) => result instanceof Redirect && result.refused;

const toSignInPage = (error: ApiError) =>
  new Redirect(`/?sso_error=${REFUSALS[error.status] ?? 'refused'}#/`, {}, true);

export const routes = [
  defineRoute({
    method: 'GET',
    path: '/api/sso',
    summary: 'Whether people may sign in with single sign-on here, and whether only that way',
    access: 'public',
    ungated: true,
    response: z.object({
      enabled: z.boolean().meta({ description: 'OIDC_ISSUER is set' }),
      ssoOnly: z.boolean().meta({ description: 'SSO_ONLY: people have no password here (AUTH_USER does)' }),
      startUrl: z.string().nullable().meta({ description: 'where the browser goes to sign in' }),
    }),
    handler: async () => {
      const config = await getConfig();
      const enabled = ssoEnabled(config);
      return { enabled, ssoOnly: config.SSO_ONLY, startUrl: enabled ? '/api/sso/start' : null };
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/sso/start',
    status: 303,
    setsCookie: true,
    summary: `Sign in with the single sign-on provider: to the provider, with this browser’s attempt sealed in a cookie (${ATTEMPT_MINUTES} minutes)`,
    access: 'public',
    ungated: true,
    query: z.strictObject({
      returnTo: z
        .string()
        .regex(RETURN_TO, 'returnTo is a console page such as #/tenants')
        .default('#/')
        .meta({ description: 'the console page to land on' }),
    }),
    response: Redirected,
    errors: [
      { status: 404, why: 'single sign-on is not set up' },
      { status: 502, why: 'the provider did not answer its discovery document' },
    ],
    handler: async ({ query, overHttps }) => {
      const { url, cookie } = await startSignIn(await getConfig(), query.returnTo);
      return new Redirect(url, { 'set-cookie': ssoSetCookie(overHttps, cookie, ATTEMPT_MINUTES * 60) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/sso/callback',
    status: 303,
    setsCookie: true,
    // Written with the session it opens, naming how the person came to be (target); a refusal
    // sent back to the sign-in page changed nothing, but for a person whose groups no longer give
    // a role (person.revoke, written with what it ended).
    audit: { action: 'session.start', changed: (result) => !refusal(result) },
    summary:
      'Where the provider sends the browser back: the answer checked, the person found (or made from their groups), and a console session opened',
    access: 'public',
    ungated: true,
    query: z.record(z.string(), z.string().max(4096)).meta({
      description: 'the provider’s answer as it sent it: code, state and iss (or error)',
    }),
    response: Redirected,
    errors: [
      {
        status: 400,
        why: 'the answer does not check out: another browser’s or a used attempt, a wrong state, nonce or issuer, a refused code',
      },
      { status: 403, why: 'no group of theirs gives a role here, and no owner added them' },
      { status: 404, why: 'single sign-on is not set up' },
      { status: 409, why: 'their login here is another person’s' },
      { status: 429, why: 'too many refused sign-ins from this address' },
      { status: 502, why: 'the provider did not answer' },
    ],
    handler: async ({ query, overHttps, cookie, navigating, clientAddress, userAgent, audit }) => {
      const [config, db] = await Promise.all([getConfig(), getDatabase()]);
      if (!ssoEnabled(config)) throw new NotFound('Not found', 'single sign-on is not set up (OIDC_ISSUER)');
      // A refused answer counts against the address as a wrong password does.
      const throttle = signInThrottle(config, db);
      const keys = [clientKey(clientAddress)];
      try {
        await throttle.countFailures(keys);
        const callback = new URL(config.OIDC_REDIRECT_URI as string);
        for (const [name, value] of Object.entries(query)) callback.searchParams.set(name, value);
        const sealed = cookie(SSO_COOKIE(overHttps));
        const { personId, returnTo } = await finishSignIn(db, config, callback, sealed, audit);
        await throttle.forgive(keys);
        const person = await getPerson(db, personId);
        signedInAs(audit, person, 'sso');
        const input = { clientAddress, userAgent, overHttps, audit };
        const { setCookie } = await openConsoleSession(db, config, { personId }, 'sso', input);
        return new Redirect(`/${returnTo}`, { 'set-cookie': setCookie });
      } catch (error) {
        // A browser lands on the sign-in page, which says why; an API client gets the error itself.
        if (navigating && error instanceof ApiError && error.status < 500) return toSignInPage(error);
        throw error;
      }
    },
  }),
];
