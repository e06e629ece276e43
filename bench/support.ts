/**
 * What the benchmarks share: the host built as production builds it (plus the baseline functions),
 * started as production starts it; load, medians, the memory of the host's process tree, and the
 * tables they print.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { buildProduction, type ServiceFunction } from '../bin/build';
import { startTemporaryPostgres } from '../bin/embedded-postgres';
import { freePort } from '../bin/free-port';
import type { EmbeddedMajor } from '../bin/postgres-reach';
import { gone } from '../bin/processes';
import { runTmpdir } from '../bin/run-tmpdir';

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
export const AUTH = { user: 'bench', pass: 'bench-password' };

/** The settings every bench host and probe runs with. */
export const BENCH_SETTINGS = {
  AUTH_USER: AUTH.user,
  AUTH_PASS: AUTH.pass,
  DBADMIN_SECRET: 'bench-secret-0123456789abcdef0123456789abcdef',
};

export const basicAuth = `Basic ${Buffer.from(`${AUTH.user}:${AUTH.pass}`).toString('base64')}`;

/** Where the benchmarks build the production layout (gitignored; removed after each run). */
export const BUILD_DIR = resolve(__dirname, '..', '.bench-build');

/** The baselines, served by the same host as our functions. */
export const BENCH_FUNCTIONS: Record<string, ServiceFunction> = {
  ceiling: { handler: 'bench/ceiling.handler', events: [{ httpApi: 'GET /bench/ceiling' }] },
  chain: { handler: 'bench/chain.handler', events: [{ httpApi: 'GET /bench/chain' }] },
  ungated: { handler: 'bench/ungated.handler', events: [{ httpApi: 'GET /bench/ungated/tables' }] },
};

export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] as number)
    : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
};

export interface Host {
  url: string;
  /** The process the host was started as: its tree is the host's memory. */
  pid: number;
  /** SIGTERM to that process; resolves once it and every process it had started have exited. */
  stop: () => Promise<void>;
  /** SIGKILL to it and every process it started, as a crash would end them; resolves once gone. */
  kill: () => Promise<void>;
}

/** A host process, once it prints serverless-offline's 'Server ready'; its output drained after. */
export async function serveUntilReady(
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv; port: number },
): Promise<Host> {
  const child = spawn(process.execPath, args, { cwd: options.cwd, env: options.env });
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  await ready(child);
  // The host logs every request; drain it so its pipes never fill.
  child.stdout.removeAllListeners('data').resume();
  child.stderr.removeAllListeners('data').resume();
  const pid = child.pid as number;
  return {
    url: `http://127.0.0.1:${options.port}`,
    pid,
    stop: async () => {
      // start.js answers SIGTERM by stopping serverless-offline without waiting for it: wait here,
      // so no host of one measurement still runs during the next.
      const tree = descendants(pid);
      child.kill('SIGTERM');
      await exited;
      await gone(tree);
    },
    kill: async () => {
      const tree = descendants(pid);
      for (const process_ of tree) {
        try {
          process.kill(process_, 'SIGKILL');
        } catch {
          // gone already
        }
      }
      await exited;
      await gone(tree);
    },
  };
}

function ready(child: ChildProcessWithoutNullStreams): Promise<void> {
  let output = '';
  return new Promise<void>((resolved, fail) => {
    const watch = (chunk: Buffer) => {
      output += chunk;
      if (output.includes('Server ready')) resolved();
    };
    child.stdout.on('data', watch);
    child.stderr.on('data', watch);
    child.on('exit', (code) => fail(new Error(`the host exited with ${code}\n${output}`)));
  });
}

/** What users run: the production layout, built with the baselines beside our functions. */
export function buildBenchHost(): Promise<void> {
  return buildProduction({ dir: BUILD_DIR, functions: BENCH_FUNCTIONS });
}

/** What a bench host is given: the production settings and nothing else of this shell's. */
export const hostEnvironment = (databaseUrl: string): NodeJS.ProcessEnv => ({
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  DATABASE_URL: databaseUrl,
  ...BENCH_SETTINGS,
  NODE_ENV: 'production',
});

/**
 * The host exactly as production starts it (npm start, the Dockerfile's CMD):
 * `node --max-old-space-size=384 dist/bin/start.js`.
 */
export async function startHost(databaseUrl: string, settings: NodeJS.ProcessEnv = {}): Promise<Host> {
  const port = await freePort();
  return serveUntilReady(['--max-old-space-size=384', join(BUILD_DIR, 'bin', 'start.js')], {
    cwd: BUILD_DIR,
    port,
    env: { ...hostEnvironment(databaseUrl), ...settings, PORT: String(port), HOST: '127.0.0.1' },
  });
}

export interface Load {
  rps: number;
  p50: number;
  p99: number;
  connections: number;
  /** Non-2xx answers and connection errors. */
  failed: number;
}

let secondsOfLoad = 0;

/** Seconds of load sent by this process so far (autocannon's measured durations). */
export const loadSeconds = () => secondsOfLoad;

/** One autocannon run; failed answers are counted, not thrown (see load). */
export async function measure(
  url: string,
  headers: Record<string, string> = {},
  request: { method?: 'GET' | 'POST'; body?: string } = {},
  connections = 10,
): Promise<Load> {
  const result = await autocannon({ url, connections, duration: SECONDS, headers, ...request });
  secondsOfLoad += result.duration;
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    connections,
    failed: result.non2xx + result.errors,
  };
}

/** One autocannon run that must be answered 2xx throughout. */
export async function load(
  url: string,
  headers: Record<string, string> = {},
  request: { method?: 'GET' | 'POST'; body?: string } = {},
  connections = 10,
): Promise<Load> {
  const result = await measure(url, headers, request, connections);
  if (result.failed > 0) throw new Error(`${url}: ${result.failed} non-2xx answers or errors`);
  return result;
}

export type Row = Load & { name: string };

/** Alternating rounds over every target after two warm-up passes; medians per target. */
export async function compare(targets: Record<string, () => Promise<Load>>, rounds: number): Promise<Row[]> {
  const samples: Record<string, Load[]> = Object.fromEntries(Object.keys(targets).map((name) => [name, []]));
  // serverless-offline loads a function on its first request: warm them and their pools first.
  for (let pass = 0; pass < 2; pass++) for (const run of Object.values(targets)) await run();
  for (let round = 0; round < rounds; round++) {
    for (const [name, run] of Object.entries(targets)) samples[name]?.push(await run());
  }
  return Object.entries(samples).map(([name, runs]) => ({
    name,
    rps: median(runs.map((r) => r.rps)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    connections: runs[0]?.connections ?? 0,
    failed: runs.reduce((sum, r) => sum + r.failed, 0),
  }));
}

/** Each row's ceiling: the first row measured at the same number of connections. */
export function vsCeiling(rows: Row[], row: Row): number {
  const ceiling = rows.find((r) => r.connections === row.connections) ?? row;
  return row.rps / ceiling.rps;
}

/** The throughput table: each target next to the ceiling at the same number of connections. */
export function printThroughput(
  rows: Row[],
  rounds: number,
  through = 'the production host (node .bench-build/bin/start.js)',
): void {
  console.log(`\nThroughput through ${through}, median of ${rounds} x ${SECONDS}s`);
  console.table(
    rows.map((r) => ({
      target: r.name,
      connections: r.connections,
      'req/s': Math.round(r.rps),
      'p50 ms': r.p50,
      'p99 ms': r.p99,
      'vs ceiling': `${vsCeiling(rows, r).toFixed(2)}x`,
    })),
  );
}

export interface ProcessesMemory {
  processes: number;
  rssMb: number;
  pssMb: number;
}

/** /proc/<pid>/stat's parent pid; the command name may hold spaces and parentheses. */
function parentPid(pid: string): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** The process and all its descendants, now. */
function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    const parent = parentPid(entry);
    if (parent !== undefined) children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
  }
  const tree = [root];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i] as number) ?? []));
  return tree;
}

/** CPU seconds (user and system) the processes have used so far; a process gone counts 0. */
function cpuSeconds(pids: number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone
    }
  }
  return ticks / 100;
}

/**
 * CPU used by the host's process tree and by every postgres process of the machine while `run`
 * ran (clock ticks of /proc: 10 ms each, so meant for runs of seconds).
 */
export async function cpuWhile<T>(
  host: Host,
  run: () => Promise<T>,
): Promise<{ result: T; node: number; postgres: number }> {
  const postgres = () =>
    readdirSync('/proc')
      .filter((name) => /^\d+$/.test(name))
      .map(Number)
      .filter((pid) => executable(pid) === 'postgres');
  const tree = descendants(host.pid);
  const [node0, pg0] = [cpuSeconds(tree), cpuSeconds(postgres())];
  const result = await run();
  return { result, node: cpuSeconds(tree) - node0, postgres: cpuSeconds(postgres()) - pg0 };
}

/** A `Name:   1234 kB` line of a /proc file, in kB; 0 when the process has gone. */
function kilobytes(file: string, field: string): number {
  try {
    const match = readFileSync(file, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
    return Number(match?.[1] ?? 0);
  } catch {
    return 0;
  }
}

function executable(pid: number): string {
  try {
    return basename(readlinkSync(`/proc/${pid}/exe`));
  } catch {
    return 'gone';
  }
}

/**
 * Resident memory of a process and its descendants, by executable (node, postgres...): the sum of
 * VmRSS (pages shared between them, e.g. node's own code, counted in each) and of Pss (shared
 * pages divided among their sharers: the tree's fair share of the machine's memory).
 */
export function treeMemory(root: number): Record<string, ProcessesMemory> {
  const byExecutable: Record<string, ProcessesMemory> = {};
  for (const pid of descendants(root)) {
    const name = executable(pid);
    if (name === 'gone') continue;
    const sum = byExecutable[name] ?? { processes: 0, rssMb: 0, pssMb: 0 };
    byExecutable[name] = sum;
    sum.processes += 1;
    sum.rssMb += kilobytes(`/proc/${pid}/status`, 'VmRSS') / 1024;
    sum.pssMb += kilobytes(`/proc/${pid}/smaps_rollup`, 'Pss') / 1024;
  }
  return byExecutable;
}

export interface MemorySample {
  when: string;
  /** Seconds of load the host had served before the sample. */
  loadSeconds: number;
  memory: Record<string, ProcessesMemory>;
}

export function sampleMemory(when: string, host: Host, since = 0): MemorySample {
  return { when, loadSeconds: Math.round(loadSeconds() - since), memory: treeMemory(host.pid) };
}

const NONE: ProcessesMemory = { processes: 0, rssMb: 0, pssMb: 0 };

/** The host's process tree: node processes, and PostgreSQL's when the host started its own. */
export function printMemory(samples: MemorySample[]): void {
  console.log('Resident memory of the host process tree (start.js and its descendants), MB');
  console.table(
    samples.map(({ when, loadSeconds, memory }) => {
      const node = memory.node ?? NONE;
      const postgres = memory.postgres ?? NONE;
      const others = Object.keys(memory).filter((name) => name !== 'node' && name !== 'postgres');
      return {
        when,
        's of load before': loadSeconds,
        'node procs': node.processes,
        'node RSS': Math.round(node.rssMb),
        'node PSS': Math.round(node.pssMb),
        'postgres procs': postgres.processes,
        'postgres RSS': Math.round(postgres.rssMb),
        'postgres PSS': Math.round(postgres.pssMb),
        ...(others.length > 0 ? { others: others.join(', ') } : {}),
      };
    }),
  );
}

export interface Target {
  what: string;
  measured: string;
  target: string;
  met: 'yes' | 'no' | '-';
}

const figure = (value: number, unit: string) =>
  unit === 'x' ? `${value.toFixed(2)}x` : `${value.toFixed(unit === 'ms' ? 1 : 0)} ${unit}`;
const bound = (value: number, unit: string) => (unit === 'x' ? `${value}x` : `${value} ${unit}`);

/** A figure held to a floor: a ratio to a baseline of the same run, by default. */
export const atLeast = (what: string, value: number, floor: number, unit = 'x'): Target => ({
  what,
  measured: figure(value, unit),
  target: `≥ ${bound(floor, unit)}`,
  met: value >= floor ? 'yes' : 'no',
});

/** A figure held to a ceiling. */
export const atMost = (what: string, value: number, ceiling: number, unit = 'x'): Target => ({
  what,
  measured: figure(value, unit),
  target: `≤ ${bound(ceiling, unit)}`,
  met: value <= ceiling ? 'yes' : 'no',
});

/** A figure shown beside the targets, not held to one. */
export const shown = (what: string, value: number, unit = 'x'): Target => ({
  what,
  measured: figure(value, unit),
  target: '-',
  met: '-',
});

export function printTargets(targets: Target[]): void {
  console.log('Targets (issues 13 and 27), measured in this run');
  console.table(targets);
}

/**
 * Runs a benchmark against DATABASE_URL or a throw-away embedded PostgreSQL, with the production
 * layout built into BUILD_DIR for the run and removed after it, like its temporary files.
 */
export function runBench(
  purpose: string,
  body: (databaseUrl: string, superuserUrl: string | undefined) => Promise<void>,
  /** The embedded server's major, when DATABASE_URL is unset (a bench that runs pg_dump needs its own). */
  { major }: { major?: EmbeddedMajor } = {},
): void {
  const removeTmpdir = runTmpdir(`dbadmin-${purpose}`);
  const run = async () => {
    let databaseUrl = process.env.DATABASE_URL;
    // A superuser's URL of the same server, for what only one may set up (PgBouncer's lookup).
    let superuserUrl = process.env.BENCH_SUPERUSER_URL;
    let stopDatabase: (() => Promise<void>) | undefined;
    try {
      await buildBenchHost();
      if (!databaseUrl) {
        const database = await startTemporaryPostgres(purpose, { major });
        databaseUrl = database.url;
        superuserUrl = database.superuserUrl;
        stopDatabase = database.stop;
      }
      await body(databaseUrl, superuserUrl);
    } finally {
      rmSync(BUILD_DIR, { recursive: true, force: true });
      await stopDatabase?.();
      removeTmpdir();
    }
  };
  run().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
