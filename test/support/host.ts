import { spawn } from 'node:child_process';
import { join } from 'node:path';
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
  }: {
    /** Where it is started from (the repository by default): relative settings resolve against it. */
    cwd?: string;
    /** Under npm start's supervisor (bin/supervise.sh), which starts it again after a crash. */
    supervised?: boolean;
  } = {},
): Promise<Host> {
  const port = await freePort();
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
