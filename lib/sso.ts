import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { rootCertificates } from 'node:tls';
import * as oidc from 'openid-client';
import type { Config, GroupGrant } from '#lib/config';
import { ApiError, BadRequest, ConfigError } from '#lib/errors';
import { logger } from '#lib/log';

/**
 * Single sign-on with an OpenID Connect provider, through openid-client (the certified relying
 * party): the provider's metadata and keys, the authorization code flow with PKCE, `state` and
 * `nonce`, and what its claims say about a person. Who that person is here, and the attempt a
 * browser has under way, are lib/admin/sso.
 */

export const ssoEnabled = (config: Config): boolean => Boolean(config.OIDC_ISSUER);

/** A fetch over node:https trusting `ca` too (OIDC_CA_FILE), for a provider with a private CA. */
function httpsFetch(ca: string[]): oidc.CustomFetch {
  return (url, options) =>
    new Promise<Response>((resolve, reject) => {
      const headers = Object.fromEntries(
        new Headers(options.headers as ConstructorParameters<typeof Headers>[0]),
      );
      const req = request(
        url,
        { method: options.method, headers, ca, signal: options.signal ?? undefined },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('error', reject);
          res.on('end', () => {
            const answer = new Headers();
            for (const [name, value] of Object.entries(res.headers))
              for (const one of [value ?? []].flat()) answer.append(name, one);
            resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 502, headers: answer }));
          });
        },
      );
      req.on('error', reject);
      req.end(options.body === undefined || options.body === null ? undefined : String(options.body));
    });
}

function extraCa(file: string): string[] {
  try {
    return [...rootCertificates, readFileSync(file, 'utf8')];
  } catch (error) {
    throw new ConfigError(
      `OIDC_CA_FILE could not be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`,
    );
  }
}

/** The provider did not answer as expected: said in general to the caller, in full in the log. */
function unreachable(error: unknown): ApiError {
  const detail = error instanceof Error ? error.message : String(error);
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
  logger.warn('single sign-on: the provider did not answer as expected', { error: `${detail}${cause}` });
  return new ApiError(
    502,
    'Sign-in provider unavailable',
    'the single sign-on provider did not answer; try again later',
  );
}

let discovered: { key: string; configuration: Promise<oidc.Configuration> } | undefined;

/**
 * The provider's configuration, discovered once per process (and again after a failure). An
 * issuer that stands for many (Entra ID's `{tenantid}`: any organisation's accounts) is refused.
 */
export function providerOf(config: Config): Promise<oidc.Configuration> {
  const { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: clientId, OIDC_CLIENT_SECRET: secret } = config;
  if (!issuer || !clientId)
    throw new ApiError(404, 'Not found', 'single sign-on is not set up (OIDC_ISSUER)');
  const key = JSON.stringify([issuer, clientId, secret, config.OIDC_CA_FILE]);
  if (discovered?.key !== key) {
    const fetcher = config.OIDC_CA_FILE ? httpsFetch(extraCa(config.OIDC_CA_FILE)) : undefined;
    const configuration = oidc
      .discovery(
        new URL(issuer),
        clientId,
        secret,
        secret ? oidc.ClientSecretPost(secret) : oidc.None(),
        fetcher ? { [oidc.customFetch]: fetcher, timeout: 10 } : { timeout: 10 },
      )
      .then((found) => {
        if (found.serverMetadata().issuer.includes('{'))
          throw new ConfigError(
            'OIDC_ISSUER stands for many organisations (its issuer is a template): name your own tenant’s issuer',
          );
        if (fetcher) found[oidc.customFetch] = fetcher;
        return found;
      });
    configuration.catch(() => {
      if (discovered?.configuration === configuration) discovered = undefined;
    });
    discovered = { key, configuration };
  }
  return discovered.configuration.catch((error: unknown) => {
    throw error instanceof ConfigError ? error : unreachable(error);
  });
}

/** What one sign-in attempt keeps until the provider sends the browser back. */
export interface Attempt {
  state: string;
  nonce: string;
  verifier: string;
}

export const newAttempt = (): Attempt => ({
  state: oidc.randomState(),
  nonce: oidc.randomNonce(),
  verifier: oidc.randomPKCECodeVerifier(),
});

/** Where the browser goes to sign in at the provider for `attempt`. */
export async function authorizationUrl(config: Config, attempt: Attempt): Promise<URL> {
  const provider = await providerOf(config);
  return oidc.buildAuthorizationUrl(provider, {
    redirect_uri: config.OIDC_REDIRECT_URI as string,
    scope: config.OIDC_SCOPES,
    code_challenge: await oidc.calculatePKCECodeChallenge(attempt.verifier),
    code_challenge_method: 'S256',
    state: attempt.state,
    nonce: attempt.nonce,
  });
}

/** Who the provider says signed in: its issuer, their subject there and the claims we read. */
export interface Identity {
  issuer: string;
  subject: string;
  claims: Record<string, unknown>;
}

/**
 * The provider's answer at the callback, checked: its issuer (and the `iss` parameter), `state`,
 * the code exchanged with the PKCE verifier, the ID token's signature (the provider's keys),
 * audience, lifetime and `nonce`. Claims the ID token leaves out come from the userinfo endpoint.
 */
export async function identityAt(config: Config, callback: URL, attempt: Attempt): Promise<Identity> {
  const provider = await providerOf(config);
  let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
  try {
    tokens = await oidc.authorizationCodeGrant(provider, callback, {
      pkceCodeVerifier: attempt.verifier,
      expectedState: attempt.state,
      expectedNonce: attempt.nonce,
      idTokenExpected: true,
    });
  } catch (error) {
    throw refusalOf(error);
  }
  const idToken = tokens.claims();
  if (!idToken) throw new BadRequest('Sign-in refused', 'the provider sent no ID token');
  let claims: Record<string, unknown> = { ...idToken };
  const wanted = ['email', 'email_verified', 'name', config.OIDC_GROUPS_CLAIM];
  if (wanted.some((claim) => claims[claim] === undefined) && provider.serverMetadata().userinfo_endpoint) {
    const more = await oidc
      .fetchUserInfo(provider, tokens.access_token, idToken.sub)
      .catch((error: unknown) => {
        throw refusalOf(error);
      });
    claims = { ...more, ...claims };
  }
  return { issuer: idToken.iss, subject: idToken.sub, claims };
}

/** Failures of the answer's own checks (the caller's: 400); anything else is the provider's (502). */
const ANSWER_CHECKS = new Set([
  'OAUTH_JWT_CLAIM_COMPARISON_FAILED',
  'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED',
  'OAUTH_JWT_TIMESTAMP_CHECK_FAILED',
  'OAUTH_INVALID_RESPONSE',
  'OAUTH_PARSE_ERROR',
]);

/** What the provider's token or userinfo endpoint refuses for the caller's sake, not ours. */
const CALLERS_FAULT = new Set(['invalid_grant', 'access_denied', 'invalid_token']);

function refusalOf(error: unknown): ApiError {
  // An error answer at the callback (the person declined, the provider refused them), or an
  // endpoint refusing the code: the caller's. invalid_client and the like: ours (logged, 502).
  if (
    error instanceof oidc.AuthorizationResponseError ||
    (error instanceof oidc.ResponseBodyError && CALLERS_FAULT.has(error.error))
  )
    return new BadRequest('Sign-in refused', `the provider refused: ${error.error}`);
  if (error instanceof oidc.ClientError && error.code && ANSWER_CHECKS.has(error.code)) {
    // openid-client says what kind of check failed; the oauth4webapi error it wraps says which.
    const which = error.cause instanceof Error ? ` (${error.cause.message})` : '';
    return new BadRequest(
      'Sign-in refused',
      `the provider's answer did not check out: ${error.message}${which}`,
    );
  }
  return unreachable(error);
}

/** A login as the provider gave it: ASCII only, checked before it is lowercased (no Unicode folding). */
const LOGIN = /^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$/;

/**
 * The login a person has here: their e-mail address when the provider says it is verified
 * (`email_verified: true`; a provider that does not say is not taken at its word), which may be
 * a person an owner added; else their username there, without `@` (it may not pass for an
 * address), which only ever makes a new person.
 */
export function loginOf({ claims }: Identity): { login: string; verified: boolean } {
  const { email, email_verified: verified, preferred_username: username } = claims;
  if (typeof email === 'string' && verified === true && LOGIN.test(email))
    return { login: email.toLowerCase(), verified: true };
  if (typeof username === 'string' && LOGIN.test(username) && !username.includes('@'))
    return { login: username.toLowerCase(), verified: false };
  throw new ApiError(
    403,
    'No role here',
    'the provider gave neither a verified e-mail address nor a username (letters, digits and . _ + -) to sign in as; ask an owner of dbadmin',
  );
}

export const displayNameOf = ({ claims }: Identity, login: string): string =>
  (typeof claims.name === 'string' && claims.name.trim() ? claims.name.trim() : login).slice(0, 200);

/**
 * The role and scope the person's groups give (OIDC_ROLE_MAP's first match), null for none, or
 * 'unknown' when the provider sent no groups claim at all (Entra ID leaves it out past 200 groups).
 */
export function groupGrant(config: Config, { claims }: Identity): GroupGrant | null | 'unknown' {
  const value = claims[config.OIDC_GROUPS_CLAIM];
  if (value === undefined) return 'unknown';
  const groups = new Set((Array.isArray(value) ? value : [value]).filter((g) => typeof g === 'string'));
  return config.OIDC_ROLE_MAP.find(({ group }) => groups.has(group)) ?? null;
}
