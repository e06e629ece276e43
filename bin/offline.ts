import { spawn } from 'node:child_process';
import { freePort } from './free-port';

export interface OfflineHost {
  port: string;
  host: string;
  env: NodeJS.ProcessEnv;
  /** The service directory (its serverless.yml); the working directory by default. */
  cwd?: string;
  /** Extra serverless-offline options, e.g. ['--httpsProtocol', dir]. */
  options?: string[];
  /** Runs once when the host stops (signal or exit), before this process exits. */
  cleanup: () => Promise<void>;
}

/** Runs serverless-offline in the foreground; a signal or its exit stops it and runs cleanup. */
export async function runOffline({
  port,
  host,
  env,
  cwd,
  options = [],
  cleanup,
}: OfflineHost): Promise<void> {
  const offline = spawn(
    process.execPath,
    [
      require.resolve('serverless/bin/serverless.js'),
      'offline',
      'start',
      ...options,
      '--httpPort',
      port,
      '--host',
      host,
      '--lambdaPort',
      String(await freePort()),
    ],
    { env, stdio: 'inherit', ...(cwd ? { cwd } : {}) },
  );
  let stopping = false;
  const stop = async (code: number) => {
    if (stopping) return;
    stopping = true;
    offline.kill('SIGTERM');
    await cleanup().catch(() => undefined);
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));
  offline.on('exit', (code) => void stop(code ?? 1));
}
