import { GetParametersCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { loadLicenseServerConfig, parseLicenseServerConfig } from '../../license-server/lib/config';

const databaseUrl = 'postgres://licenses:pass@licenses.example.com:5432/licenses';
const signingKey = 'MC4CAQAwBQYDK2VwBCIEIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
const onLambda = {
  AWS_LAMBDA_FUNCTION_NAME: 'dbadmin-license-server-prod-license',
  LICENSE_SERVER_SSM_PREFIX: '/dbadmin-license-server/prod',
};

describe('the license server’s settings', () => {
  const ssm = mockClient(SSMClient);
  afterEach(() => ssm.reset());

  it('reads its database URL and signing key from SSM on Lambda, decrypted', async () => {
    ssm.on(GetParametersCommand).resolves({
      Parameters: [
        { Name: '/dbadmin-license-server/prod/LICENSE_SERVER_DATABASE_URL', Value: databaseUrl },
        { Name: '/dbadmin-license-server/prod/LICENSE_SERVER_SIGNING_KEY', Value: signingKey },
      ],
    });

    const config = await loadLicenseServerConfig(onLambda, new SSMClient({}));

    expect(ssm.commandCalls(GetParametersCommand)[0]?.args[0].input).toEqual({
      Names: [
        '/dbadmin-license-server/prod/LICENSE_SERVER_DATABASE_URL',
        '/dbadmin-license-server/prod/LICENSE_SERVER_SIGNING_KEY',
      ],
      WithDecryption: true,
    });
    expect(config.LICENSE_SERVER_SIGNING_KEY).toBe(signingKey);
    // On Lambda its database is verified over TLS too (RDS); the rule is the service's.
    expect(config.LICENSE_SERVER_DATABASE_URL).toBe(`${databaseUrl}?sslmode=verify-full`);
  });

  it('names the database URL when neither SSM nor the environment has it', async () => {
    ssm.on(GetParametersCommand).resolves({
      Parameters: [],
      InvalidParameters: ['/dbadmin-license-server/prod/LICENSE_SERVER_DATABASE_URL'],
    });

    await expect(loadLicenseServerConfig(onLambda, new SSMClient({}))).rejects.toThrow(
      /LICENSE_SERVER_DATABASE_URL/,
    );
  });

  it('does not call SSM off Lambda (npm run license-server, license-admin)', async () => {
    const config = await loadLicenseServerConfig(
      { ...onLambda, IS_OFFLINE: 'true', LICENSE_SERVER_DATABASE_URL: databaseUrl },
      new SSMClient({}),
    );

    expect(ssm.calls()).toHaveLength(0);
    expect(config.LICENSE_SERVER_DATABASE_URL).toBe(`${databaseUrl}?sslmode=disable`);
  });

  it('refuses a database URL that would skip certificate checks', () => {
    expect(() =>
      parseLicenseServerConfig({ LICENSE_SERVER_DATABASE_URL: `${databaseUrl}?sslmode=no-verify` }),
    ).toThrow(/LICENSE_SERVER_DATABASE_URL \(sslmode=no-verify is not supported/);
  });
});
