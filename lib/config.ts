import type { SSMClient } from '@aws-sdk/client-ssm';
import { z } from 'zod';
import { PERSON_ROLES, type PersonRole } from '#lib/access';
import { IDENTIFIER_MAX_LENGTH, IDENTIFIER_PATTERN } from '#lib/db/identifiers';
import { ConfigError } from '#lib/errors';

/** Settings that are secrets: on Lambda they may come from SSM Parameter Store under SSM_PREFIX. */
export const SECRET_SETTINGS = ['DATABASE_URL', 'AUTH_USER', 'AUTH_PASS', 'DBADMIN_SECRET'] as const;
/** Secrets read from SSM too when they are there, but not required to be. */
export const OPTIONAL_SECRET_SETTINGS = ['METRICS_TOKEN', 'OIDC_CLIENT_SECRET'] as const;

type Env = Record<string, string | undefined>;

/** API Gateway gives up after 30 s, so on Lambda a query must be cancelled before that. */
const LAMBDA_QUERY_TIMEOUT_CEILING_MS = 29_000;

export const isLambda = (env: Env = process.env) =>
  Boolean(env.AWS_LAMBDA_FUNCTION_NAME) && env.IS_OFFLINE !== 'true';

const positiveInt = z.coerce.number().int().positive();

/** DB_PROCESS_CONNECTIONS on Lambda when unset, as packaging counts it (bin/lambda-connections). */
export const LAMBDA_PROCESS_CONNECTIONS = 4;

/**
 * What each sslmode becomes: TLS is either off, asked for by name, or verified in full (chain and
 * host name). pg reads require and verify-ca as verify-full today; writing it out keeps them so
 * when pg adopts libpq's weaker meanings.
 */
const SSL_MODES: Record<string, 'disable' | 'verify-full' | undefined> = {
  disable: 'disable',
  require: 'verify-full',
  'verify-ca': 'verify-full',
  'verify-full': 'verify-full',
};

/** Parameters pg reads that can switch certificate checks off (ssl=no-verify, libpq's require). */
const REFUSED_TLS_PARAMETERS = ['ssl', 'uselibpqcompat'];

/**
 * A database URL with its TLS written out: its own sslmode, else `fallback` (defaultSslMode).
 * Throws on anything that would use TLS without verifying the server's certificate.
 */
export function withVerifiedTls(url: string, fallback: string): string {
  const parsed = new URL(url);
  for (const name of REFUSED_TLS_PARAMETERS) {
    if (parsed.searchParams.has(name))
      throw new Error(`${name}= is not supported: use sslmode=verify-full or sslmode=disable`);
  }
  const given = parsed.searchParams.get('sslmode') ?? fallback;
  const mode = SSL_MODES[given];
  if (!mode)
    throw new Error(
      `sslmode=${given} is not supported: use verify-full (TLS, certificate verified) or disable`,
    );
  parsed.searchParams.set('sslmode', mode);
  return parsed.toString();
}

/** A URL without sslmode: PGSSLMODE as libpq reads it, else verify-full on Lambda (RDS requires TLS). */
export const defaultSslMode = (env: Env) => env.PGSSLMODE ?? (isLambda(env) ? 'verify-full' : 'disable');

/**
 * `options=` would set session parameters that outrank the ones each pool fixes at connection
 * start (the service's pg_catalog-only search_path, a schema role's role and read-only mode).
 */
function refuseSessionOptions(url: string): void {
  if (new URL(url).searchParams.has('options'))
    throw new Error('options= is not supported: the service sets its sessions’ parameters itself');
}

/** A postgres:// URL setting, returned with its TLS written out by withVerifiedTls. */
export const databaseUrlSetting = (fallbackSslMode: string) =>
  z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'expected a postgres:// or postgresql:// URL')
    .transform((url, context) => {
      try {
        refuseSessionOptions(url);
        return withVerifiedTls(url, fallbackSslMode);
      } catch (error) {
        // Never the URL itself in the message: it holds the password.
        const message = error instanceof TypeError ? 'not a URL' : (error as Error).message;
        context.issues.push({ code: 'custom', message, input: '' });
        return z.NEVER;
      }
    });

/** A list setting's entries (CORS_ALLOWED_ORIGINS, TRUSTED_PROXIES): comma separated, blanks dropped. */
export function commaSeparated(setting: string | undefined): string[] {
  return (setting ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
}

/** Why `entry` is not an origin CORS_ALLOWED_ORIGINS may name, or undefined when it is one. */
function notAnOrigin(entry: string): string | undefined {
  if (entry === '*' || entry === 'null') return `"${entry}" would grant every page; name each origin`;
  let url: URL;
  try {
    url = new URL(entry);
  } catch {
    return `"${entry}" is not an origin such as https://admin.example.com`;
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return `"${entry}" is not http(s)`;
  if (url.origin !== entry)
    return `"${entry}" is not an origin: write ${url.origin} (no path, no trailing slash)`;
  return undefined;
}

const allowedOriginsSetting = z.string().superRefine((setting, context) => {
  for (const entry of commaSeparated(setting)) {
    const problem = notAnOrigin(entry);
    if (problem) context.addIssue({ code: 'custom', message: problem });
  }
});

/** One entry of OIDC_ROLE_MAP: people in `group` at the provider get `role` over `schemas` (null: all). */
export interface GroupGrant {
  group: string;
  role: PersonRole;
  schemas: string[] | null;
}

/** Entra ID's issuers for any organisation's (or any personal) accounts, not one tenant's. */
const MANY_TENANTS =
  /^https:\/\/login\.microsoftonline\.com\/(common|organizations|consumers|\{tenantid\})(\/|$)/i;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * OIDC_ROLE_MAP: `group=role` or `group=role:schema,schema`, entries apart by `;` or new lines,
 * the first whose group a person is in deciding (so name the most powerful first).
 */
const roleMapSetting = z.string().transform((setting, context): GroupGrant[] => {
  const grants: GroupGrant[] = [];
  for (const entry of setting
    .split(/[;\n]/)
    .map((part) => part.trim())
    .filter(Boolean)) {
    const grant = groupGrantOf(entry);
    if (typeof grant === 'string') context.addIssue({ code: 'custom', message: grant });
    else grants.push(grant);
  }
  return grants;
});

/** One OIDC_ROLE_MAP entry, or why it is not one. */
function groupGrantOf(entry: string): GroupGrant | string {
  const match = /^([^=]+)=\s*([a-z]+)\s*(?::(.*))?$/.exec(entry);
  if (!match) return `"${entry}" is not group=role or group=role:schema,schema`;
  const [, group = '', role = '', listed] = match;
  if (!PERSON_ROLES.includes(role as PersonRole))
    return `"${entry}": the role is one of ${PERSON_ROLES.join(', ')}`;
  const schemas =
    listed === undefined
      ? null
      : listed
          .split(',')
          .map((name) => name.trim())
          .filter(Boolean);
  if (
    schemas &&
    (schemas.length === 0 ||
      schemas.some((name) => !IDENTIFIER_PATTERN.test(name) || name.length > IDENTIFIER_MAX_LENGTH))
  )
    return `"${entry}": after the colon, schema names apart by commas`;
  return { group: group.trim(), role: role as PersonRole, schemas };
}

const switchSetting = z.enum(['true', 'false']).transform((value) => value === 'true');

const settingsSchema = (lambda: boolean, fallbackSslMode = 'disable') =>
  z
    .object({
      NODE_ENV: z.enum(['development', 'production', 'test']).default(lambda ? 'production' : 'development'),
      DATABASE_URL: databaseUrlSetting(fallbackSslMode),
      // The password of DATABASE_URL's login, given apart so that any character works (no URL
      // encoding); it replaces one in the URL.
      DATABASE_PASSWORD: z.string().min(1).optional(),
      // Where people reach the database, when not where the service does (an internal name, a
      // pooler, 127.0.0.1): what a schema's connection string names (lib/admin/connection-string).
      PUBLIC_DATABASE_HOST: z
        .union([z.hostname(), z.ipv6()], 'expected a host name or IP address, such as db.example.com')
        .optional(),
      PUBLIC_DATABASE_PORT: positiveInt.max(65_535, 'at most 65535').optional(),
      AUTH_USER: z.string().min(1),
      AUTH_PASS: z.string().min(1),
      // Failed sign-ins per client address in a window before it gets 429 (lib/http/auth-throttle).
      AUTH_MAX_FAILURES: positiveInt.default(10),
      AUTH_FAILURE_WINDOW_S: positiveInt.default(60),
      // A person's console session (lib/admin/person-sessions) ends after this long unused, and
      // this long after sign-in whatever its use.
      SESSION_IDLE_MINUTES: positiveInt.max(10_080, 'at most 10080 (a week)').default(60),
      SESSION_MAX_HOURS: positiveInt.max(720, 'at most 720 (30 days)').default(12),
      // Reverse proxies (addresses or CIDR ranges) whose X-Forwarded-For names the client: the
      // throttle counts that client, not the proxy (the container's Caddy; never a client's word).
      TRUSTED_PROXIES: z
        .string()
        .transform(commaSeparated)
        .pipe(
          z.array(
            z.union([z.ipv4(), z.ipv6(), z.cidrv4(), z.cidrv6()], 'expected IP addresses or CIDR ranges'),
          ),
        )
        .default([]),
      // Other origins whose pages may use the API with the admin's credentials (a front end served
      // elsewhere); none by default (lib/http/cross-site, deploy/cors-plugin.cjs).
      CORS_ALLOWED_ORIGINS: allowedOriginsSetting.optional(),
      // Single sign-on with an OpenID Connect provider (lib/sso): on when OIDC_ISSUER is set. The
      // redirect URI is this service's /api/sso/callback, as registered with the provider.
      OIDC_ISSUER: z
        .url({ protocol: /^https$/, error: 'expected the provider’s https:// issuer URL' })
        .refine(
          (url) => !MANY_TENANTS.test(url),
          'names every organisation’s accounts: name your own tenant’s issuer',
        )
        .optional(),
      OIDC_CLIENT_ID: z.string().min(1).optional(),
      OIDC_CLIENT_SECRET: z.string().min(1).optional(),
      OIDC_REDIRECT_URI: z
        .url({ protocol: /^https?$/, error: 'expected this service’s URL of /api/sso/callback' })
        .superRefine((value, context) => {
          const url = new URL(value);
          const problem = !url.pathname.endsWith('/api/sso/callback')
            ? 'must end in /api/sso/callback'
            : url.search || url.hash
              ? 'takes no query or fragment'
              : url.protocol === 'http:' && !LOOPBACK.has(url.hostname)
                ? 'must be https:// but on this machine (localhost)'
                : undefined;
          if (problem) context.addIssue({ code: 'custom', message: problem });
        })
        .optional(),
      OIDC_SCOPES: z
        .string()
        .regex(/(^|\s)openid(\s|$)/, 'must include openid')
        .default('openid email profile'),
      // The claim listing a person's groups, and which group gives which role and scope.
      OIDC_GROUPS_CLAIM: z.string().min(1).default('groups'),
      OIDC_ROLE_MAP: roleMapSetting.default([]),
      // An extra CA (PEM) for a provider with a private certificate; NODE_EXTRA_CA_CERTS works too.
      OIDC_CA_FILE: z.string().min(1).optional(),
      // People sign in only through the provider (no passwords); AUTH_USER's stay, for break-glass.
      SSO_ONLY: switchSetting.default(false),
      // Derives the passwords of the roles API keys run as (and, later, license file keys).
      DBADMIN_SECRET: z.string().min(32, 'must be at least 32 characters (e.g. openssl rand -hex 32)'),
      QUERY_TIMEOUT_MS: positiveInt.default(lambda ? 25_000 : 30_000),
      // How long a schema change waits for its table lock before answering 409: a queued ACCESS
      // EXCLUSIVE request stalls every reader behind it, so not long.
      SCHEMA_LOCK_TIMEOUT_MS: positiveInt.default(3_000),
      // What one response may carry. Lambda answers at most 6 MiB, and the body travels inside a
      // JSON envelope that may double its escaped characters: 3 MB of JSON always fits.
      // An import in parts is staged in dbadmin's own tables until its commit: at most this many
      // bytes each, and an import left this long without a part or a commit is deleted.
      IMPORT_MAX_BYTES: positiveInt.default(1024 * 1024 * 1024),
      IMPORT_SESSION_TTL_SECONDS: positiveInt.default(3600),
      // The audit log (lib/db/audit-log): on unless switched off; the admin's SQL text is kept
      // only when asked (a fingerprint and its kind always are); entries older than this go.
      AUDIT_LOG: z.enum(['on', 'off']).default('on'),
      AUDIT_SQL_TEXT: z.enum(['on', 'off']).default('off'),
      AUDIT_RETENTION_DAYS: positiveInt.max(36_500, 'at most 36500 (100 years)').default(365),
      // GET /api/metrics also answers `Authorization: Bearer <token>` with this token (a scraper
      // need not hold the admin's password).
      METRICS_TOKEN: z
        .string()
        .min(32, 'must be at least 32 characters (e.g. openssl rand -hex 32)')
        .optional(),
      QUERY_MAX_ROWS: positiveInt.default(10_000),
      QUERY_MAX_BYTES: positiveInt.default(3_000_000),
      // A Lambda container serves one request at a time and there may be many of them: each gets
      // a small pool, so together they stay under the server's max_connections. The local host
      // runs each function once, in its own process, for every request in flight (bin/offline):
      // its pools, per role too, are DB_POOL_MAX wide, so one slow request holds no other back.
      DB_POOL_MAX: positiveInt.default(lambda ? 2 : 10),
      // All the connections one process (a Lambda container) may hold, every pool together; and
      // what the deployment may use in all (max_connections less reserved slots), which packaging
      // checks Σ reservedConcurrency × DB_PROCESS_CONNECTIONS against (bin/lambda-connections).
      DB_PROCESS_CONNECTIONS: positiveInt.default(lambda ? LAMBDA_PROCESS_CONNECTIONS : 60),
      DATABASE_MAX_CONNECTIONS: positiveInt.optional(),
      // How long a request waits for a connection (a slot of the budget, and the login). Through a
      // pooler in transaction mode a login queues in the pooler behind its max_db_connections (its
      // auth_query needs a server connection too), which bounds that wait itself: longer there.
      DB_CONNECT_TIMEOUT_MS: positiveInt.optional(),
      // `transaction` when DATABASE_URL is a pooler in transaction mode (PgBouncer's
      // pool_mode = transaction): nothing then relies on a session outliving its transaction
      // (lib/db/pooler). `session` for PostgreSQL itself, RDS Proxy or a pooler in session mode.
      DATABASE_POOL_MODE: z.enum(['session', 'transaction']).default('session'),
      LICENSE_SERVER_URL: z.string().url('expected an https:// URL').optional(),
      LICENSE_SERVER_CA_FILE: z.string().min(1).optional(),
      // The EFS mount on Lambda, a named volume in the container, ./license-data locally.
      LICENSE_DATA_DIR: z
        .string()
        .min(1)
        .default(lambda ? '/mnt/license-data' : 'license-data'),
      LICENSE_ENFORCEMENT: z.enum(['warn', 'strict']).default('warn'),
      // Startup activation: used once at cold start, then removed from the environment.
      LICENSE_KEY: z.string().min(1).optional(),
      LICENSE_EMAIL: z.string().min(1).optional(),
    })
    .refine((s) => !s.OIDC_ISSUER || (s.OIDC_CLIENT_ID && s.OIDC_REDIRECT_URI), {
      path: ['OIDC_ISSUER'],
      message: 'single sign-on needs OIDC_CLIENT_ID and OIDC_REDIRECT_URI too',
    })
    .refine((s) => !s.SSO_ONLY || s.OIDC_ISSUER, {
      path: ['SSO_ONLY'],
      message: 'SSO_ONLY needs single sign-on set up (OIDC_ISSUER)',
    })
    .refine((s) => s.DB_PROCESS_CONNECTIONS > s.DB_POOL_MAX, {
      path: ['DB_PROCESS_CONNECTIONS'],
      message:
        "must be more than DB_POOL_MAX: the service's own pool takes DB_POOL_MAX of them, the schemas' sessions the rest",
    })
    .refine((s) => !lambda || s.QUERY_TIMEOUT_MS <= LAMBDA_QUERY_TIMEOUT_CEILING_MS, {
      path: ['QUERY_TIMEOUT_MS'],
      message: `must be at most ${LAMBDA_QUERY_TIMEOUT_CEILING_MS} on Lambda (API Gateway stops at 30 s)`,
    });

export const resultLimits = (config: Config) => ({
  maxRows: config.QUERY_MAX_ROWS,
  maxBytes: config.QUERY_MAX_BYTES,
});

export type Config = Omit<z.infer<ReturnType<typeof settingsSchema>>, 'DB_CONNECT_TIMEOUT_MS'> & {
  DB_CONNECT_TIMEOUT_MS: number;
  /** On AWS Lambda, where a container serves one request at a time (not the local host). */
  lambda: boolean;
};

/**
 * DB_CONNECT_TIMEOUT_MS when unset: 5 s to PostgreSQL itself, 15 s through a pooler in transaction
 * mode; on Lambda 5 s whatever the mode, within API Gateway's 30 s with the statement's 25.
 */
export const connectTimeoutMs = (poolMode: 'session' | 'transaction', lambda: boolean) =>
  poolMode === 'transaction' && !lambda ? 15_000 : 5_000;

/** Every setting the service reads (the container must pass each one through). */
export const SETTING_NAMES = Object.keys(settingsSchema(false).shape);

/** DATABASE_PASSWORD folded into DATABASE_URL, so every connection sees one complete URL. */
function withDatabasePassword<T extends { DATABASE_URL: string; DATABASE_PASSWORD?: string }>(
  settings: T,
): T {
  if (!settings.DATABASE_PASSWORD) return settings;
  const url = new URL(settings.DATABASE_URL);
  url.password = encodeURIComponent(settings.DATABASE_PASSWORD);
  return { ...settings, DATABASE_URL: url.toString() };
}

/** Validates settings and names every missing or malformed one in a single line. */
export function parseConfig(given: Env): Config {
  // An empty variable (docker compose's `${X:-}`) means unset.
  const env = Object.fromEntries(Object.entries(given).filter(([, value]) => value !== ''));
  const lambda = isLambda(env);
  const result = settingsSchema(lambda, defaultSslMode(env)).safeParse(env);
  if (result.success) {
    const settings = withDatabasePassword(result.data);
    const { DB_CONNECT_TIMEOUT_MS = connectTimeoutMs(settings.DATABASE_POOL_MODE, lambda) } = settings;
    return { ...settings, DB_CONNECT_TIMEOUT_MS, lambda };
  }

  const missing: string[] = [];
  const invalid: string[] = [];
  for (const issue of result.error.issues) {
    const name = String(issue.path[0]);
    // A rule across settings (a refinement) fails a setting given or defaulted: say why, either way.
    if ((env[name] === undefined || env[name] === '') && issue.code !== 'custom') missing.push(name);
    else invalid.push(`${name} (${issue.message})`);
  }
  const parts = [
    missing.length > 0 ? `missing settings: ${missing.join(', ')}` : '',
    invalid.length > 0 ? `invalid settings: ${invalid.join(', ')}` : '',
  ];
  throw new ConfigError(parts.filter(Boolean).join('; '));
}

/** Reads secret settings from SSM (decrypted); parameters that do not exist are left out. */
export async function readSsmSecrets(
  prefix: string,
  ssm?: SSMClient,
  names: readonly string[] = SECRET_SETTINGS,
): Promise<Env> {
  // Loaded only when used: most of the bundle's weight, and not needed off Lambda.
  const { GetParametersCommand, SSMClient } = await import('@aws-sdk/client-ssm');
  const client = ssm ?? new SSMClient({});
  // Trailing slashes off by hand: `/\/+$/` searches each run of slashes from every slash in it.
  let end = prefix.length;
  while (end > 0 && prefix[end - 1] === '/') end--;
  const base = prefix.slice(0, end);
  const { Parameters = [] } = await client.send(
    new GetParametersCommand({
      Names: names.map((name) => `${base}/${name}`),
      WithDecryption: true,
    }),
  );
  const secrets: Env = {};
  for (const parameter of Parameters) {
    const name = parameter.Name?.slice(base.length + 1);
    if (name) secrets[name] = parameter.Value;
  }
  return secrets;
}

/**
 * The environment completed on Lambda with `names` from SSM under `prefix` (never under
 * serverless-offline, which passes serverless.yml's environment on); explicit env wins. The
 * license server reads its secrets the same way.
 */
export async function withSsmSecrets(
  env: Env,
  prefix: string | undefined,
  names: readonly string[],
  ssm?: SSMClient,
): Promise<Env> {
  const fromSsm = prefix && isLambda(env) ? await readSsmSecrets(prefix, ssm, names) : {};
  const defined = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined));
  return { ...fromSsm, ...defined };
}

/** Settings from the environment, completed on Lambda from SSM under SSM_PREFIX. */
export async function loadConfig(env: Env = process.env, ssm?: SSMClient): Promise<Config> {
  return parseConfig(
    await withSsmSecrets(env, env.SSM_PREFIX, [...SECRET_SETTINGS, ...OPTIONAL_SECRET_SETTINGS], ssm),
  );
}

let loaded: Promise<Config> | undefined;

/** The process's configuration, read once. A failed read is retried on the next call. */
export function getConfig(): Promise<Config> {
  loaded ??= loadConfig().catch((error: unknown) => {
    loaded = undefined;
    throw error;
  });
  return loaded;
}

/** For tests that change the environment between cases. */
export function resetConfig(): void {
  loaded = undefined;
}
