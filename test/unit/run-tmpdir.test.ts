import { execFileSync } from 'node:child_process';

/**
 * In a process of its own: Jest gives a test a copy of process.env, which neither os.tmpdir() nor
 * the children a test starts would see.
 */
const PROBE = `
  const { execFileSync } = require('node:child_process');
  const { existsSync, mkdtempSync, statSync } = require('node:fs');
  const { tmpdir } = require('node:os');
  const { dirname, join } = require('node:path');
  const { runTmpdir } = require('./bin/run-tmpdir.ts');

  const outside = tmpdir();
  const remove = runTmpdir('dbadmin-run-test');
  const dir = tmpdir();
  const made = mkdtempSync(join(tmpdir(), 'made-by-the-run-'));
  const childSees = execFileSync(process.execPath, ['-p', 'require("node:os").tmpdir()'], { encoding: 'utf8' }).trim();
  const mode = statSync(dir).mode & 0o777;
  remove();
  console.log(JSON.stringify({
    under: dirname(dir) === outside, madeInside: dirname(made) === dir, childSees: childSees === dir,
    mode: mode.toString(8), gone: !existsSync(dir), restored: tmpdir() === outside,
  }));
`;

describe("a run's temporary directory", () => {
  it('is tmpdir() for the process and its children until removed, then gone with all in it', () => {
    const out = execFileSync(process.execPath, ['--import', 'tsx', '-e', PROBE], {
      encoding: 'utf8',
    });

    expect(JSON.parse(out)).toEqual({
      under: true,
      madeInside: true,
      childSees: true,
      mode: '711',
      gone: true,
      restored: true,
    });
  });
});
