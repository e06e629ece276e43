/**
 * serverless-offline's run modes side by side (npm run bench:host). The production build (bin/build,
 * with the baseline functions) is built once, then served by serverless-offline as bin/offline
 * starts it, once per mode: in its own process (`--useInProcess`, what `npm start` runs) and in its
 * default, a worker thread per function instance. Prints one table with, for each mode:
 *  - req/s, p50 and p99 (autocannon) of the trivial handler (the ceiling) and GET /api/tables,
 *    at 10 and 50 connections, median of BENCH_ROUNDS alternating rounds, each against the ceiling
 *    at the same connections; answers other than 2xx are counted, not fatal;
 *  - resident memory of serverless-offline's process tree (node RSS and PSS), idle and after load;
 *  - the PostgreSQL connections the host holds after load (application_name dbadmin*).
 * The host here is serverless-offline itself: `npm start` adds start.js's own node process
 * (`npm run bench` measures that tree).
 *
 * serverless-offline 14 has no child-process mode for Node handlers: its HandlerRunner picks Docker
 * (`--useDocker`, for every runtime; this machine has no Docker), then for Node either in-process or
 * worker threads; only Go, Python, Ruby and Java handlers run as child processes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../bin/free-port';
import { functionTimeoutSeconds, type OfflineMode, offlineArguments } from '../bin/offline';
import {
  BUILD_DIR,
  basicAuth,
  compare,
  type Host,
  hostEnvironment,
  loadSeconds,
  type MemorySample,
  measure,
  type Row,
  runBench,
  SECONDS,
  sampleMemory,
  serveUntilReady,
  vsCeiling,
} from './support';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const MODES: OfflineMode[] = ['in-process', 'worker-threads'];

/** serverless-offline on the build, with the environment start.js gives it in production. */
async function startOffline(databaseUrl: string, mode: OfflineMode): Promise<Host> {
  const port = await freePort();
  // The invoke endpoint on a socket in a private directory, as the host keeps it (bin/offline).
  const lambdaSocket = join(mkdtempSync(join(tmpdir(), 'dbadmin-bench-invoke-')), 'lambda.sock');
  return serveUntilReady(offlineArguments(String(port), '127.0.0.1', lambdaSocket, [], mode), {
    cwd: BUILD_DIR,
    port,
    env: { ...hostEnvironment(databaseUrl), DBADMIN_FUNCTION_TIMEOUT: String(functionTimeoutSeconds({})) },
  });
}

/** The host's connections to its database, counted by the server. */
async function hostConnections(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ count: number }>(
      `SELECT count(*)::int AS count FROM pg_stat_activity
        WHERE datname = current_database() AND application_name LIKE 'dbadmin%'`,
    );
    return rows[0]?.count ?? 0;
  } finally {
    await client.end();
  }
}

interface ModeResult {
  rows: Row[];
  idle: MemorySample;
  loaded: MemorySample;
  connections: number;
}

async function measureMode(databaseUrl: string, mode: OfflineMode): Promise<ModeResult> {
  const host = await startOffline(databaseUrl, mode);
  const since = loadSeconds();
  const authorization = basicAuth;
  try {
    const idle = sampleMemory('idle', host, since);
    const rows = await compare(
      {
        'trivial handler (ceiling), 10 connections': () => measure(`${host.url}/bench/ceiling`),
        'GET /api/tables, 10 connections': () => measure(`${host.url}/api/tables`, { authorization }),
        'trivial handler (ceiling), 50 connections': () => measure(`${host.url}/bench/ceiling`, {}, {}, 50),
        'GET /api/tables, 50 connections': () => measure(`${host.url}/api/tables`, { authorization }, {}, 50),
      },
      ROUNDS,
    );
    const loaded = sampleMemory('after load', host, since);
    return { rows, idle, loaded, connections: await hostConnections(databaseUrl) };
  } finally {
    await host.stop();
  }
}

const throughputCell = (rows: Row[], row: Row) =>
  `${Math.round(row.rps)} req/s (${vsCeiling(rows, row).toFixed(2)}x), p50 ${row.p50} / p99 ${row.p99} ms` +
  (row.failed > 0 ? `, ${row.failed} failed` : '');

const memoryCell = ({ memory, loadSeconds }: MemorySample) => {
  const node = memory.node;
  const after = loadSeconds > 0 ? ` after ${loadSeconds} s of load` : '';
  return `${Math.round(node?.rssMb ?? 0)} / ${Math.round(node?.pssMb ?? 0)} MB (${node?.processes ?? 0} procs)${after}`;
};

function printModes(results: Record<string, ModeResult>): void {
  const byMode = (cell: (result: ModeResult) => string | number) =>
    Object.fromEntries(Object.entries(results).map(([mode, result]) => [mode, cell(result)]));
  const names = Object.values(results)[0]?.rows.map((r) => r.name) ?? [];
  console.log(
    `\nserverless-offline run modes on the production build, median of ${ROUNDS} x ${SECONDS}s alternating rounds`,
  );
  console.table([
    ...names.map((name) =>
      Object.assign(
        { what: name },
        byMode(({ rows }) => throughputCell(rows, rows.find((r) => r.name === name) as Row)),
      ),
    ),
    Object.assign(
      { what: 'node RSS / PSS, idle' },
      byMode(({ idle }) => memoryCell(idle)),
    ),
    Object.assign(
      { what: 'node RSS / PSS, after load' },
      byMode(({ loaded }) => memoryCell(loaded)),
    ),
    Object.assign(
      { what: 'PostgreSQL connections held after load' },
      byMode(({ connections }) => connections),
    ),
  ]);
}

runBench('bench-host', async (databaseUrl) => {
  const results: Record<string, ModeResult> = {};
  for (const mode of MODES) results[mode] = await measureMode(databaseUrl, mode);
  printModes(results);
});
