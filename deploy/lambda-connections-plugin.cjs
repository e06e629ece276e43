'use strict';
// Stops `serverless package` (and so `serverless deploy`, which packages first) when the functions
// could together hold more database connections than the database has for them: a function that
// reaches the database without a reservedConcurrency, or Σ reservedConcurrency × DB_PROCESS_CONNECTIONS
// past DATABASE_MAX_CONNECTIONS (bin/lambda-connections.ts). Prints the sum by function either way.
// A hook of packaging itself, so no way of starting it (npm run package, npx serverless package,
// serverless deploy) skips the check; `deploy --package <dir>` deploys what a checked packaging
// made. It runs after DBADMIN_RESERVED_CONCURRENCY is applied (deploy/concurrency-plugin.cjs,
// before:package:initialize) and before anything is bundled.

/** The sum is TypeScript beside the service's settings: tsx loads it (a dev dependency, as the bundler is). */
function loadCount() {
  const { require: requireTs } = require('tsx/cjs/api');
  return requireTs('../bin/lambda-connections.ts', __filename);
}

class LambdaConnections {
  constructor(serverless, _options, utils = {}) {
    this.serverless = serverless;
    this.print = utils.log ? (line) => utils.log.notice(line) : (line) => serverless.cli.log(line);
    this.hooks = { 'after:package:initialize': () => this.check(loadCount()) };
  }

  /** `counting`: bin/lambda-connections's exports. Prints the table; throws the problems as one line. */
  check({ lambdaConnections, connectionsReport }) {
    const counted = lambdaConnections(this.serverless.service, process.env);
    for (const line of connectionsReport(counted)) this.print(line);
    if (counted.problems.length > 0)
      throw new this.serverless.classes.Error(`dbadmin: ${counted.problems.join('; ')}`);
  }
}

module.exports = LambdaConnections;
