import { z } from 'zod';
import { getPerson } from '#lib/admin/people';
import { ATTEMPT_MINUTES, finishSignIn, RETURN_TO, startSignIn } from '#lib/admin/sso';
import { getConfig } from '#lib/config';
import { signedInAs } from '#lib/db/audit-log';
import { getDatabase } from '#lib/db/pool';
import { ApiError } from '#lib/errors';
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

/** Back at the console, with what went wrong for its sign-in page to say. */
const toConsoleWith = (error: unknown) =>
  new Redirect(
    `/?sso_error=${encodeURIComponent(error instanceof ApiError ? error.message : 'the sign-in failed; try again')}#/`,
  );

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
    summary: `Sign in with the single sign-on provider: to the provider, with this browser’s attempt in a cookie (${ATTEMPT_MINUTES} minutes)`,
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
      { status: 503, why: 'too many sign-ins are under way' },
    ],
    handler: async ({ query, overHttps }) => {
      const config = await getConfig();
      const { url, state } = await startSignIn(await getDatabase(), config, query.returnTo);
      return new Redirect(url, { 'set-cookie': ssoSetCookie(overHttps, state, ATTEMPT_MINUTES * 60) });
    },
  }),
  defineRoute({
    method: 'GET',
    path: '/api/sso/callback',
    status: 303,
    setsCookie: true,
    audit: { action: 'session.start' },
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
      { status: 409, why: 'their login here belongs to another account at the provider' },
      { status: 502, why: 'the provider did not answer' },
    ],
    handler: async ({ query, overHttps, cookie, navigating, clientAddress, userAgent, audit }) => {
      const [config, db] = await Promise.all([getConfig(), getDatabase()]);
      try {
        const callback = new URL(config.OIDC_REDIRECT_URI ?? 'https://unset.invalid/api/sso/callback');
        for (const [name, value] of Object.entries(query)) callback.searchParams.set(name, value);
        const { personId, returnTo } = await finishSignIn(
          db,
          config,
          callback,
          cookie(SSO_COOKIE(overHttps)),
        );
        const person = await getPerson(db, personId);
        signedInAs(audit, person, 'sso');
        const input = { clientAddress, userAgent, overHttps, audit };
        const { setCookie } = await openConsoleSession(db, config, { personId }, 'sso', input);
        return new Redirect(`/${returnTo}`, { 'set-cookie': setCookie });
      } catch (error) {
        // A browser lands on the sign-in page, which says why; an API client gets the error itself.
        if (navigating && error instanceof ApiError && error.status < 500) return toConsoleWith(error);
        throw error;
      }
    },
  }),
];
