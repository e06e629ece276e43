// A real OpenID Provider for the tests (oidc-provider, the certified implementation from the npm
// registry) behind HTTPS, started as its own process by test/support/oidc-provider.ts. Its sign-in
// pages are the library's development ones: any login, any password; the account's claims come
// from OIDC_TEST_ACCOUNTS_FILE. Settings come from the environment that process passes.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import Provider from 'oidc-provider';

const env = process.env;
/** Read at every sign-in: a test changes an account's groups by writing the file. */
const accounts = () => JSON.parse(readFileSync(env.OIDC_TEST_ACCOUNTS_FILE, 'utf8'));

const provider = new Provider(env.OIDC_TEST_ISSUER, {
  clients: [
    {
      client_id: env.OIDC_TEST_CLIENT_ID,
      client_secret: env.OIDC_TEST_CLIENT_SECRET,
      redirect_uris: JSON.parse(env.OIDC_TEST_REDIRECT_URIS),
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
  ],
  claims: {
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  cookies: { keys: [env.OIDC_TEST_COOKIE_KEY] },
  features: { devInteractions: { enabled: true } },
  findAccount: (_ctx, id) => ({
    accountId: id,
    claims: () => ({ sub: id, ...(accounts()[id] ?? { email: `${id}@example.test`, email_verified: true }) }),
  }),
});
// The library warns that its development keys and pages are for development: so they are here.
provider.on('server_error', (_ctx, error) => console.error('oidc-provider:', error));

const server = createServer(
  { cert: readFileSync(env.OIDC_TEST_CERT_FILE), key: readFileSync(env.OIDC_TEST_KEY_FILE) },
  provider.callback(),
);
server.listen(Number(env.OIDC_TEST_PORT), '127.0.0.1', () => console.log('oidc-provider listening'));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
