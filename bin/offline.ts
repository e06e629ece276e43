import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { constants as osConstants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectTimeoutMs } from '../lib/config';

export interface OfflineHost {
  port: string;
  host: string;
  env: NodeJS.ProcessEnv;
  /** The service directory (its serverless.yml); the working directory by default. */
  cwd?: string;
  /** Extra serverless-offline options, e.g. ['--httpsProtocol', dir]. */
  options?: string[];
  /**
   * Runs once as this process exits, however it ends (serverless-offline exits by itself on
   * SIGINT and SIGTERM): synchronous, since nothing asynchronous runs past that point.
   */
  cleanup: () => void;
}

/**
 * How serverless-offline runs Node handlers: in its own process, or its default, a worker thread
 * per request in flight. (Its only other mode for Node is Docker.)
 */
export type OfflineMode = 'in-process' | 'worker-threads';

/** SPEC.md's statement timeout, which the local host must outlast. */
const DEFAULT_QUERY_TIMEOUT_MS = 30_000;

/** Waits for a connection a request may make in turn: the service's, a role's slot, its login. */
const CONNECTION_WAITS = 3;

/**
 * The function timeout the local host gives each function: the statement timeout and the waits
 * for connections before it, plus a margin, so PostgreSQL's own timeout (a JSON `Query timeout`)
 * or a 503 Busy always comes first, never the host's. On Lambda it is serverless.yml's 29 s, API
 * Gateway's ceiling.
 */
export function functionTimeoutSeconds(env: NodeJS.ProcessEnv): number {
  const queryTimeoutMs = Number(env.QUERY_TIMEOUT_MS) || DEFAULT_QUERY_TIMEOUT_MS;
  const poolMode = env.DATABASE_POOL_MODE === 'transaction' ? 'transaction' : 'session';
  const connectMs = Number(env.DB_CONNECT_TIMEOUT_MS) || connectTimeoutMs(poolMode, false);
  return Math.ceil((queryTimeoutMs + CONNECTION_WAITS * connectMs) / 1000) + 5;
}

/**
 * serverless-offline's command line for a service. Handlers run in its own process
 * (`--useInProcess`): each function is its own bundle, so each keeps module state (pools, license
 * cache) of its own as on Lambda, and requests in flight share that function's pools. Its
 * default, a worker thread per request in flight with no upper bound, opened a set of pools and
 * a V8 heap per worker: 50 parallel requests took 2.4 GB and exhausted PostgreSQL's connections
 * (README: The local host). The host always runs in-process; `npm run bench:host` asks for both
 * modes to measure them side by side.
 */
export function offlineArguments(
  port: string,
  host: string,
  lambdaPort: string,
  options: string[] = [],
  mode: OfflineMode = 'in-process',
) {
  return [
    require.resolve('serverless/bin/serverless.js'),
    'offline',
    'start',
    ...(mode === 'in-process' ? ['--useInProcess'] : []),
    ...options,
    '--httpPort',
    port,
    '--host',
    host,
    '--lambdaPort',
    lambdaPort,
  ];
}

/**
 * Serves in this process: serverless-offline's command (osls) is loaded here, with this process's
 * environment, working directory and arguments made what a child of ours would have had. A child
 * cost a second Node process (about 80 MB) for no isolation: the functions already run inside
 * serverless-offline's process (see offlineArguments). For the prebuilt host (dist/bin/start.js);
 * a process running under tsx serves from a child (serveFromChild), since tsx's module hooks load
 * some of serverless-offline's modules twice (its log lines are lost).
 */
export function serveInThisProcess({ port, host, env, cwd, options = [], cleanup }: OfflineHost): void {
  const invokeDir = privateInvokeDir();
  process.on('exit', () => {
    cleanup();
    rmSync(invokeDir, { recursive: true, force: true });
  });
  replaceEnvironment(hostEnvironment(env));
  if (cwd) process.chdir(cwd);
  const [command, ...args] = offlineArguments(port, host, join(invokeDir, 'lambda.sock'), options);
  process.argv = [process.execPath, command as string, ...args];
  require('./contain-errors.cjs');
  require(command as string);
}

/** Serves from a child process (the sources under tsx); a signal or its exit stops it and cleans up. */
export function serveFromChild({ port, host, env, cwd, options = [], cleanup }: OfflineHost): void {
  const invokeDir = privateInvokeDir();
  const offline = spawn(
    process.execPath,
    ['--require', CONTAIN_ERRORS, ...offlineArguments(port, host, join(invokeDir, 'lambda.sock'), options)],
    {
      env: hostEnvironment(env),
      stdio: 'inherit',
      ...(cwd ? { cwd } : {}),
    },
  );
  let stopping = false;
  const stop = (code: number) => {
    if (stopping) return;
    stopping = true;
    offline.kill('SIGTERM');
    cleanup();
    rmSync(invokeDir, { recursive: true, force: true });
    process.exit(code);
  };
  process.on('SIGINT', () => stop(0));
  process.on('SIGTERM', () => stop(0));
  // Its status passed on, a signal's as a shell gives it (128 + n): bin/supervise.sh reads it.
  offline.on('exit', (code, signal) => stop(code ?? 128 + (signal ? osConstants.signals[signal] : 0)));
}

/** What serverless-offline's process loads first (see serveInThisProcess). */
const CONTAIN_ERRORS = join(__dirname, 'contain-errors.cjs');

/**
 * The Lambda invoke endpoint (which runs any function, activateLicense included, with any input)
 * listens on a Unix socket in a directory only we can enter, never on the network.
 */
const privateInvokeDir = () => mkdtempSync(join(tmpdir(), 'dbadmin-invoke-'));

const hostEnvironment = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({
  DBADMIN_FUNCTION_TIMEOUT: String(functionTimeoutSeconds(env)),
  ...env,
});

/** process.env becomes exactly `env`: what start-up took out of it (a license key) is gone too. */
function replaceEnvironment(env: NodeJS.ProcessEnv): void {
  for (const name of Object.keys(process.env)) if (!(name in env)) delete process.env[name];
  Object.assign(process.env, env);
}
