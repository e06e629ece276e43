/**
 * Many tenants (issue 36), for npm run bench:tenants: what BENCH_SCHEMAS tenant schemas cost, and
 * how the production host (bin/build, started as `node <build>/bin/start.js`, on a throw-away
 * embedded PostgreSQL unless DATABASE_URL is set) serves BENCH_TENANTS of them. Prints, each next
 * to a baseline of the same run:
 *  - schema creation as tenants accumulate: BENCH_SCHEMAS (10,000) schemas made one after the
 *    other by lib/admin/schemas' createSchema in this process; then 1,000 more schemas and 100
 *    keys (createKey) made in turn on a second, fresh server and on this one, the two p50s side
 *    by side (the targets); the last 1,000 of the run next to its first 1,000 is shown too;
 *  - every tenant warm: each tenant's anon key reading once (POST /api/query `select 1`, which runs
 *    on a session logged in as the schema's anon role), tenant after tenant, twice over; pass 2's
 *    p50 next to one warm tenant's, and what pass 2 adds to it next to a bare login of a tenant's
 *    role (pg.Client, no HTTP): with fewer connections than tenants, a tenant whose session was
 *    given back costs a login, and the target is that it costs no more than that;
 *  - a burst: one request per tenant, 500 in flight, right after a host restart (cold) and again
 *    (warm): the share answered 200, the 503 Busy (with Retry-After), any other 5xx or error as a
 *    failure, and the most PostgreSQL connections the host held meanwhile (pg_stat_activity, every
 *    25 ms) next to its budget (DB_PROCESS_CONNECTIONS as the host runs it);
 *  - the Lambda deployment's connections (bin/lambda-connections) for the shipped serverless.yml,
 *    next to what db.t4g.medium leaves usable.
 * A section is a function that prints its table and returns its target rows: another (a burst
 * through PgBouncer, say) is one more entry in SECTIONS' run.
 *
 * BENCH_SCHEMAS (10000) and BENCH_TENANTS (1000, at most BENCH_SCHEMAS - 1) set the counts. The
 * schemas are made one after the other, a minute or more per 1,000 and more as roles accumulate:
 * the time left is printed after the first 100 and every 1,000. Targets missed are reported, not
 * fatal: the exit code is 0 unless the bench itself breaks.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { readServiceConfig } from '../bin/build';
import { startTemporaryPostgres } from '../bin/embedded-postgres';
import {
  connectionsReport,
  type LambdaConnections,
  lambdaConnections,
  RDS_INSTANCE_CLASSES,
  rdsDefaultMaxConnections,
  rdsUsableConnections,
} from '../bin/lambda-connections';
import { createKey } from '../lib/admin/keys';
import { createSchema } from '../lib/admin/schemas';
import { type Config, parseConfig } from '../lib/config';
import { sessionPool, withServicePool } from '../lib/db/pool';
import { rolePassword, schemaRole } from '../lib/db/role-names';
import { sessionSettings } from '../lib/db/schema-roles';
import { logger } from '../lib/log';
import { pgbouncerInstalled, startPgBouncer } from '../test/support/pgbouncer';
import {
  atLeast,
  atMost,
  type Host,
  hostEnvironment,
  median,
  runBench,
  shown,
  startHost,
  type Target,
} from './support';

// createSchema and createKey run in this process: only their warnings, so the tables stay readable.
logger.setLogLevel('WARN');

const SCHEMAS = Number(process.env.BENCH_SCHEMAS ?? 10_000);
const TENANTS = Number(process.env.BENCH_TENANTS ?? 1_000);
/** Schemas in each end's window: the first and the last 1,000 (fewer in a small trial run). */
const SCHEMA_WINDOW = Math.min(1_000, Math.floor(SCHEMAS / 2));
/** Keys timed at each end: this many made as soon as this many schemas exist, and the last this many. */
const KEY_WINDOW = Math.min(100, Math.floor(TENANTS / 2));
const PROGRESS_EVERY = 1_000;
/** Reads of the warm tenant before the passes (a function's first request loads it). */
const WARM_UP = 20;
/** Pass 2 logs in directly as every this-many-th tenant's role: the floor of a request for a tenant not warm. */
const LOGIN_EVERY = 5;
const BURST_IN_FLIGHT = 500;
const POLL_MS = 25;
const RDS_CLASS = 'db.t4g.medium';

const count = (n: number) => n.toLocaleString('en-US');
const ms = (value: number) => Number(value.toFixed(1));
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? Number.NaN;
};

/** A target row with the baseline it was measured against, as printed. */
interface Held extends Target {
  baseline: string;
}

const held = ({ what, measured, target, met }: Target, baseline: string): Held => ({
  what,
  measured,
  baseline,
  target,
  met,
});

interface Tenant {
  schema: string;
  key: string;
}

/** What every section is given: the database, the host as it runs now and how to restart it. */
interface Bench {
  databaseUrl: string;
  /** The same server's superuser, when known (the embedded one): PgBouncer's lookup needs it. */
  superuserUrl: string | undefined;
  /** The settings the host runs with, as it parses them. */
  hostConfig: Config;
  tenants: Tenant[];
  /** A tenant outside `tenants`, read over and over as the warm baseline. */
  warm: Tenant;
  host: () => Host;
  restartHost: () => Promise<Host>;
}

const schemaName = (i: number) => `tenant_${String(i).padStart(5, '0')}`;

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

// --- Schema and key creation as tenants accumulate ------------------------------------------

interface Creation {
  schemaMs: number[];
  /** Keys made while KEY_WINDOW schemas existed. */
  keysAtStartMs: number[];
  /** Keys made once every schema existed, in the order made. */
  keysAtEndMs: number[];
  tenants: Tenant[];
  warm: Tenant;
  seconds: number;
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

/**
 * The time left, seconds: the schemas to go at the pace of the last 1,000, growing by as much per
 * 1,000 as it has grown on average since the first 1,000 (schema creation slows as roles
 * accumulate), and the keys still to make at the first keys' pace.
 */
function timeLeft(made: number, schemaMs: number[], keyMs: number[]): number {
  const blocks = Math.floor(made / PROGRESS_EVERY);
  const pace = mean(schemaMs.slice(-PROGRESS_EVERY));
  const growth = blocks > 1 ? (pace - mean(schemaMs.slice(0, PROGRESS_EVERY))) / (blocks - 1) : 0;
  const remaining = (SCHEMAS - made) / PROGRESS_EVERY;
  // Σ over the remaining blocks of (pace + growth × j) × a block's schemas.
  const schemas = PROGRESS_EVERY * (remaining * pace + (growth * remaining * (remaining + 1)) / 2);
  return (schemas + (TENANTS - KEY_WINDOW) * mean(keyMs)) / 1000;
}

/** A line after the first 100 schemas and every 1,000: the pace, and how long the rest should take. */
function progress(made: number, schemaMs: number[], keyMs: number[], startedAt: number): void {
  if ((made % PROGRESS_EVERY !== 0 && made !== 100) || made === SCHEMAS) return;
  const recent = schemaMs.slice(-PROGRESS_EVERY);
  const seconds = (performance.now() - startedAt) / 1000;
  // Before the second 1,000 the growth is unknown: the pace alone gives a floor.
  const floor = made < 2 * PROGRESS_EVERY ? 'at least ' : '';
  console.log(
    `schemas: ${count(made)} of ${count(SCHEMAS)} in ${seconds.toFixed(0)} s, p50 of the last ` +
      `${count(recent.length)} ${ms(median(recent))} ms; schemas and keys left: ` +
      `${floor}~${Math.ceil(timeLeft(made, schemaMs, keyMs) / 60)} min`,
  );
}

/**
 * BENCH_SCHEMAS schemas, one after the other, through the service's own code on one pool of the
 * service's login (the host is not running yet); anon keys for the first BENCH_TENANTS, the first
 * KEY_WINDOW made as soon as their schemas exist, the rest once every schema does; and one for the
 * last schema, the warm baseline's tenant.
 */
async function createTenants(config: Config): Promise<Creation> {
  const secret = config.DBADMIN_SECRET;
  const startedAt = performance.now();
  return withServicePool(config, 'bench-tenants', async (db) => {
    const keyOf = async (i: number, into?: number[]): Promise<Tenant> => {
      const schema = schemaName(i);
      let key = '';
      const took = await timed(async () => {
        ({ key } = await createKey(db, secret, { schema, keyName: 'bench', keyType: 'anon' }, undefined));
      });
      into?.push(took);
      return { schema, key };
    };
    const schemaMs: number[] = [];
    const keysAtStartMs: number[] = [];
    const keysAtEndMs: number[] = [];
    const tenants: Tenant[] = [];
    for (let i = 1; i <= SCHEMAS; i++) {
      const input = { schemaName: schemaName(i), password: `bench-password-${i}` };
      schemaMs.push(await timed(() => createSchema(db, secret, input, undefined)));
      if (i === KEY_WINDOW) for (let k = 1; k <= KEY_WINDOW; k++) tenants.push(await keyOf(k, keysAtStartMs));
      progress(i, schemaMs, keysAtStartMs, startedAt);
    }
    for (let k = KEY_WINDOW + 1; k <= TENANTS; k++) tenants.push(await keyOf(k, keysAtEndMs));
    const warm = await keyOf(SCHEMAS);
    const seconds = (performance.now() - startedAt) / 1000;
    return { schemaMs, keysAtStartMs, keysAtEndMs, tenants, warm, seconds };
  });
}

/** Schemas (and keys) made in turn on a fresh server and on the one with every schema. */
const PAIRED_SCHEMAS = Math.min(1_000, SCHEMAS);
const PAIRED_KEYS = Math.min(100, PAIRED_SCHEMAS);

interface Made {
  schemas: number[];
  keys: number[];
}

/**
 * Creation at BENCH_SCHEMAS next to creation at none, under the same load: a second, fresh
 * PostgreSQL (embedded, provisioned as the first), and schema after schema made on one then the
 * other in turn, then a key of each; a shared machine's drift then weighs on both alike, which a
 * comparison with the first schemas, made minutes earlier, cannot promise.
 */
async function pairedCreation(fullConfig: Config): Promise<{ fresh: Made; full: Made }> {
  const server = await startTemporaryPostgres('bench-fresh');
  try {
    const freshConfig = parseConfig(hostEnvironment(server.url));
    const secret = fullConfig.DBADMIN_SECRET;
    return await withServicePool(freshConfig, 'bench-fresh', (fresh) =>
      withServicePool(fullConfig, 'bench-full', async (full) => {
        const made = { fresh: { schemas: [], keys: [] } as Made, full: { schemas: [], keys: [] } as Made };
        const sides = [
          [fresh, made.fresh],
          [full, made.full],
        ] as const;
        for (let i = 1; i <= PAIRED_SCHEMAS; i++)
          for (const [db, into] of sides) {
            const input = { schemaName: `paired_${i}`, password: `bench-password-${i}` };
            into.schemas.push(await timed(() => createSchema(db, secret, input, undefined)));
          }
        for (let i = 1; i <= PAIRED_KEYS; i++)
          for (const [db, into] of sides) {
            const input = { schema: `paired_${i}`, keyName: 'bench', keyType: 'anon' as const };
            into.keys.push(await timed(() => createKey(db, secret, input, undefined)));
          }
        return made;
      }),
    );
  } finally {
    await server.stop();
  }
}

/** A table row of latencies: how many were timed, their median and 99th percentile. */
const latencyRow = (what: string, values: number[]) => ({
  what,
  made: values.length,
  'p50 ms': ms(median(values)),
  'p99 ms': ms(percentile(values, 99)),
});

function pairedTargets({ fresh, full }: { fresh: Made; full: Made }): Held[] {
  console.log(
    `\nSchema and key creation side by side: ${count(PAIRED_SCHEMAS)} schemas and ${PAIRED_KEYS} keys ` +
      `made in turn on a fresh server and on this one (${count(SCHEMAS)} schemas and more)`,
  );
  console.table([
    latencyRow('schemas, fresh server', fresh.schemas),
    latencyRow(`schemas, with ${count(SCHEMAS)} schemas`, full.schemas),
    latencyRow('anon keys, fresh server', fresh.keys),
    latencyRow(`anon keys, with ${count(SCHEMAS)} schemas`, full.keys),
  ]);
  const ratio = (a: number[], b: number[]) => median(a) / median(b);
  const at = count(SCHEMAS);
  return [
    held(
      atMost(
        `schema creation at ${at} schemas / at none, made in turn`,
        ratio(full.schemas, fresh.schemas),
        1.2,
      ),
      `fresh: p50 ${ms(median(fresh.schemas))} ms, at ${at}: ${ms(median(full.schemas))} ms`,
    ),
    held(
      atMost(`key creation at ${at} schemas / at none, made in turn`, ratio(full.keys, fresh.keys), 1.2),
      `fresh: p50 ${ms(median(fresh.keys))} ms, at ${at}: ${ms(median(full.keys))} ms`,
    ),
  ];
}

function creationTargets(made: Creation): Held[] {
  const first = made.schemaMs.slice(0, SCHEMA_WINDOW);
  const last = made.schemaMs.slice(-SCHEMA_WINDOW);
  const keysFirst = made.keysAtStartMs;
  const keysLast = made.keysAtEndMs.slice(-KEY_WINDOW);
  const w = count(SCHEMA_WINDOW);
  console.log(
    `\nSchema and key creation through lib/admin (createSchema, createKey) in this process, one after ` +
      `the other: ${count(SCHEMAS)} schemas and ${count(TENANTS + 1)} keys in ${made.seconds.toFixed(0)} s`,
  );
  console.table([
    latencyRow(`schemas 1–${w}`, first),
    latencyRow(`schemas ${count(SCHEMAS - SCHEMA_WINDOW + 1)}–${count(SCHEMAS)}`, last),
    latencyRow(`anon keys, the first ${KEY_WINDOW}, with ${KEY_WINDOW} schemas`, keysFirst),
    latencyRow(`anon keys, the last ${keysLast.length}, with ${count(SCHEMAS)} schemas`, keysLast),
  ]);
  return [
    held(
      shown(
        `schema creation, p50 of the last ${w} / the first ${w} (minutes apart)`,
        median(last) / median(first),
      ),
      `first ${w}: p50 ${ms(median(first))} ms, last: ${ms(median(last))} ms`,
    ),
    held(
      shown(
        `key creation, p50 of the last ${keysLast.length} (${count(SCHEMAS)} schemas) / the first ${KEY_WINDOW} (minutes apart)`,
        median(keysLast) / median(keysFirst),
      ),
      `first: p50 ${ms(median(keysFirst))} ms, last: ${ms(median(keysLast))} ms`,
    ),
  ];
}

// --- Through the host: a tenant's read ------------------------------------------------------

interface Answer {
  status: number;
  retryAfter: string | null;
  ms: number;
}

/** One read as the tenant's anon key: `select 1` on a session of its schema's anon role. */
async function keyRead(url: string, { key }: Tenant): Promise<Answer> {
  const started = performance.now();
  try {
    const response = await fetch(`${url}/api/query`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sql: 'select 1' }),
    });
    await response.arrayBuffer();
    return {
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      ms: performance.now() - started,
    };
  } catch {
    // No answer at all (a socket reset): status 0, a failure.
    return { status: 0, retryAfter: null, ms: performance.now() - started };
  }
}

/** Sequential reads, each of which must be answered 200; their latencies. */
async function readsInTurn(url: string, tenants: Tenant[]): Promise<number[]> {
  const latencies: number[] = [];
  for (const tenant of tenants) {
    const answer = await keyRead(url, tenant);
    if (answer.status !== 200) throw new Error(`${tenant.schema}: answered ${answer.status}`);
    latencies.push(answer.ms);
  }
  return latencies;
}

/**
 * Every tenant's key read once, tenant after tenant (pass 1: none seen by the host before; pass 2:
 * all seen, but at most the budget's worth of sessions can have stayed open). Pass 2 is
 * interleaved with what it is compared to, so that a shared machine's drift weighs on all alike:
 * after each of its reads, one warm tenant's read (the baseline), and after every
 * LOGIN_EVERY-th, a bare login of that tenant's role.
 */
async function everyTenantWarm({ host, tenants, warm, hostConfig }: Bench): Promise<Held[]> {
  const { url } = host();
  // serverless-offline loads a function on its first request: the warm tenant's reads load it.
  await readsInTurn(url, Array(WARM_UP).fill(warm));
  const pass1 = await readsInTurn(url, tenants);
  const pass2: number[] = [];
  const single: number[] = [];
  const logins: number[] = [];
  for (const [i, tenant] of tenants.entries()) {
    pass2.push(...(await readsInTurn(url, [tenant])));
    single.push(...(await readsInTurn(url, [warm])));
    if (i % LOGIN_EVERY === 0) logins.push(await bareLogin(hostConfig, tenant));
  }
  const baseline = median(single);
  const login = median(logins);
  console.log(
    `\nEvery tenant warm: POST /api/query select 1 with each of ${count(TENANTS)} tenants' anon keys, ` +
      'one request at a time, through the production host; pass 2 interleaved with the warm reads and bare logins',
  );
  const row = (what: string, values: number[]) => ({
    what,
    requests: values.length,
    'p50 ms': ms(median(values)),
    'p99 ms': ms(percentile(values, 99)),
    'vs warm tenant': `${(median(values) / baseline).toFixed(2)}x`,
  });
  console.table([
    row(`pass 1: ${count(TENANTS)} tenants, unseen by the host`, pass1),
    row(`pass 2: the same tenants again`, pass2),
    row('one warm tenant, after each pass 2 read (baseline)', single),
    row(`a bare login of every ${LOGIN_EVERY}th tenant's role and select 1, no HTTP (floor)`, logins),
  ]);
  return [
    held(
      atMost(
        'every tenant warm: pass 2 p50 over the warm one, in bare logins',
        (median(pass2) - baseline) / login,
        1.5,
      ),
      `one warm tenant: p50 ${ms(baseline)} ms; pass 2: ${ms(median(pass2))} ms; a bare login: ${ms(login)} ms`,
    ),
    held(
      shown('every tenant warm: p50 of pass 2 / one warm tenant', median(pass2) / baseline),
      `floor with one login per tenant: (warm + bare login) / warm = ${((baseline + login) / baseline).toFixed(2)}x`,
    ),
    held(
      shown('every tenant warm: p50 of pass 1 / one warm tenant', median(pass1) / baseline),
      `pass 1: p50 ${ms(median(pass1))} ms`,
    ),
  ];
}

/**
 * What a tenant's login costs by itself, the floor of a request for a tenant whose session was
 * given back: a new connection as the schema's anon role, with the host's settings, from a pool
 * of this process (lib/db/pool's sessionPool), one `select 1`, then closed.
 */
async function bareLogin(config: Config, { schema }: Tenant): Promise<number> {
  const role = schemaRole(schema, 'anon');
  const pool = sessionPool(config, {
    applicationName: 'bench-login',
    login: { user: role.role, password: rolePassword(config.DBADMIN_SECRET, role.role) },
    settings: Object.fromEntries(sessionSettings(role)),
  });
  const started = performance.now();
  const session = await pool.connect();
  await session.query('select 1');
  const took = performance.now() - started;
  session.release(true);
  await pool.close();
  return took;
}

// --- A burst of tenants -------------------------------------------------------------------

/**
 * The host's connections to the database, by application_name, polled until stopped: the peak.
 * `everyLogin`: every client backend but the poll's own, for connections made by a pooler.
 */
function watchConnections(databaseUrl: string, { everyLogin = false } = {}) {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'bench-poll' });
  let peak = { total: 0, byName: '' };
  let stopped = false;
  let failure: unknown;
  // A lost connection fails its next query, which ends the watch: the failure is thrown by stop.
  client.on('error', () => undefined);
  const watching = (async () => {
    await client.connect();
    try {
      while (!stopped) {
        const { rows } = await client.query<{ name: string; n: number }>(
          `SELECT application_name AS name, count(*)::int AS n FROM pg_catalog.pg_stat_activity
            WHERE datname = current_database() AND backend_type = 'client backend'
              AND ${everyLogin ? 'pid <> pg_backend_pid()' : "application_name LIKE 'dbadmin%'"}
            GROUP BY 1 ORDER BY 1`,
        );
        const total = rows.reduce((sum, r) => sum + r.n, 0);
        if (total > peak.total) peak = { total, byName: rows.map((r) => `${r.name} ${r.n}`).join(', ') };
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      }
    } finally {
      await client.end();
    }
  })().catch((error: unknown) => {
    failure = error;
  });
  return {
    stop: async () => {
      stopped = true;
      await watching;
      if (failure) throw failure;
      return peak;
    },
  };
}

interface Burst {
  when: string;
  answers: Answer[];
  seconds: number;
  peak: { total: number; byName: string };
}

/** One read per tenant, BURST_IN_FLIGHT at a time, while the host's connections are watched. */
async function burst(
  when: string,
  url: string,
  databaseUrl: string,
  tenants: Tenant[],
  watch: { everyLogin?: boolean } = {},
): Promise<Burst> {
  const watcher = watchConnections(databaseUrl, watch);
  const answers: Answer[] = [];
  let next = 0;
  const started = performance.now();
  const sender = async () => {
    while (next < tenants.length) answers.push(await keyRead(url, tenants[next++] as Tenant));
  };
  await Promise.all(Array.from({ length: Math.min(BURST_IN_FLIGHT, tenants.length) }, sender));
  const seconds = (performance.now() - started) / 1000;
  return { when, answers, seconds, peak: await watcher.stop() };
}

const isBusy = (a: Answer) => a.status === 503 && a.retryAfter !== null;
/** No answer, or a 5xx that is not Busy with its Retry-After. */
const isFailure = (a: Answer) => a.status === 0 || (a.status >= 500 && !isBusy(a));

/** The burst right after a restart (no tenant seen by this host process), then again, warm. */
async function tenantBurst({ restartHost, databaseUrl, tenants, warm, hostConfig }: Bench): Promise<Held[]> {
  const { url } = await restartHost();
  // The function's bundle loaded, by a tenant outside the burst: cold means cold tenants.
  await readsInTurn(url, Array(WARM_UP).fill(warm));
  const runs = [
    await burst('cold, after a host restart', url, databaseUrl, tenants),
    await burst('warm, the same tenants again', url, databaseUrl, tenants),
  ];
  const budget = hostConfig.DB_PROCESS_CONNECTIONS;
  console.log(
    `\nA burst: ${count(TENANTS)} tenants' anon keys, one POST /api/query select 1 each, ` +
      `${BURST_IN_FLIGHT} in flight, through the production host ` +
      `(DB_PROCESS_CONNECTIONS ${budget}, DB_POOL_MAX ${hostConfig.DB_POOL_MAX})`,
  );
  console.table(runs.map(burstRow));
  return runs.flatMap((run) => burstTargets(run, budget));
}

/**
 * The same bursts through the real PgBouncer in transaction mode (Debian's, the container's
 * settings) with `max_db_connections` 50: every server connection of every login counted.
 */
async function pgbouncerBurst({ databaseUrl, superuserUrl, tenants, warm }: Bench): Promise<Held[]> {
  if (!pgbouncerInstalled() || !superuserUrl) {
    console.log(
      '\nThrough PgBouncer: skipped (no /usr/sbin/pgbouncer, or no superuser URL: BENCH_SUPERUSER_URL)',
    );
    return [];
  }
  const cap = 50;
  const pooler = await startPgBouncer({ databaseUrl, superuserUrl, maxDbConnections: cap });
  const host = await startHost(pooler.url, { DATABASE_POOL_MODE: 'transaction' });
  try {
    await readsInTurn(host.url, Array(WARM_UP).fill(warm));
    const everyLogin = { everyLogin: true };
    const runs = [
      await burst('through PgBouncer, cold', host.url, databaseUrl, tenants, everyLogin),
      await burst('through PgBouncer, warm', host.url, databaseUrl, tenants, everyLogin),
    ];
    console.log(
      `\nThe bursts through PgBouncer ${pooler.version} in transaction mode, max_db_connections ${cap} ` +
        '(peak: every server connection to the database)',
    );
    console.table(runs.map(burstRow));
    return runs.flatMap(({ when, answers, peak }) => {
      const ok = (100 * answers.filter((a) => a.status === 200).length) / answers.length;
      return [
        held(atLeast(`burst ${when}: answered 200`, ok, 100, '%'), `${answers.length} requests`),
        held(
          atMost(`burst ${when}: peak server connections`, peak.total, cap, 'connections'),
          `max_db_connections ${cap}`,
        ),
      ];
    });
  } finally {
    await host.stop();
    await pooler.stop();
  }
}

function burstRow({ when, answers, seconds, peak }: Burst) {
  const latencies = answers.map((a) => a.ms);
  return {
    burst: when,
    '200 OK': answers.filter((a) => a.status === 200).length,
    '503 Busy': answers.filter(isBusy).length,
    failed: answers.filter(isFailure).length,
    other: answers.filter((a) => a.status !== 200 && !isBusy(a) && !isFailure(a)).length,
    s: Number(seconds.toFixed(2)),
    'p50 ms': ms(median(latencies)),
    'p99 ms': ms(percentile(latencies, 99)),
    'peak connections': peak.total,
    'at the peak': peak.byName,
  };
}

/** Issue 36: at least 95 % answered 200, no failure, never more connections than the budget. */
function burstTargets({ when, answers, peak }: Burst, budget: number): Held[] {
  const ok = (100 * answers.filter((a) => a.status === 200).length) / answers.length;
  const failed = answers.filter(isFailure).length;
  const requests = `${answers.length} requests`;
  return [
    held(
      atLeast(`burst ${when}: answered 200`, ok, 95, '%'),
      `${requests}, ${answers.filter(isBusy).length} 503 Busy`,
    ),
    held(
      atMost(`burst ${when}: failures (no answer, or a 5xx but 503 Busy)`, failed, 0, 'answers'),
      requests,
    ),
    held(
      atMost(`burst ${when}: peak PostgreSQL connections of the host`, peak.total, budget, 'connections'),
      `budget: DB_PROCESS_CONNECTIONS ${budget}`,
    ),
  ];
}

// --- The Lambda deployment's total ----------------------------------------------------------

/** Σ reservedConcurrency × DB_PROCESS_CONNECTIONS, as its terms: containers × per container. */
function formula(counted: LambdaConnections): string {
  const containers = new Map<number, number>();
  for (const fn of counted.functions.filter((f) => f.database))
    containers.set(fn.perContainer, (containers.get(fn.perContainer) ?? 0) + (fn.reserved ?? 0));
  const terms = [...containers].map(([per, reserved]) => `${reserved} containers × ${per}`);
  return `Σ reservedConcurrency × DB_PROCESS_CONNECTIONS = ${terms.join(' + ')} = ${counted.total}`;
}

/** The shipped serverless.yml as packaging counts it, with no setting of this shell's. */
function lambdaTotal(): Held[] {
  const counted = lambdaConnections(readServiceConfig(), {});
  const instance = RDS_INSTANCE_CLASSES.find((c) => c.name === RDS_CLASS);
  if (!instance) throw new Error(`bin/lambda-connections has no ${RDS_CLASS}`);
  const usable = rdsUsableConnections(instance.memoryGiB);
  console.log('\nThe Lambda deployment of the shipped serverless.yml (bin/lambda-connections, no settings)');
  for (const line of connectionsReport(counted)) console.log(line);
  for (const problem of counted.problems) console.log(`serverless package would stop: ${problem}`);
  console.log(formula(counted));
  return [
    held(
      atMost(`Lambda connections at most, vs ${RDS_CLASS}'s usable`, counted.total, usable, 'connections'),
      `${RDS_CLASS}: usable ~${usable} of max_connections ~${rdsDefaultMaxConnections(instance.memoryGiB)}`,
    ),
  ];
}

// --- The run --------------------------------------------------------------------------------

/** Through the host, one section after another; each prints its table and returns its targets. */
const SECTIONS: Array<(bench: Bench) => Promise<Held[]>> = [everyTenantWarm, tenantBurst];

// The warm baseline's tenant is a schema beyond the tenants read in the passes and the bursts.
if (!(TENANTS >= 2 && TENANTS < SCHEMAS))
  throw new Error(`BENCH_TENANTS (${TENANTS}) must be at least 2 and below BENCH_SCHEMAS (${SCHEMAS})`);

runBench('bench-tenants', async (databaseUrl, superuserUrl) => {
  // The host's own settings, as it parses them: its budget is what the burst is held to.
  const hostConfig = parseConfig(hostEnvironment(databaseUrl));
  console.log(
    `Creating ${count(SCHEMAS)} schemas (${count(TENANTS)} tenants with keys); ` +
      `progress after 100 and every ${count(PROGRESS_EVERY)}`,
  );
  const made = await createTenants(hostConfig);
  const targets = [...pairedTargets(await pairedCreation(hostConfig)), ...creationTargets(made)];
  let host = await startHost(databaseUrl);
  const bench: Bench = {
    databaseUrl,
    superuserUrl,
    hostConfig,
    tenants: made.tenants,
    warm: made.warm,
    host: () => host,
    restartHost: async () => {
      await host.stop();
      host = await startHost(databaseUrl);
      return host;
    },
  };
  try {
    for (const section of SECTIONS) targets.push(...(await section(bench)));
  } finally {
    await host.stop();
  }
  // With the host's own connections gone: every server connection is then PgBouncer's.
  targets.push(...(await pgbouncerBurst(bench)));
  targets.push(...lambdaTotal());
  console.log('\nTargets (issue 36), measured in this run');
  console.table(targets);
});
