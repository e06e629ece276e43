'use strict';
// Stops `serverless deploy` before anything is uploaded when a setting the functions read from SSM
// Parameter Store at run time is missing, empty or not a SecureString: otherwise the deploy would
// succeed and every cold start fail. serverless.yml names them under custom.requiredSsmParameters
// ({prefix, names}). `serverless package` checks nothing, so it still works offline without
// credentials.
const { GetParametersCommand, SSMClient } = require('@aws-sdk/client-ssm');

/** GetParameters takes at most ten names a call. */
const BATCH = 10;

/** The parameters under `base` named `names`, by name (decrypted, so that an empty value shows). */
async function readParameters(ssm, base, names) {
  const found = new Map();
  for (let start = 0; start < names.length; start += BATCH) {
    const batch = names.slice(start, start + BATCH).map((name) => `${base}/${name}`);
    const { Parameters = [] } = await ssm.send(
      new GetParametersCommand({ Names: batch, WithDecryption: true }),
    );
    for (const parameter of Parameters) found.set(parameter.Name.slice(base.length + 1), parameter);
  }
  return found;
}

/** One line naming what is wrong, or undefined when every parameter is ready. */
async function problems(ssm, prefix, names) {
  const base = prefix.replace(/\/+$/, '');
  const found = await readParameters(ssm, base, names);
  const missing = names.filter((name) => !found.get(name)?.Value?.trim());
  const plain = names.filter((name) => !missing.includes(name) && found.get(name).Type !== 'SecureString');
  if (missing.length === 0 && plain.length === 0) return undefined;
  const parts = [
    missing.length > 0 ? `missing or empty: ${missing.join(', ')}` : '',
    plain.length > 0 ? `not SecureString: ${plain.join(', ')}` : '',
  ];
  return `SSM parameters under ${base} not ready: ${parts.filter(Boolean).join('; ')} (aws ssm put-parameter --type SecureString --overwrite --name ${base}/NAME --value ...)`;
}

class RequiredSsmParameters {
  constructor(serverless) {
    this.serverless = serverless;
    // After packaging (the deploy command packages first), before CloudFormation is touched.
    this.hooks = { 'before:deploy:deploy': () => this.check() };
  }

  async check() {
    const { prefix, names } = this.serverless.service.custom.requiredSsmParameters;
    // The deploy's own region and credentials (--region, --aws-profile).
    const config = await this.serverless.getProvider('aws').getAwsSdkV3Config();
    const problem = await problems(new SSMClient(config), prefix, names);
    if (problem) throw new this.serverless.classes.Error(problem);
  }
}

module.exports = RequiredSsmParameters;
