/**
 * A tenant's own backup and restore (issue 38), for npm run bench:bundles, through the production
 * host on a throw-away embedded PostgreSQL 15 (the major Debian's pg_dump reads; with DATABASE_URL
 * and BENCH_SUPERUSER_URL set, a server pg_dump on the PATH can read). Prints, next to each other,
 * rounds alternating, medians:
 *  - ours: a backup of a tenant of BENCH_BUNDLE_TABLES (20) tables and BENCH_BUNDLE_ROWS (1M) rows
 *    in all (POST /api/backups, its manifest and every part downloaded), then restored into a new
 *    schema (POST /api/restores, every part sent, commit); parts three at a time, as the console
 *    moves them;
 *  - the baseline: `pg_dump -Fc -n <tenant>` of the same schema, then `pg_restore` of it into the
 *    same database (the tenant renamed aside meanwhile, untimed);
 * on a database with BENCH_OTHER_SCHEMAS (1,000) other schemas of 5 tables each, whose catalog
 * pg_dump reads before it filters.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import pg from 'pg';
import { logger } from '../lib/log';
import { atMost, basicAuth, type Host, median, runBench, shown, startHost, type Target } from './support';

logger.setLogLevel('WARN');

const run = promisify(execFile);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TABLES = Number(process.env.BENCH_BUNDLE_TABLES ?? 20);
const ROWS = Number(process.env.BENCH_BUNDLE_ROWS ?? 1_000_000);
const OTHER_SCHEMAS = Number(process.env.BENCH_OTHER_SCHEMAS ?? 1_000);
const TENANT = `bundle_${process.pid}`;
/** Parts in flight at once. */
const TRANSFERS = 3;

/** Kept alive between requests, as a client sending many parts would. */
const agent = new Agent({ keepAlive: true, maxSockets: TRANSFERS });

/** One request through node's own client (fetch's copies cost more than the host's work on 4 MiB parts). */
function api(host: Host, method: string, path: string, body?: unknown, type = 'application/json') {
  const payload = Buffer.isBuffer(body) || body === undefined ? body : Buffer.from(JSON.stringify(body));
  return new Promise<{ text: string; bytes: Buffer; json: () => ReturnType<typeof JSON.parse> }>(
    (resolve, reject) => {
      const sent = request(
        `${host.url}${path}`,
        {
          method,
          agent,
          headers: {
            authorization: basicAuth,
            'content-type': type,
            // As curl asks: the host would compress a part again for a client that accepts it.
            'accept-encoding': 'identity',
            ...(payload && { 'content-length': String(payload.length) }),
          },
        },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('error', reject);
          response.on('end', () => {
            const bytes = Buffer.concat(chunks);
            const text = bytes.toString('utf8');
            const status = response.statusCode ?? 0;
            if (status < 200 || status >= 300)
              reject(new Error(`${method} ${path}: ${status} ${text.slice(0, 300)}`));
            else resolve({ text, bytes, json: () => JSON.parse(text) });
          });
        },
      );
      sent.on('error', reject);
      sent.end(payload);
    },
  );
}

/** Parts 1 to `count`, TRANSFERS at a time, as the console moves them: their answers in order. */
async function eachPart<T>(count: number, transfer: (n: number) => Promise<T>): Promise<T[]> {
  const done: T[] = [];
  let next = 1;
  let failed = false;
  const lane = async () => {
    for (let n = next++; n <= count && !failed; n = next++) {
      done[n - 1] = await transfer(n).catch((error: unknown) => {
        failed = true;
        throw error;
      });
    }
  };
  await Promise.all(Array.from({ length: TRANSFERS }, lane));
  return done;
}

/** The other tenants: schemas of five tables, each with a key and an index, made as the superuser. */
async function otherSchemas(superuserUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    for (let i = 0; i < OTHER_SCHEMAS; i += 50) {
      const statements: string[] = [];
      for (let j = i; j < Math.min(i + 50, OTHER_SCHEMAS); j++) {
        statements.push(`CREATE SCHEMA other_${j}`);
        for (let t = 0; t < 5; t++)
          statements.push(
            `CREATE TABLE other_${j}.t${t} (id serial PRIMARY KEY, name text, at timestamptz DEFAULT now());
             CREATE INDEX ON other_${j}.t${t} (name)`,
          );
      }
      await client.query(statements.join(';\n'));
    }
  } finally {
    await client.end();
  }
}

/** The tenant: made through the API, its tables and rows by its own role (the admin's SQL in it). */
async function tenant(host: Host): Promise<void> {
  await api(host, 'POST', '/api/schema/create', { schemaName: TENANT, password: 'bench-bundle-1' });
  const perTable = Math.ceil(ROWS / TABLES);
  for (let t = 1; t <= TABLES; t++) {
    await api(host, 'POST', '/api/query', {
      schema: TENANT,
      sql: `CREATE TABLE t${t} (id bigint PRIMARY KEY, name text NOT NULL, amount numeric(12,2),
              at timestamptz DEFAULT now(), tags text[], active boolean DEFAULT true);
            CREATE INDEX t${t}_name ON t${t} (name);
            INSERT INTO t${t} (id, name, amount, tags)
              SELECT i, 'name ' || i || ' ' || md5(i::text), i * 1.25, ARRAY['a' || (i % 7), 'b']
                FROM generate_series(1, ${perTable}) i`,
    });
  }
}

interface Timing {
  backup: number;
  restore: number;
  bytes: number;
}

/** Ours: backed up and downloaded, then restored into a new schema; the copy is deleted after. */
async function ours(host: Host, round: number): Promise<Timing> {
  const q = `schema=${TENANT}`;
  const started = performance.now();
  const made = (await api(host, 'POST', `/api/backups?${q}`)).json();

  const manifestText = (await api(host, 'GET', `/api/backups/${made.id}?${q}`)).text;
  const manifest = JSON.parse(manifestText);
  const parts = await eachPart(
    manifest.parts.length,
    async (n) => (await api(host, 'GET', `/api/backups/${made.id}/parts/${n}?${q}`)).bytes,
  );
  const backedUp = performance.now();
  const copy = `${TENANT}_r${round}`;
  const opened = (await api(host, 'POST', '/api/restores', { schema: copy, mode: 'new', manifest })).json();
  await eachPart(parts.length, (n) =>
    api(
      host,
      'PUT',
      `/api/restores/${opened.id}/parts/${n}?schema=${copy}`,
      parts[n - 1],
      'application/octet-stream',
    ),
  );
  const outcome = (
    await api(host, 'POST', `/api/restores/${opened.id}/commit`, { schema: copy, password: 'bench-bundle-1' })
  ).json();
  const restored = performance.now();
  if (outcome.rows !== manifest.rows) throw new Error(`restored ${outcome.rows} rows of ${manifest.rows}`);
  await api(host, 'DELETE', `/api/backups/${made.id}?${q}`);
  await api(host, 'DELETE', `/api/schema/${copy}?cascade=true`);
  const bytes = manifest.parts.reduce((sum: number, part: { bytes: number }) => sum + part.bytes, 0);
  return { backup: backedUp - started, restore: restored - backedUp, bytes };
}

/** The baseline: pg_dump -n of the tenant, then pg_restore of it while the tenant is renamed aside. */
async function pgDump(superuserUrl: string, dir: string): Promise<Timing> {
  const file = join(dir, 'tenant.dump');
  const started = performance.now();
  await run('pg_dump', ['-Fc', '-n', TENANT, '-f', file, superuserUrl]);
  const dumped = performance.now();
  const admin = new pg.Client({ connectionString: superuserUrl });
  await admin.connect();
  try {
    await admin.query(`ALTER SCHEMA ${TENANT} RENAME TO ${TENANT}_aside`);
    const restoring = performance.now();
    await run('pg_restore', ['-d', superuserUrl, file]);
    const restored = performance.now();
    await admin.query(`DROP SCHEMA ${TENANT} CASCADE; ALTER SCHEMA ${TENANT}_aside RENAME TO ${TENANT}`);
    return { backup: dumped - started, restore: restored - restoring, bytes: statSync(file).size };
  } finally {
    await admin.end();
  }
}

runBench(
  'bundles',
  async (databaseUrl, bootstrapUrl) => {
    if (!bootstrapUrl) throw new Error('BENCH_SUPERUSER_URL: pg_dump and the other schemas need a superuser');
    // The superuser, in the service's database.
    const url = new URL(bootstrapUrl);
    url.pathname = new URL(databaseUrl).pathname;
    const superuserUrl = url.toString();
    const dir = mkdtempSync(join(tmpdir(), 'dbadmin-bundles-'));
    const host = await startHost(databaseUrl);
    const targets: Target[] = [];
    try {
      const { stdout } = await run('pg_dump', ['--version']);
      console.log(
        `${stdout.trim()}; ${OTHER_SCHEMAS} other schemas, ${TABLES} tables and ${ROWS} rows in the tenant`,
      );
      await otherSchemas(superuserUrl);
      await tenant(host);
      const mine: Timing[] = [];
      const theirs: Timing[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        mine.push(await ours(host, round));
        theirs.push(await pgDump(superuserUrl, dir));
      }
      const m = (values: Timing[], key: keyof Timing) => median(values.map((v) => v[key]));
      const total = (values: Timing[]) => median(values.map((v) => v.backup + v.restore));
      console.log(`\nA tenant's backup and restore, ${ROUNDS} rounds alternating, medians`);
      console.table([
        {
          what: 'dbadmin: POST /api/backups + download / POST /api/restores + parts + commit',
          'backup ms': Math.round(m(mine, 'backup')),
          'restore ms': Math.round(m(mine, 'restore')),
          'total ms': Math.round(total(mine)),
          MB: (m(mine, 'bytes') / 1e6).toFixed(1),
        },
        {
          what: 'baseline: pg_dump -Fc -n / pg_restore',
          'backup ms': Math.round(m(theirs, 'backup')),
          'restore ms': Math.round(m(theirs, 'restore')),
          'total ms': Math.round(total(theirs)),
          MB: (m(theirs, 'bytes') / 1e6).toFixed(1),
        },
      ]);
      targets.push(
        atMost('tenant backup + restore, vs pg_dump -n + pg_restore', total(mine) / total(theirs), 1),
        shown('backup alone, vs pg_dump -n', m(mine, 'backup') / m(theirs, 'backup')),
        shown('restore alone, vs pg_restore', m(mine, 'restore') / m(theirs, 'restore')),
      );
    } finally {
      await host.stop();
      rmSync(dir, { recursive: true, force: true });
    }
    console.log('\nTargets (issue 38), measured in this run');
    console.table(targets);
  },
  { major: '15' },
);
