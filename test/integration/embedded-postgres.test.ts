import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { postgresAccount, reachableBy } from '../../bin/postgres-reach';

jest.setTimeout(120_000);

describe('where the postgres user can reach', () => {
  const stranger = { uid: 2_000_000_001, gid: 2_000_000_001 };

  it('is decided by execute permission on every directory down to the path', () => {
    const top = mkdtempSync(join(tmpdir(), 'dbadmin-reach-'));
    const inner = join(top, 'a', 'b');
    mkdirSync(inner, { recursive: true });
    chmodSync(top, 0o755);

    expect(reachableBy(join(inner, 'not-yet'), stranger)).toBe(true);
    chmodSync(top, 0o700); // a private home, like /root or mktemp -d
    expect(reachableBy(join(inner, 'not-yet'), stranger)).toBe(false);
    chmodSync(top, 0o711);
    expect(reachableBy(inner, stranger)).toBe(true);
  });
});

const asRootWithPostgres = process.getuid?.() === 0 && postgresAccount() !== undefined;

(asRootWithPostgres ? describe : describe.skip)('as root, in a private directory', () => {
  it('starts PostgreSQL from a copy of the binaries with its data where the postgres user can reach', async () => {
    const home = mkdtempSync(join(tmpdir(), 'dbadmin-private-home-')); // mode 700, like /root
    const { stdout } = await promisify(execFile)(process.execPath, [
      require.resolve('tsx/cli'),
      'test/support/private-postgres.ts',
      join(home, '.data', 'postgres'),
    ]);

    expect(stdout).toMatch(/the postgres user cannot reach .*private-home.*; PostgreSQL keeps its data in /);
    expect(JSON.parse(stdout.slice(stdout.indexOf('{'))).who).toBe('dbadmin');
  });
});
