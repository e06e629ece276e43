/**
 * What the audit log costs (issue 27), for npm run bench: single-row inserts and the admin's
 * `select 1` through two hosts started alike but for AUDIT_LOG (on, off), their rounds
 * alternating, as req/s with the log on over req/s with it off. Target: at most 10% fewer.
 */
import pg from 'pg';
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
  const ratio = (what: string) => {
    const with_ = rows.find((r) => r.name === `${what}, audit log on`);
    const without = rows.find((r) => r.name === `${what}, audit log off`);
    return with_ && without ? with_.rps / without.rps : 0;
  };
  return [
    atLeast('single-row insert req/s, audit log on / off', ratio('POST /api/table/{t}/row'), 0.9, 'x'),
    atLeast('admin select 1 req/s, audit log on / off', ratio('POST /api/query select 1'), 0.9, 'x'),
  ];
}
