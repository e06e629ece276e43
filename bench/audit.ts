/**
 * What the audit log costs (issue 27), for npm run bench: single-row inserts and the admin's
 * `select 1` through two hosts started alike but for AUDIT_LOG (on, off), their rounds
 * alternating, as req/s with the log on over req/s with it off. Target: at most 10% fewer.
 */
import pg from 'pg';
import { atLeast, basicAuth, compare, load, type Row, startHost, type Target } from './support';

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

export async function auditBench(databaseUrl: string, rounds: number): Promise<Row[]> {
  await seed(databaseUrl);
  const on = await startHost(databaseUrl, { AUDIT_LOG: 'on' });
  const off = await startHost(databaseUrl, { AUDIT_LOG: 'off' });
  const headers = { authorization: basicAuth, 'content-type': 'application/json' };
  const post = (base: string, path: string, body: string) => () =>
    load(`${base}${path}`, headers, { method: 'POST', body });
  try {
    return await compare(
      {
        'POST /api/table/{t}/row, audit log off': post(off.url, '/api/table/events/row', ROW),
        'POST /api/table/{t}/row, audit log on': post(on.url, '/api/table/events/row', ROW),
        'POST /api/query select 1, audit log off': post(off.url, '/api/query', SELECT_1),
        'POST /api/query select 1, audit log on': post(on.url, '/api/query', SELECT_1),
      },
      rounds,
    );
  } finally {
    await Promise.all([on.stop(), off.stop()]);
  }
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
