/**
 * The SQL editor's first rows (issue 39), for npm run bench:sql, through the production host
 * (bin/build, started as `node <build>/bin/start.js`, on a throw-away embedded PostgreSQL unless
 * DATABASE_URL is set). Prints, rounds alternating, medians:
 *  - POST /api/query `SELECT * FROM big` with maxRows 1000, as the console sends it, on a
 *    1,000,000-row table: its first 1,000 rows;
 *  - baseline: the grid's 1,000-row page read of the same table (GET /api/table/big?limit=1000);
 *  - for scale: the same SELECT without maxRows, which reads the whole table (and is refused
 *    past QUERY_MAX_ROWS, 413): what the editor did before.
 * Target: the editor's first 1,000 rows in under 2x the page read.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { logger } from '../lib/log';
import { atMost, basicAuth, type Host, median, runBench, shown, startHost } from './support';

logger.setLogLevel('WARN');

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const ROWS = 1_000_000;
const SCHEMA = `sqlbench_${process.pid}`;

/** A request as the admin: its status and time; anything but `expect` is an error naming it. */
async function timed(host: Host, method: string, path: string, body: unknown, expect: number) {
  const start = performance.now();
  const response = await fetch(`${host.url}${path}`, {
    method,
    headers: { authorization: basicAuth, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const ms = performance.now() - start;
  if (response.status !== expect)
    throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
  return { ms, text };
}

async function seed(host: Host, databaseUrl: string): Promise<void> {
  await timed(host, 'POST', '/api/schema/create', { schemaName: SCHEMA, password: 'bench-sql-1' }, 201);
  const url = new URL(databaseUrl);
  url.username = `${SCHEMA}_user`;
  url.password = 'bench-sql-1';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(`
      CREATE TABLE big (id bigint PRIMARY KEY, name text NOT NULL, qty int NOT NULL, price numeric(10,2),
                        created_at timestamptz NOT NULL DEFAULT now());
      INSERT INTO big SELECT i, 'item ' || i, i % 100, (i % 1000) / 10.0, now() - i * interval '1 second'
        FROM generate_series(1, ${ROWS}) i;
      ANALYZE big`);
  } finally {
    await client.end();
  }
}

runBench('sql-editor', async (databaseUrl) => {
  const host = await startHost(databaseUrl);
  try {
    await seed(host, databaseUrl);
    const editor = () =>
      timed(host, 'POST', '/api/query', { sql: 'SELECT * FROM big', schema: SCHEMA, maxRows: 1000 }, 200);
    const page = () => timed(host, 'GET', `/api/table/big?schema=${SCHEMA}&limit=1000`, undefined, 200);
    const whole = () => timed(host, 'POST', '/api/query', { sql: 'SELECT * FROM big', schema: SCHEMA }, 413);
    // Each path once before timing: the functions' first requests load them.
    const first = JSON.parse((await editor()).text) as {
      results: Array<{ rows: unknown[] }>;
      truncated: boolean;
    };
    if (first.results[0]?.rows.length !== 1000 || !first.truncated)
      throw new Error('the editor did not show 1,000 rows of more');
    await page();
    await whole();
    const editorMs: number[] = [];
    const pageMs: number[] = [];
    const wholeMs: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      editorMs.push((await editor()).ms);
      pageMs.push((await page()).ms);
      wholeMs.push((await whole()).ms);
    }
    const [e, p, w] = [median(editorMs), median(pageMs), median(wholeMs)];
    console.log(
      `\nFirst rows of SELECT * on a ${ROWS.toLocaleString()}-row table, ${ROUNDS} rounds alternating, medians`,
    );
    console.table([
      { what: 'POST /api/query, maxRows 1000 (the SQL editor)', 'median ms': Math.round(e) },
      { what: 'baseline: GET /api/table/big?limit=1000 (a page read)', 'median ms': Math.round(p) },
      { what: 'for scale: POST /api/query without maxRows (reads it all, 413)', 'median ms': Math.round(w) },
    ]);
    console.log('\nTargets (issue 39), measured in this run');
    console.table([
      atMost('the editor’s first 1,000 rows against a 1,000-row page read', e / p, 2),
      shown('reading it all (before) against the editor’s first rows', w / e),
    ]);
  } finally {
    await host.stop();
  }
});
