import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildProduction, type ServiceFunction } from '../../bin/build';
import { freePort } from '../../bin/free-port';

export interface Host {
  base: string;
  output: () => string;
  stop: () => Promise<void>;
  /** The process started: the host's own, or bin/supervise.sh's when `supervised`. */
  pid: number;
}

/**
 * Runs the host's entry point as a user would, and waits for serverless-offline to be ready: the
 * sources under tsx (`npm run dev`), or `prebuilt`, a directory `buildProduction` made, whose
 * bin/start.js is what `npm start` and the container run.
 */
export async function startHost(
  env: NodeJS.ProcessEnv,
  prebuilt?: string,
  {
    cwd,
    supervised = false,
    port: wanted,
  }: {
    /** The port to serve on (one chosen ahead, for a URL another party must know); a free one otherwise. */
    port?: number;
    /** Where it is started from (the repository by default): relative settings resolve against it. */
    cwd?: string;
    /** Under npm start's supervisor (bin/supervise.sh), which starts it again after a crash. */
    supervised?: boolean;
  } = {},
): Promise<Host> {
  const port = wanted ?? (await freePort());
  const entry = prebuilt ? [join(prebuilt, 'bin', 'start.js')] : [require.resolve('tsx/cli'), 'bin/start.ts'];
  const [command, args] = supervised
    ? ['sh', [join(__dirname, '..', '..', 'bin', 'supervise.sh'), process.execPath, ...entry]]
    : [process.execPath, entry];
  const child = spawn(command as string, args as string[], {
    ...(cwd ? { cwd } : {}),
    env: { HOST: '127.0.0.1', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`offline did not start:\n${output}`)), 120_000);
    const watch = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Server ready')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on('data', watch);
    child.stderr?.on('data', watch);
    child.on('exit', (code) => reject(new Error(`offline exited with ${code}:\n${output}`)));
  });
  return {
    base: `http://127.0.0.1:${port}`,
    pid: child.pid as number,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return; // ended by itself
      if (child.pid) process.kill(child.pid, 'SIGTERM');
      await exited;
    },
  };
}

/**
 * The production build run as `npm start` runs it, for the enclosing test file: supervised
 * (bin/supervise.sh), with its own embedded PostgreSQL in a temporary data directory; `functions`
 * are built beside ours.
 */
export function supervisedHost(name: string, functions: Record<string, ServiceFunction> = {}) {
  const built = resolve(`.${name}-build`);
  let host: Host | undefined;
  let dataDir: string | undefined;
  beforeAll(async () => {
    await buildProduction({ dir: built, functions });
    dataDir = mkdtempSync(join(tmpdir(), `dbadmin-${name}-`));
    // Reachable by the postgres user when run as root, so its data stays here (bin/postgres-reach).
    chmodSync(dataDir, 0o755);
    const { DATABASE_URL: _own, ...env } = process.env;
    host = await startHost({ ...env, DBADMIN_DATA_DIR: dataDir }, built, { supervised: true });
  }, 240_000);
  afterAll(async () => {
    await host?.stop();
    rmSync(built, { recursive: true, force: true });
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    get host(): Host {
      if (!host) throw new Error('the host has not started');
      return host;
    },
    get dataDir(): string {
      if (!dataDir) throw new Error('the host has not started');
      return dataDir;
    },
    /** The host's node process: the supervisor's one child. */
    hostPid(): number {
      const pid = this.host.pid;
      return Number(readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/)[0]);
    },
  };
}
