/**
 * Tables benchmark (npm run bench:data). Through serverless-offline, next to baselines measured in
 * the same run:
 *  - page reads of 100,000- and 1,000,000-row tables: req/s and p50 (10 connections);
 *  - POST /api/query `select 1`: req/s as a ratio to the trivial handler (the host's ceiling);
 *  - export of 10,000 rows as CSV and JSON, through the host (with and without its gzip) and by the
 *    handler in this process: time, as a ratio to COPY (...) TO STDOUT of the same rows over one pg
 *    connection, measured in the same rounds;
 *  - structure of a schema with 50 tables: p50;
 *  - the same table read and `select 1` with a Bearer (service_role) key next to Basic.
 *
 * BENCH_ONLY=export seeds the 100,000-row table alone and measures only the exports (seconds, not
 * the minutes of the 1M-row seed and the throughput rounds). BENCH_EXPORTS sets how many timed
 * exports each row's median is taken from (15).
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { handler as tables } from '../functions/tables';
import { closePool } from '../lib/db/pool';
import { logger } from '../lib/log';
import { httpEvent, lambdaContext } from '../test/support/http';
import {
  AUTH,
  BENCH_SETTINGS,
  basicAuth,
  compare,
  load,
  median,
  printThroughput,
  runBench,
  startOffline,
} from './support';

// The export handler also runs in this process: its request lines would bury the tables (the
// in-process figures then leave out the cost of writing them; the host's keep it).
logger.setLogLevel('WARN');

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const EXPORTS = Number(process.env.BENCH_EXPORTS ?? 15);
const ONLY_EXPORT = process.env.BENCH_ONLY === 'export';

async function seed(url: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const started = performance.now();
  await client.query(`
    DROP SCHEMA IF EXISTS bench CASCADE; CREATE SCHEMA bench;
    CREATE TABLE bench.rows_100k (id serial PRIMARY KEY, name text, qty int, price numeric(10,2), created timestamptz DEFAULT now());
    INSERT INTO bench.rows_100k (name, qty, price) SELECT 'item "' || g || '", size ' || (g % 7), g % 1000, g / 100.0 FROM generate_series(1, 100000) g;`);
  if (ONLY_EXPORT) {
    await client.query('VACUUM ANALYZE bench.rows_100k');
    console.log(`seeded 100k rows in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    return client;
  }
  await client.query(`
    CREATE TABLE bench.rows_1m (LIKE bench.rows_100k INCLUDING ALL);
    INSERT INTO bench.rows_1m (id, name, qty, price) SELECT g, 'item ' || g, g % 1000, g / 100.0 FROM generate_series(1, 1000000) g;
    CREATE TABLE bench.small (id int PRIMARY KEY, name text);
    INSERT INTO bench.small SELECT g, 'row ' || g FROM generate_series(1, 100) g;
    DROP SCHEMA IF EXISTS shop50 CASCADE; CREATE SCHEMA shop50;`);
  for (let i = 1; i <= 50; i++) {
    const parent = i > 1 ? `, parent_id int REFERENCES shop50.t${i - 1} (id)` : '';
    await client.query(
      `CREATE TABLE shop50.t${i} (id serial PRIMARY KEY, name varchar(80) NOT NULL, note text, amount numeric(12,2) DEFAULT 0, created timestamptz DEFAULT now()${parent})`,
    );
  }
  await client.query('VACUUM ANALYZE bench.rows_100k');
  await client.query('VACUUM ANALYZE bench.rows_1m');
  console.log(`seeded 1.1M rows and 50 tables in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return client;
}

/** Sequential wall time of each target, median of EXPORTS alternating rounds after one warm-up each. */
async function timedRounds(targets: Record<string, () => Promise<unknown>>): Promise<Record<string, number>> {
  for (const run of Object.values(targets)) await run();
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(targets).map((name) => [name, []]));
  for (let i = 0; i < EXPORTS; i++) {
    for (const [name, run] of Object.entries(targets)) {
      const started = performance.now();
      await run();
      times[name]?.push(performance.now() - started);
    }
  }
  return Object.fromEntries(Object.entries(times).map(([name, runs]) => [name, median(runs)]));
}

async function copyExport(client: pg.Client): Promise<string> {
  const chunks: Buffer[] = [];
  const sql =
    'COPY (SELECT * FROM bench.rows_100k ORDER BY id LIMIT 10000) TO STDOUT WITH (FORMAT csv, HEADER true)';
  for await (const chunk of client.query(copyTo(sql))) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function createServiceKey(url: string, headers: Record<string, string>): Promise<string> {
  const response = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ keyName: `bench-${Date.now()}`, keyType: 'service_role' }),
  });
  if (response.status !== 201) throw new Error(`key creation: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { key: string }).key;
}

runBench('bench-data', async (env) => {
  const client = await seed(env.DATABASE_URL as string);
  Object.assign(process.env, { DATABASE_URL: env.DATABASE_URL, ...BENCH_SETTINGS });
  const host = await startOffline(env);
  const headers = { authorization: basicAuth, 'content-type': 'application/json' };
  const api = (path: string) => `${host.url}${path}`;
  try {
    if (!ONLY_EXPORT) await throughput(api, headers);
    await exports(api, headers, client);
  } finally {
    host.stop();
    await client.end();
    await closePool();
  }
});

async function throughput(api: (path: string) => string, headers: Record<string, string>) {
  const key = await createServiceKey(api('/api/project/bench/keys'), headers);
  const asKey = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const selectOne = { method: 'POST' as const, body: JSON.stringify({ sql: 'select 1' }) };
  const rows = await compare(
    {
      'trivial handler (ceiling)': () => load(api('/bench/ceiling')),
      'POST /api/query select 1': () => load(api('/api/query'), headers, selectOne),
      'POST /api/query select 1, Bearer key': () => load(api('/api/query'), asKey, selectOne),
      'GET /api/table/small (100 rows)': () => load(api('/api/table/small?schema=bench'), headers),
      'GET /api/table/small, Bearer key': () => load(api('/api/table/small'), asKey),
      'page 1 of 100k rows': () => load(api('/api/table/rows_100k?schema=bench'), headers),
      'page 1 of 1M rows': () => load(api('/api/table/rows_1m?schema=bench'), headers),
      'page 10000 of 1M rows': () => load(api('/api/table/rows_1m?schema=bench&page=10000'), headers),
      'structure, 50 tables': () => load(api('/api/schema?schema=shop50'), headers),
    },
    ROUNDS,
  );
  printThroughput(rows, ROUNDS);
}

/**
 * Export of 10,000 rows through the host and in this process, next to COPY over one connection,
 * all measured in alternating rounds so that a busy machine weighs on each alike. Through the host
 * once as fetch asks (gzip, which serverless-offline applies and API Gateway's HTTP APIs do not)
 * and once uncompressed.
 */
async function exports(api: (path: string) => string, headers: Record<string, string>, client: pg.Client) {
  const get =
    (format: string, encoding: Record<string, string> = {}) =>
    async () => {
      const path = `/api/table/rows_100k/export?schema=bench&format=${format}&limit=10000`;
      const response = await fetch(api(path), { headers: { ...headers, ...encoding } });
      if (!response.ok) throw new Error(`${path}: ${response.status}`);
      return response.text();
    };
  const identity = { 'accept-encoding': 'identity' };
  // The handler itself, as Lambda calls it: its answer is not parsed.
  const direct = (format: string) => async () => {
    const event = httpEvent({
      path: '/api/table/rows_100k/export',
      query: { schema: 'bench', format, limit: '10000' },
      auth: AUTH,
    });
    const reply = (await tables(event, lambdaContext())) as { statusCode: number };
    if (reply.statusCode !== 200) throw new Error(`export ${format}: ${reply.statusCode}`);
  };
  const medians = await timedRounds({
    'COPY ... TO STDOUT, one pg connection (baseline)': () => copyExport(client),
    'handler in this process, csv': direct('csv'),
    'handler in this process, json': direct('json'),
    'GET through serverless-offline, csv': get('csv'),
    'GET through serverless-offline, json': get('json'),
    'GET through serverless-offline, csv, uncompressed': get('csv', identity),
    'GET through serverless-offline, json, uncompressed': get('json', identity),
  });
  const baseline = Object.values(medians)[0] ?? 1;
  console.log(`Export of 10,000 rows, sequential, median of ${EXPORTS} alternating rounds`);
  console.table(
    Object.entries(medians).map(([what, ms]) => ({
      what,
      ms: Number(ms.toFixed(1)),
      ratio: `${(ms / baseline).toFixed(2)}x`,
    })),
  );
}
