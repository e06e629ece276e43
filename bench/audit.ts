/**
 * What the audit log costs (issue 27), for npm run bench: single-row inserts and the admin's
 * `select 1` through two hosts started alike but for AUDIT_LOG (on, off), their rounds
 * alternating, as req/s with the log on over req/s with it off. Target: at most 10% fewer.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { BackgroundDrains, drainInbox } from '../lib/db/audit-inbox';
import { type AuditDraft, newEntryId, readSealKey } from '../lib/db/audit-log';
import { inTransaction } from '../lib/db/transaction';
import {
  atLeast,
  basicAuth,
  compare,
  cpuWhile,
  type Host,
  type Load,
  load,
  median,
  type Row,
  SECONDS,
  shown,
  startHost,
  type Target,
} from './support';

const SCHEMA = 'bench_audit';

async function seed(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA};
      CREATE TABLE IF NOT EXISTS ${SCHEMA}.events (id bigserial PRIMARY KEY, kind text, at timestamptz DEFAULT now())`);
  } finally {
    await client.end();
  }
}

const ROW = JSON.stringify({ schema: SCHEMA, data: { kind: 'click' } });
const SELECT_1 = JSON.stringify({ schema: SCHEMA, sql: 'select 1' });

/** CPU per request of each target, in µs, medians over its rounds: the host's node and PostgreSQL. */
export type CpuPerRequest = Record<string, { node: number; postgres: number }>;

export async function auditBench(
  databaseUrl: string,
  rounds: number,
): Promise<{ rows: Row[]; cpu: CpuPerRequest }> {
  await seed(databaseUrl);
  const on = await startHost(databaseUrl, { AUDIT_LOG: 'on' });
  const off = await startHost(databaseUrl, { AUDIT_LOG: 'off' });
  const headers = { authorization: basicAuth, 'content-type': 'application/json' };
  const samples: Record<string, { node: number[]; postgres: number[] }> = {};
  const post = (name: string, host: Host, path: string, body: string) => ({
    [name]: async (): Promise<Load> => {
      const { result, node, postgres } = await cpuWhile(host, () =>
        load(`${host.url}${path}`, headers, { method: 'POST', body }),
      );
      const requests = result.rps * SECONDS;
      const sample = samples[name] ?? { node: [], postgres: [] };
      samples[name] = sample;
      sample.node.push((node / requests) * 1e6);
      sample.postgres.push((postgres / requests) * 1e6);
      return result;
    },
  });
  try {
    const rows = await compare(
      {
        ...post('POST /api/table/{t}/row, audit log off', off, '/api/table/events/row', ROW),
        ...post('POST /api/table/{t}/row, audit log on', on, '/api/table/events/row', ROW),
        ...post('POST /api/query select 1, audit log off', off, '/api/query', SELECT_1),
        ...post('POST /api/query select 1, audit log on', on, '/api/query', SELECT_1),
      },
      rounds,
    );
    const cpu = Object.fromEntries(
      Object.entries(samples).map(([name, s]) => [
        name,
        { node: median(s.node), postgres: median(s.postgres) },
      ]),
    );
    return { rows, cpu };
  } finally {
    await Promise.all([on.stop(), off.stop()]);
  }
}

const CONNECTIONS = 10;

/** `work` on CONNECTIONS sessions at once for SECONDS: its rate and latencies, like a load's. */
async function sessionsLoad(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<unknown>): Promise<Load> {
  const latencies: number[] = [];
  const started = performance.now();
  const end = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const client = await pool.connect();
      try {
        while (performance.now() < end) {
          const t = performance.now();
          await work(client);
          latencies.push(performance.now() - t);
        }
      } finally {
        client.release();
      }
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => Math.round((latencies[Math.floor(q * (latencies.length - 1))] ?? 0) * 10) / 10;
  const seconds = (performance.now() - started) / 1000;
  return {
    rps: latencies.length / seconds,
    p50: at(0.5),
    p99: at(0.99),
    connections: CONNECTIONS,
    failed: 0,
  };
}

/**
 * The insert's transaction straight on PostgreSQL, through lib/db/transaction as the row routes
 * run it, with and without its entry: what the entry costs PostgreSQL alone, with no host around.
 * With the entry, the inbox is drained into the log every 200 ms meanwhile, as a host does.
 */
export async function databaseAloneBench(databaseUrl: string, rounds: number): Promise<Row[]> {
  await seed(databaseUrl);
  // One connection more than the load's: the drain's.
  const pool = new pg.Pool({ connectionString: databaseUrl, max: CONNECTIONS + 1 });
  const drains = new BackgroundDrains(200);
  let drainFailed: unknown;
  const drain = async (key: Buffer) => {
    try {
      const client = await pool.connect();
      try {
        await drainInbox(client, key, { batches: 10 });
      } finally {
        client.release();
      }
    } catch (error) {
      drainFailed = error;
    }
  };
  const drainSoon = (key: Buffer) => drains.start(() => drain(key));
  try {
    const key = await readSealKey(pool);
    const insert = (audited: boolean) => (client: pg.PoolClient) => {
      const audit: AuditDraft | undefined = audited
        ? {
            key,
            settled: false,
            entry: {
              id: newEntryId(),
              requestId: newEntryId(),
              actor: 'admin',
              schema: SCHEMA,
              action: 'row.insert',
              target: 'events',
              status: 201,
            },
          }
        : undefined;
      return inTransaction(
        client,
        async () =>
          (await client.query(`INSERT INTO ${SCHEMA}.events (kind) VALUES ($1) RETURNING *`, ['click'])).rows,
        { audit, rows: (rows) => rows.length },
      ).finally(() => {
        if (audited) drainSoon(key);
      });
    };
    const rows = await compare(
      {
        'PostgreSQL alone: insert transaction, no entry': () => sessionsLoad(pool, insert(false)),
        'PostgreSQL alone: insert transaction with its entry': () => sessionsLoad(pool, insert(true)),
      },
      rounds,
    );
    await drains.settled();
    if (drainFailed) throw drainFailed;
    return rows;
  } finally {
    await drains.settled();
    await pool.end();
  }
}

export function printAuditCpu(cpu: CpuPerRequest): void {
  console.log('CPU per request (µs, median of the rounds): the host’s node processes and PostgreSQL’s');
  console.table(
    Object.entries(cpu).map(([target, { node, postgres }]) => ({
      target,
      node: Math.round(node),
      postgres: Math.round(postgres),
      total: Math.round(node + postgres),
    })),
  );
}

export function auditTargets(rows: Row[]): Target[] {
  const rps = (name: string) => rows.find((r) => r.name === name)?.rps ?? Number.NaN;
  const ratio = (what: string) => rps(`${what}, audit log on`) / rps(`${what}, audit log off`);
  return [
    atLeast('single-row insert req/s, audit log on / off', ratio('POST /api/table/{t}/row'), 0.9, 'x'),
    atLeast('admin select 1 req/s, audit log on / off', ratio('POST /api/query select 1'), 0.9, 'x'),
    shown(
      'PostgreSQL alone: insert transactions/s, with its entry / without',
      rps('PostgreSQL alone: insert transaction with its entry') /
        rps('PostgreSQL alone: insert transaction, no entry'),
    ),
  ];
}
