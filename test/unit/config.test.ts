import { GetParametersCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { parse } from 'pg-connection-string';
import { loadConfig, parseConfig } from '#lib/config';

const complete = {
  DATABASE_URL: 'postgres://u:p@localhost:5432/db',
  AUTH_USER: 'admin',
  AUTH_PASS: 'secret',
  DBADMIN_SECRET: 's'.repeat(32),
};

describe('parseConfig', () => {
  it('fills in defaults for the local host', () => {
    const config = parseConfig(complete);

    expect(config).toMatchObject({
      NODE_ENV: 'development',
      QUERY_TIMEOUT_MS: 30_000,
      DB_POOL_MAX: 10,
      lambda: false,
    });
  });

  it('waits longer for a connection through a pooler in transaction mode, unless told', () => {
    expect(parseConfig(complete).DB_CONNECT_TIMEOUT_MS).toBe(5_000);
    expect(parseConfig({ ...complete, DATABASE_POOL_MODE: 'transaction' }).DB_CONNECT_TIMEOUT_MS).toBe(
      15_000,
    );
    const onLambda = {
      ...complete,
      DATABASE_POOL_MODE: 'transaction',
      AWS_LAMBDA_FUNCTION_NAME: 'dbadmin-dev-query',
    };
    expect(parseConfig(onLambda).DB_CONNECT_TIMEOUT_MS).toBe(5_000);
    expect(
      parseConfig({ ...complete, DATABASE_POOL_MODE: 'transaction', DB_CONNECT_TIMEOUT_MS: '2000' })
        .DB_CONNECT_TIMEOUT_MS,
    ).toBe(2_000);
  });

  it('uses a small pool and a query timeout below API Gateway’s 30 s on Lambda', () => {
    const config = parseConfig({ ...complete, AWS_LAMBDA_FUNCTION_NAME: 'dbadmin-dev-schemas' });

    expect(config).toMatchObject({ QUERY_TIMEOUT_MS: 25_000, DB_POOL_MAX: 2, lambda: true });
  });

  it('says why a defaulted setting breaks a rule between settings, not that it is missing', () => {
    expect(() => parseConfig({ ...complete, DB_POOL_MAX: '60' })).toThrow(
      'invalid settings: DB_PROCESS_CONNECTIONS (must be more than DB_POOL_MAX',
    );
  });

  it('runs in production mode on Lambda unless NODE_ENV says otherwise', () => {
    const lambda = { ...complete, AWS_LAMBDA_FUNCTION_NAME: 'dbadmin-dev-schemas' };

    expect(parseConfig(lambda).NODE_ENV).toBe('production');
    expect(parseConfig({ ...lambda, NODE_ENV: 'development' }).NODE_ENV).toBe('development');
  });

  it('treats serverless-offline as the local host, not Lambda: one process serves every request', () => {
    const config = parseConfig({ ...complete, AWS_LAMBDA_FUNCTION_NAME: 'f', IS_OFFLINE: 'true' });

    expect(config.lambda).toBe(false);
    expect(config.DB_POOL_MAX).toBe(10);
    expect(parseConfig({ ...complete, AWS_LAMBDA_FUNCTION_NAME: 'f' }).DB_POOL_MAX).toBe(2);
  });

  it('treats empty variables as unset, as docker compose passes them', () => {
    const config = parseConfig({
      ...complete,
      LICENSE_SERVER_URL: '',
      LICENSE_KEY: '',
      QUERY_TIMEOUT_MS: '',
    });

    expect(config.LICENSE_SERVER_URL).toBeUndefined();
    expect(config.LICENSE_KEY).toBeUndefined();
    expect(config.QUERY_TIMEOUT_MS).toBe(30_000);
  });

  it('takes DATABASE_PASSWORD apart from the URL, whatever characters it holds', () => {
    const password = 'p@ss/w#rd%20:? ü';

    const config = parseConfig({
      ...complete,
      DATABASE_URL: 'postgres://dbadmin@db:5432/dbadmin',
      DATABASE_PASSWORD: password,
    });

    expect(parse(config.DATABASE_URL)).toMatchObject({
      user: 'dbadmin',
      password,
      host: 'db',
      database: 'dbadmin',
    });
  });

  it('refuses session options in DATABASE_URL, which would outrank the pinned search path', () => {
    const url = 'postgres://u:p@localhost:5432/db?options=-c%20search_path%3Dpublic';

    expect(() => parseConfig({ ...complete, DATABASE_URL: url })).toThrow(
      /DATABASE_URL \(options= is not supported/,
    );
  });

  it('reads TRUSTED_PROXIES as addresses and ranges, and refuses anything else', () => {
    expect(
      parseConfig({ ...complete, TRUSTED_PROXIES: '172.31.250.250, 10.0.0.0/8,::1' }).TRUSTED_PROXIES,
    ).toEqual(['172.31.250.250', '10.0.0.0/8', '::1']);
    expect(parseConfig(complete).TRUSTED_PROXIES).toEqual([]);
    expect(() => parseConfig({ ...complete, TRUSTED_PROXIES: 'caddy' })).toThrow(/TRUSTED_PROXIES/);
  });

  it('reads OIDC_ROLE_MAP as groups mapped to a role and, after a colon, schemas, first match first', () => {
    const sso = {
      ...complete,
      OIDC_ISSUER: 'https://idp.example.com/realms/acme',
      OIDC_CLIENT_ID: 'dbadmin',
      OIDC_REDIRECT_URI: 'https://admin.example.com/api/sso/callback',
    };
    expect(
      parseConfig({ ...sso, OIDC_ROLE_MAP: 'dbadmin owners=owner;\n support-acme = analyst:acme, acme_eu ;' })
        .OIDC_ROLE_MAP,
    ).toEqual([
      { group: 'dbadmin owners', role: 'owner', schemas: null },
      { group: 'support-acme', role: 'analyst', schemas: ['acme', 'acme_eu'] },
    ]);
    expect(() => parseConfig({ ...sso, OIDC_ROLE_MAP: 'ops=root' })).toThrow(
      /OIDC_ROLE_MAP \("ops=root": the role is one of owner, admin, developer, analyst\)/,
    );
    expect(() => parseConfig({ ...sso, OIDC_ROLE_MAP: 'ops=admin:' })).toThrow(
      /after the colon, schema names/,
    );
    expect(() => parseConfig({ ...sso, OIDC_ISSUER: 'http://idp.example.com' })).toThrow(/OIDC_ISSUER/);
    expect(() => parseConfig({ ...complete, OIDC_ISSUER: sso.OIDC_ISSUER })).toThrow(
      /OIDC_ISSUER \(single sign-on needs OIDC_CLIENT_ID and OIDC_REDIRECT_URI too\)/,
    );
    expect(() => parseConfig({ ...complete, SSO_ONLY: 'true' })).toThrow(/SSO_ONLY \(SSO_ONLY needs/);
    for (const issuer of [
      'https://login.microsoftonline.com/common/v2.0',
      'https://login.microsoftonline.com/organizations',
    ])
      expect(() => parseConfig({ ...sso, OIDC_ISSUER: issuer })).toThrow(
        /OIDC_ISSUER \(names every organisation/,
      );
    expect(
      parseConfig({
        ...sso,
        OIDC_ISSUER: 'https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0',
      }).OIDC_ISSUER,
    ).toBeTruthy();
    expect(() => parseConfig({ ...sso, OIDC_REDIRECT_URI: `${sso.OIDC_REDIRECT_URI}?next=x` })).toThrow(
      /no query/,
    );
    expect(() =>
      parseConfig({ ...sso, OIDC_REDIRECT_URI: 'http://admin.example.com/api/sso/callback' }),
    ).toThrow(/must be https/);
    expect(
      parseConfig({ ...sso, OIDC_REDIRECT_URI: 'http://localhost:3000/api/sso/callback' }).OIDC_REDIRECT_URI,
    ).toBe('http://localhost:3000/api/sso/callback');
    expect(parseConfig(complete)).toMatchObject({
      SSO_ONLY: false,
      OIDC_ROLE_MAP: [],
      OIDC_GROUPS_CLAIM: 'groups',
    });
  });

  it('names every missing setting in one line', () => {
    expect(() => parseConfig({ AUTH_USER: 'admin' })).toThrow(
      'missing settings: DATABASE_URL, AUTH_PASS, DBADMIN_SECRET',
    );
  });

  it('names malformed settings with what was expected', () => {
    expect(() => parseConfig({ ...complete, DATABASE_URL: 'mysql://x', QUERY_TIMEOUT_MS: '-5' })).toThrow(
      /invalid settings: DATABASE_URL \(expected a postgres:\/\/ or postgresql:\/\/ URL\), QUERY_TIMEOUT_MS/,
    );
  });

  it('refuses a query timeout that API Gateway would cut off on Lambda', () => {
    expect(() =>
      parseConfig({ ...complete, AWS_LAMBDA_FUNCTION_NAME: 'f', QUERY_TIMEOUT_MS: '30000' }),
    ).toThrow(/QUERY_TIMEOUT_MS \(must be at most 29000 on Lambda/);
  });
});

describe('loadConfig with SSM_PREFIX', () => {
  const ssm = mockClient(SSMClient);
  afterEach(() => ssm.reset());

  const everyParameter = [
    { Name: '/dbadmin/prod/DATABASE_URL', Value: complete.DATABASE_URL },
    { Name: '/dbadmin/prod/AUTH_USER', Value: 'ssm-admin' },
    { Name: '/dbadmin/prod/AUTH_PASS', Value: 'ssm-secret' },
    { Name: '/dbadmin/prod/DBADMIN_SECRET', Value: 'x'.repeat(40) },
  ];
  const lambdaEnv = { AWS_LAMBDA_FUNCTION_NAME: 'dbadmin-prod-schemas', SSM_PREFIX: '/dbadmin/prod/' };

  it('reads the secrets from Parameter Store, decrypted, on Lambda', async () => {
    ssm.on(GetParametersCommand).resolves({
      Parameters: everyParameter,
    });

    const config = await loadConfig(lambdaEnv, new SSMClient({}));

    expect(config).toMatchObject({
      AUTH_USER: 'ssm-admin',
      AUTH_PASS: 'ssm-secret',
      // On Lambda a URL without sslmode is verified in full (test/unit/database-tls.test.ts).
      DATABASE_URL: `${complete.DATABASE_URL}?sslmode=verify-full`,
    });
    expect(ssm.commandCalls(GetParametersCommand)[0]?.args[0].input).toEqual({
      Names: [
        '/dbadmin/prod/DATABASE_URL',
        '/dbadmin/prod/AUTH_USER',
        '/dbadmin/prod/AUTH_PASS',
        '/dbadmin/prod/DBADMIN_SECRET',
        '/dbadmin/prod/METRICS_TOKEN',
        '/dbadmin/prod/OIDC_CLIENT_SECRET',
      ],
      WithDecryption: true,
    });
  });

  it('lets an explicit environment variable win over the parameter', async () => {
    ssm.on(GetParametersCommand).resolves({
      Parameters: everyParameter,
    });

    const config = await loadConfig({ ...lambdaEnv, AUTH_USER: 'env-admin' }, new SSMClient({}));

    expect(config.AUTH_USER).toBe('env-admin');
  });

  it('names the settings neither SSM nor the environment has', async () => {
    ssm.on(GetParametersCommand).resolves({
      Parameters: [{ Name: '/dbadmin/prod/DATABASE_URL', Value: complete.DATABASE_URL }],
      InvalidParameters: [
        '/dbadmin/prod/AUTH_USER',
        '/dbadmin/prod/AUTH_PASS',
        '/dbadmin/prod/DBADMIN_SECRET',
        '/dbadmin/prod/METRICS_TOKEN',
      ],
    });

    await expect(loadConfig(lambdaEnv, new SSMClient({}))).rejects.toThrow(
      'missing settings: AUTH_USER, AUTH_PASS, DBADMIN_SECRET',
    );
  });

  it('does not call SSM under serverless-offline', async () => {
    const config = await loadConfig({ ...lambdaEnv, ...complete, IS_OFFLINE: 'true' }, new SSMClient({}));

    expect(config.AUTH_USER).toBe('admin');
    expect(ssm.calls()).toHaveLength(0);
  });
});
