'use strict';
// Puts the functions in a VPC and mounts the license-data EFS access point when the deploy
// environment names them. A plugin rather than variables, so that `serverless package` still
// works offline with none of them set: then the functions run outside a VPC and recover their
// machine id from the database on every cold start.
const list = (value) =>
  (value ?? '')
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);

class LambdaNetwork {
  constructor(serverless) {
    this.serverless = serverless;
    this.hooks = { 'before:package:initialize': () => this.apply(process.env) };
  }

  apply(env) {
    const service = this.serverless.service;
    const subnetIds = list(env.LAMBDA_SUBNET_IDS);
    const securityGroupIds = list(env.LAMBDA_SECURITY_GROUP_IDS);
    if (subnetIds.length > 0 && securityGroupIds.length > 0) {
      service.provider.vpc = { subnetIds, securityGroupIds };
    }
    const arn = env.LICENSE_EFS_ACCESS_POINT_ARN;
    if (!arn) return;
    if (!service.provider.vpc)
      throw new Error(
        'LICENSE_EFS_ACCESS_POINT_ARN needs LAMBDA_SUBNET_IDS and LAMBDA_SECURITY_GROUP_IDS (EFS is reached through a VPC)',
      );
    for (const fn of Object.values(service.functions)) {
      fn.fileSystemConfig = { arn, localMountPath: '/mnt/license-data' };
    }
  }
}

module.exports = LambdaNetwork;
