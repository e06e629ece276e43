import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { rootCertificates } from 'node:tls';
import * as oidc from 'openid-client';

import type { Config, GroupGrant } from '#lib/config';
import { ApiError, BadRequest } from '#lib/errors';

/**
 * Single sign-on with an OpenID Connect provider, through openid-client (the certified relying
 * party): the provider's metadata and keys, the authorization code flow with PKCE, `state` and
 * `nonce`, and what its claims say about a person. Who that person is here, and the attempts a
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

let discovered: { key: string; configuration: Promise<oidc.Configuration> } | undefined;

const unreachable = (why: string) =>
  new ApiError(
    502,
    'Sign-in provider unavailable',
    `the single sign-on provider did not answer as expected: ${why}`,
  );

/** The provider's configuration, discovered once per process (and again after a failure). */
export function providerOf(config: Config): Promise<oidc.Configuration> {
  const { OIDC_ISSUER: issuer, OIDC_CLIENT_ID: clientId, OIDC_CLIENT_SECRET: secret } = config;
  if (!issuer || !clientId)
    throw new ApiError(404, 'Not found', 'single sign-on is not set up (OIDC_ISSUER)');
  const key = JSON.stringify([issuer, clientId, secret, config.OIDC_CA_FILE]);
  if (discovered?.key !== key) {
    const fetcher = config.OIDC_CA_FILE
      ? httpsFetch([...rootCertificates, readFileSync(config.OIDC_CA_FILE, 'utf8')])
      : undefined;
    const configuration = oidc
      .discovery(
        new URL(issuer),
        clientId,
        secret,
        secret ? oidc.ClientSecretPost(secret) : oidc.None(),
        fetcher ? { [oidc.customFetch]: fetcher, timeout: 10 } : { timeout: 10 },
      )
      .then((found) => {
        if (fetcher) found[oidc.customFetch] = fetcher;
        return found;
      });
    configuration.catch(() => {
      if (discovered?.configuration === configuration) discovered = undefined;
    });
    discovered = { key, configuration };
  }
  return discovered.configuration.catch((error: unknown) => {
    throw unreachable(error instanceof Error ? error.message : String(error));
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
    if (error instanceof TypeError && !(error instanceof oidc.ClientError)) throw unreachable(error.message);
    throw new BadRequest('Sign-in refused', `the provider's answer did not check out: ${reason(error)}`);
  }
  const idToken = tokens.claims();
  if (!idToken) throw new BadRequest('Sign-in refused', 'the provider sent no ID token');
  let claims: Record<string, unknown> = { ...idToken };
  const wanted = ['email', 'name', config.OIDC_GROUPS_CLAIM];
  if (wanted.some((claim) => claims[claim] === undefined) && provider.serverMetadata().userinfo_endpoint) {
    const more = await oidc
      .fetchUserInfo(provider, tokens.access_token, idToken.sub)
      .catch((error: unknown) => {
        throw new BadRequest(
          'Sign-in refused',
          `the provider's userinfo did not check out: ${reason(error)}`,
        );
      });
    claims = { ...more, ...claims };
  }
  return { issuer: idToken.iss, subject: idToken.sub, claims };
}

function reason(error: unknown): string {
  if (error instanceof oidc.AuthorizationResponseError || error instanceof oidc.ResponseBodyError)
    return `${error.error}${error.error_description ? ` (${error.error_description})` : ''}`;
  if (!(error instanceof Error)) return String(error);
  // openid-client says what kind of check failed; the oauth4webapi error it wraps says which.
  return error.cause instanceof Error ? `${error.message} (${error.cause.message})` : error.message;
}

/** The login a person has here: their e-mail address (when verified), else their username there. */
export function loginOf({ claims }: Identity): string {
  const email =
    typeof claims.email === 'string' && claims.email_verified !== false ? claims.email : undefined;
  const login = (email ?? (typeof claims.preferred_username === 'string' ? claims.preferred_username : ''))
    .trim()
    .toLowerCase();
  if (!/^[a-z0-9][a-z0-9._@+-]{0,99}$/.test(login))
    throw new ApiError(
      403,
      'Forbidden',
      'the provider gave no verified e-mail address or username that can be a login here (letters, digits and . _ @ + -)',
    );
  return login;
}

export const displayNameOf = ({ claims }: Identity, login: string): string =>
  (typeof claims.name === 'string' && claims.name.trim() ? claims.name.trim() : login).slice(0, 200);

/** The role and scope the person's groups give (OIDC_ROLE_MAP's first match), if any. */
export function groupGrant(config: Config, { claims }: Identity): GroupGrant | undefined {
  const value = claims[config.OIDC_GROUPS_CLAIM];
  const groups = new Set((Array.isArray(value) ? value : [value]).filter((g) => typeof g === 'string'));
  return config.OIDC_ROLE_MAP.find(({ group }) => groups.has(group));
}
