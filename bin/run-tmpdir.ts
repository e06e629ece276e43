import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Points TMPDIR, for this process and every child it starts from now on, at a new directory of
 * the run's own, and returns what removes it and puts TMPDIR back: the temporary files of a test
 * or benchmark run (its own, the embedded PostgreSQL's, those of the tools it starts) go with it,
 * however many there were. Traversable by the `postgres` user the embedded server runs as when we
 * are root.
 */
export function runTmpdir(prefix: string): () => void {
  const before = process.env.TMPDIR;
  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  chmodSync(dir, 0o711);
  process.env.TMPDIR = dir;
  return () => {
    if (before === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = before;
    rmSync(dir, { recursive: true, force: true });
  };
}
