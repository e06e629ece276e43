'use strict';
// Builds the web console (bin/build-console.ts -> console/dist/bundle.json) before serverless
// packages the functions or serverless-offline starts them: the `console` function embeds it.
class ConsoleBuild {
  constructor(serverless) {
    this.serverless = serverless;
    const build = () => this.build();
    this.hooks = {
      'before:package:createDeploymentArtifacts': build,
      'before:deploy:function:packageFunction': build,
      'before:offline:start': build,
      'before:offline:start:init': build,
    };
  }

  async build() {
    if (this.built) return;
    this.built = true;
    require('tsx/cjs/api').register();
    const { buildConsole } = require('../bin/build-console.ts');
    await buildConsole();
  }
}

module.exports = ConsoleBuild;
