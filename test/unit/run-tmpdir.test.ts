import { existsSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { runTmpdir } from '../../bin/run-tmpdir';

describe("a run's temporary directory", () => {
  const before = process.env.TMPDIR;
  afterEach(() => {
    process.env.TMPDIR = before;
  });

  it('becomes TMPDIR, for the children started after it, and goes with everything in it', () => {
    const remove = runTmpdir('dbadmin-run-test');
    const dir = process.env.TMPDIR as string;
    const inside = mkdtempSync(join(dir, 'made-by-the-run-'));
    writeFileSync(join(inside, 'file'), 'data');

    expect(dirname(dir)).toBe(tmpdir());
    expect(statSync(dir).mode & 0o777).toBe(0o711);
    remove();
    expect(existsSync(dir)).toBe(false);
  });
});
