#!/usr/bin/env node
// Entry point of the `activate-license` command: runs the TypeScript CLI through tsx.
require('tsx/cjs/api').register();
const { run } = require('./activate-license.ts');

run(process.argv.slice(2), process.env, { out: console.log, err: console.error }).then((code) => {
  process.exitCode = code;
});
