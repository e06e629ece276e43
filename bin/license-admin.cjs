#!/usr/bin/env node
// Entry point of the `license-admin` command: runs the TypeScript CLI through tsx.
require('tsx/cjs/api').register();
const { run } = require('./license-admin.ts');

run(process.argv.slice(2), { out: console.log, err: console.error }).then((code) => {
  process.exitCode = code;
});
