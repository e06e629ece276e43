'use strict';
// Reserves Lambda concurrency from DBADMIN_RESERVED_CONCURRENCY when packaging or deploying, so that
// the containers' database connections together stay under the server's max_connections (README:
// Deploying to AWS Lambda sizes it). `10` reserves 10 for every function, `tables=8,query=2` for
// those two only, `query=2,4` 2 for query and 4 for the rest. Unset: nothing is reserved.
const ENTRY = /^(?:([A-Za-z][A-Za-z0-9_-]*)=)?(\d+)$/;

class ReservedConcurrency {
  constructor(serverless) {
    this.serverless = serverless;
    this.hooks = { 'before:package:initialize': () => this.apply(process.env.DBADMIN_RESERVED_CONCURRENCY) };
  }

  apply(setting) {
    if (!setting?.trim()) return;
    const functions = this.serverless.service.functions;
    const { rest, named } = this.parse(setting, Object.keys(functions));
    for (const [name, definition] of Object.entries(functions)) {
      const value = named.get(name) ?? rest;
      if (value !== undefined) definition.reservedConcurrency = value;
    }
  }

  /** `{rest, named}` from the setting; a malformed entry or an unknown function stops packaging. */
  parse(setting, names) {
    const fail = (reason) => {
      throw new this.serverless.classes.Error(`DBADMIN_RESERVED_CONCURRENCY: ${reason}`);
    };
    const named = new Map();
    let rest;
    for (const entry of setting.split(',').map((part) => part.trim())) {
      const match = ENTRY.exec(entry);
      if (!match) fail(`"${entry}" is not a number or function=number`);
      const [, name, count] = match;
      if (name === undefined) rest = Number(count);
      else if (!names.includes(name)) fail(`no function "${name}" (functions: ${names.join(', ')})`);
      else named.set(name, Number(count));
    }
    return { rest, named };
  }
}

module.exports = ReservedConcurrency;
