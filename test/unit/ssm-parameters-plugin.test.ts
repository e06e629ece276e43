import { readFileSync } from 'node:fs';
import { GetParametersCommand, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { parse } from 'yaml';
import { SECRET_SETTINGS } from '#lib/config';
import { LICENSE_SERVER_SECRETS } from '../../license-server/lib/config';

const RequiredSsmParameters = require('../../deploy/ssm-parameters-plugin.cjs');

class ServerlessError extends Error {}

/** What the plugin sees of the Serverless Framework, as serverless.yml's custom block declares. */
function fakeServerless(names: readonly string[]) {
  return {
    service: { custom: { requiredSsmParameters: { prefix: '/dbadmin/prod', names } } },
    classes: { Error: ServerlessError },
    getProvider: () => ({ getAwsSdkV3Config: async () => ({ region: 'eu-central-1' }) }),
  };
}

const secure = (name: string, value = 'some value') => ({
  Name: `/dbadmin/prod/${name}`,
  Value: value,
  Type: 'SecureString' as const,
});

describe('the SSM parameters check before a deploy', () => {
  const ssm = mockClient(SSMClient);
  afterEach(() => ssm.reset());

  const check = (names: readonly string[]) =>
    new RequiredSsmParameters(fakeServerless(names)).hooks['before:deploy:deploy']();

  it('lets the deploy go on when every parameter holds a SecureString value', async () => {
    ssm.on(GetParametersCommand).resolves({ Parameters: SECRET_SETTINGS.map((name) => secure(name)) });

    await expect(check(SECRET_SETTINGS)).resolves.toBeUndefined();
    expect(ssm.commandCalls(GetParametersCommand)[0]?.args[0].input).toEqual({
      Names: SECRET_SETTINGS.map((name) => `/dbadmin/prod/${name}`),
      WithDecryption: true,
    });
  });

  it('stops the deploy with one line naming the missing and empty ones', async () => {
    ssm.on(GetParametersCommand).resolves({
      Parameters: [secure('DATABASE_URL'), secure('AUTH_USER', '  ')],
      InvalidParameters: ['/dbadmin/prod/AUTH_PASS', '/dbadmin/prod/DBADMIN_SECRET'],
    });

    const failure = check(SECRET_SETTINGS);

    await expect(failure).rejects.toThrow(ServerlessError);
    await expect(failure).rejects.toThrow(
      /^SSM parameters under \/dbadmin\/prod not ready: missing or empty: AUTH_USER, AUTH_PASS, DBADMIN_SECRET \(/,
    );
  });

  it('stops the deploy when a secret is a plain String, not a SecureString', async () => {
    ssm.on(GetParametersCommand).resolves({
      Parameters: [
        ...SECRET_SETTINGS.slice(1).map((name) => secure(name)),
        { ...secure('DATABASE_URL'), Type: 'String' },
      ],
    });

    await expect(check(SECRET_SETTINGS)).rejects.toThrow(/not SecureString: DATABASE_URL/);
  });

  it('asks for at most ten names at a time, as GetParameters allows', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `SETTING_${i}`);
    ssm.on(GetParametersCommand).callsFake(({ Names }: { Names: string[] }) => ({
      Parameters: Names.map((name) => ({ Name: name, Value: 'v', Type: 'SecureString' })),
    }));

    await check(names);

    expect(ssm.commandCalls(GetParametersCommand).map((call) => call.args[0].input.Names?.length)).toEqual([
      10, 2,
    ]);
  });
});

describe('the deploy configurations', () => {
  /** A Serverless variable as written in serverless.yml, `${...}`. */
  const variable = (expression: string) => `\${${expression}}`;
  // CloudFormation's !Sub, read as the string it substitutes.
  const read = (path: string) =>
    parse(readFileSync(path, 'utf8'), { customTags: [{ tag: '!Sub', resolve: (value: string) => value }] });
  const service = read('serverless.yml');
  const licenseServer = read('license-server/serverless.yml');

  it('check the service’s SSM parameters under the prefix its functions read', () => {
    expect(service.plugins).toContain('./deploy/ssm-parameters-plugin.cjs');
    expect(service.custom.requiredSsmParameters).toEqual({
      prefix: `/dbadmin/${variable('sls:stage')}`,
      names: [...SECRET_SETTINGS],
    });
    expect(service.provider.environment.SSM_PREFIX).toBe(
      variable('self:custom.requiredSsmParameters.prefix'),
    );
  });

  it('keep the license server’s secrets in SSM, out of its function configuration', () => {
    const environment = licenseServer.provider.environment;

    expect(licenseServer.plugins).toContain('./ssm-parameters-plugin.cjs');
    expect(licenseServer.custom.requiredSsmParameters).toEqual({
      prefix: `/dbadmin-license-server/${variable('sls:stage')}`,
      names: [...LICENSE_SERVER_SECRETS],
    });
    expect(environment.LICENSE_SERVER_SSM_PREFIX).toBe(variable('self:custom.requiredSsmParameters.prefix'));
    for (const name of LICENSE_SERVER_SECRETS) expect(environment).not.toHaveProperty(name);
    expect(JSON.stringify(licenseServer.provider.iam)).toContain(
      `parameter/dbadmin-license-server/${variable('sls:stage')}/*`,
    );
  });

  it('trust the RDS CAs of the Lambda runtime in both', () => {
    for (const config of [service, licenseServer])
      expect(config.provider.environment.NODE_EXTRA_CA_CERTS).toBe('/var/runtime/ca-cert.pem');
  });
});
