/** What the benchmarks share: the bench host (serverless.yml + baseline functions), load, medians. */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import autocannon from 'autocannon';
import { startTemporaryPostgres } from '../bin/embedded-postgres';
import { freePort } from '../bin/free-port';

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
export const AUTH = { user: 'bench', pass: 'bench-password' };
export const SERVERLESS = require.resolve('serverless/bin/serverless.js');
export const CONFIG = 'serverless.bench.yml';

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

/** serverless.yml plus the ceiling function, so both are served by one host. */
export function writeBenchConfig(): void {
  const base = readFileSync('serverless.yml', 'utf8');
  const benchFunctions = `
  ceiling:
    handler: bench/ceiling.handler
    events:
      - httpApi: GET /bench/ceiling
  chain:
    handler: bench/chain.handler
    events:
      - httpApi: GET /bench/chain
  ungated:
    handler: bench/ungated.handler
    events:
      - httpApi: GET /bench/ungated/tables
`;
  writeFileSync(CONFIG, `${base.trimEnd()}\n${benchFunctions}`);
}

export async function startOffline(env: NodeJS.ProcessEnv) {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      SERVERLESS,
      'offline',
      'start',
      '--config',
      CONFIG,
      '--httpPort',
      String(port),
      '--lambdaPort',
      String(await freePort()),
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  await new Promise<void>((ready, fail) => {
    const watch = (chunk: Buffer) => {
      output += chunk;
      if (output.includes('Server ready')) ready();
    };
    child.stdout.on('data', watch);
    child.stderr.on('data', watch);
    child.on('exit', (code) => fail(new Error(`serverless-offline exited with ${code}\n${output}`)));
  });
  // The host logs every request; drain it so its pipes never fill.
  child.stdout.removeAllListeners('data').resume();
  child.stderr.removeAllListeners('data').resume();
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill('SIGTERM') };
}

export interface Load {
  rps: number;
  p50: number;
  p99: number;
}

export async function load(
  url: string,
  headers: Record<string, string> = {},
  request: { method?: 'GET' | 'POST'; body?: string } = {},
): Promise<Load> {
  const result = await autocannon({ url, connections: 10, duration: SECONDS, headers, ...request });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99 };
}

/** The settings every bench host and probe runs with. */
export const BENCH_SETTINGS = {
  AUTH_USER: AUTH.user,
  AUTH_PASS: AUTH.pass,
  DBADMIN_SECRET: 'bench-secret-0123456789abcdef0123456789abcdef',
};

export const basicAuth = `Basic ${Buffer.from(`${AUTH.user}:${AUTH.pass}`).toString('base64')}`;

export function removeBenchConfig(): void {
  rmSync(resolve(CONFIG), { force: true });
}

/** Alternating rounds over every target after two warm-up passes; medians per target. */
export async function compare(targets: Record<string, () => Promise<Load>>, rounds: number) {
  const samples: Record<string, Load[]> = Object.fromEntries(Object.keys(targets).map((name) => [name, []]));
  // serverless-offline starts worker instances on demand: warm them and their pools first.
  for (let pass = 0; pass < 2; pass++) for (const run of Object.values(targets)) await run();
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of Object.entries(targets)) samples[name]?.push(await run());
  }
  return Object.entries(samples).map(([name, runs]) => ({
    name,
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
  }));
}

/**
 * Runs a benchmark against DATABASE_URL or a throw-away embedded PostgreSQL, with the bench
 * host's serverless config written for the run and removed after it.
 */
export function runBench(purpose: string, body: (env: NodeJS.ProcessEnv) => Promise<void>): void {
  const run = async () => {
    writeBenchConfig();
    const env: NodeJS.ProcessEnv = { ...process.env, ...BENCH_SETTINGS };
    let stopDatabase: (() => Promise<void>) | undefined;
    try {
      if (!env.DATABASE_URL) {
        const database = await startTemporaryPostgres(purpose);
        env.DATABASE_URL = database.url;
        stopDatabase = database.stop;
      }
      await body(env);
    } finally {
      removeBenchConfig();
      await stopDatabase?.();
    }
  };
  run().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}

/** The throughput table: each target next to the first one (the ceiling). */
export function printThroughput(rows: Awaited<ReturnType<typeof compare>>, rounds: number): void {
  const ceiling = rows[0]?.rps ?? 1;
  console.log(`\nThroughput through serverless-offline, 10 connections, median of ${rounds} x ${SECONDS}s`);
  console.table(
    rows.map((r) => ({
      target: r.name,
      'req/s': Math.round(r.rps),
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'vs ceiling': `${(r.rps / ceiling).toFixed(2)}x`,
    })),
  );
}
