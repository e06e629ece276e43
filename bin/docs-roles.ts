import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { rolesTable } from '../lib/access';

/**
 * npm run docs:roles: writes the roles table (lib/access, the one definition the request path
 * enforces) into the README between its markers; test/unit/access.test.ts fails while they differ.
 */
const README = join(__dirname, '..', 'README.md');
const START = '<!-- roles:start (npm run docs:roles) -->';
const END = '<!-- roles:end -->';

const text = readFileSync(README, 'utf8');
const from = text.indexOf(START);
const to = text.indexOf(END);
if (from < 0 || to < from) throw new Error(`README.md lacks the markers ${START} ... ${END}`);
writeFileSync(README, `${text.slice(0, from + START.length)}\n${rolesTable()}\n${text.slice(to)}`);
console.log('README.md: roles table written');
