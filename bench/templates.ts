/**
 * A thousand tenants, one shape (issue 38), for npm run bench:templates, through the production
 * host (bin/build, started as `node <build>/bin/start.js`, on a throw-away embedded PostgreSQL
 * unless DATABASE_URL is set). Prints, each next to a baseline of the same run:
 *  - clone: a schema started from a 50-table template (POST /api/schema/create with `template`,
 *    structure only), next to making the same schema and its 50 tables one request at a time
 *    (POST /api/schema/create, then POST /api/table/create for each), rounds alternating, medians;
 *    and, as the floor any copy in one transaction stands on, the same 50 CREATE TABLEs sent by the
 *    schema's own login in one statement (pg.Client, no HTTP), rolled back.
 *  - migration: one `ALTER TABLE ... ADD COLUMN` across BENCH_MIGRATION_SCHEMAS (1,000) schemas (a
 *    template and its copies), 10 of them without the table and one whose tenant holds a lock on
 *    it, run in slices (POST /api/migrations/{id}/run); the host is killed (SIGKILL) in the middle
 *    of a slice, started again, and the slices go on until done. Printed: schemas per second, and
 *    the count of schemas applied, failed with their reason, and half-changed (a column without
 *    its index, or applied without its column), which must be none;
 *  - drift: the fingerprints of those 1,000 schemas in one request (GET /api/drift), next to
 *    GET /api/health, and how many copies differ from their template (those the migration failed
 *    in).
 * A section is a function that prints its table and returns its target rows; the host it is
 * given may be replaced (the migration kills it), so sections take a holder.
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { logger } from '../lib/log';
import {
  atLeast,
  atMost,
  basicAuth,
  type Host,
  median,
  runBench,
  shown,
  startHost,
  type Target,
} from './support';

logger.setLogLevel('WARN');

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TEMPLATE_TABLES = 50;
const MIGRATION_SCHEMAS = Number(process.env.BENCH_MIGRATION_SCHEMAS ?? 1_000);
const MISSING_TABLE = 10;
const MADE_AT_ONCE = 4;

let serial = 0;
const fresh = (prefix: string) => `${prefix}_${process.pid}_${++serial}`;

/** One request to the host as the admin; its answer's body, or a thrown error naming it. */
async function api(host: Host, method: string, path: string, body?: unknown): Promise<unknown> {
  const response = await fetch(`${host.url}${path}`, {
    method,
    headers: { authorization: basicAuth, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** The columns of the template's table `i`: a key, text, a number with a default, a time, a flag. */
const tableColumns = (i: number) => [
  { name: 'id', type: 'SERIAL', primaryKey: true },
  { name: `name_${i}`, type: 'TEXT', nullable: false },
  { name: 'amount', type: 'NUMERIC', defaultValue: 0 },
  { name: 'created_at', type: 'TIMESTAMPTZ', defaultValue: 'now()' },
  { name: 'active', type: 'BOOLEAN', defaultValue: true },
];

/** A schema and its TEMPLATE_TABLES tables, one request at a time: the baseline, and the template. */
async function oneByOne(host: Host, schemaName: string): Promise<void> {
  await api(host, 'POST', '/api/schema/create', { schemaName, password: 'bench-template-1' });
  for (let i = 1; i <= TEMPLATE_TABLES; i++) {
    await api(host, 'POST', '/api/table/create', {
      tableName: `table_${i}`,
      schema: schemaName,
      columns: tableColumns(i),
    });
  }
}

const timed = async (work: () => Promise<unknown>) => {
  const start = performance.now();
  await work();
  return performance.now() - start;
};

/** The tables' DDL as PostgreSQL alone runs it: the schema's login, one statement, rolled back. */
async function ddlAlone(host: Host, databaseUrl: string): Promise<number> {
  const schemaName = fresh('alone');
  await api(host, 'POST', '/api/schema/create', { schemaName, password: 'bench-template-1' });
  const url = new URL(databaseUrl);
  url.username = `${schemaName}_user`;
  url.password = 'bench-template-1';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  const tables = Array.from(
    { length: TEMPLATE_TABLES },
    (_, i) =>
      `CREATE TABLE table_${i + 1} (id serial PRIMARY KEY, name_${i + 1} text NOT NULL, amount numeric DEFAULT 0,
         created_at timestamptz DEFAULT now(), active boolean DEFAULT true)`,
  );
  try {
    await client.query('BEGIN');
    const ms = await timed(() => client.query(tables.join(';\n')));
    await client.query('ROLLBACK');
    return ms;
  } finally {
    await client.end();
  }
}

async function cloneSection(host: Host, databaseUrl: string): Promise<Target[]> {
  const template = fresh('template');
  await oneByOne(host, template);
  const clone = () =>
    api(host, 'POST', '/api/schema/create', {
      schemaName: fresh('clone'),
      password: 'bench-clone-1',
      template,
    });
  // Each path once before timing: the functions' first requests load them.
  await clone();
  await oneByOne(host, fresh('warm'));
  const cloned: number[] = [];
  const byHand: number[] = [];
  const alone: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    cloned.push(await timed(clone));
    byHand.push(await timed(() => oneByOne(host, fresh('byhand'))));
    alone.push(await ddlAlone(host, databaseUrl));
  }
  const [clonedMs, byHandMs, aloneMs] = [median(cloned), median(byHand), median(alone)];
  console.log(
    `\nClone of a ${TEMPLATE_TABLES}-table template (structure), ${ROUNDS} rounds alternating, medians`,
  );
  console.table([
    { what: `POST /api/schema/create with template`, 'median ms': Math.round(clonedMs) },
    {
      what: `baseline: POST /api/schema/create + ${TEMPLATE_TABLES} x POST /api/table/create`,
      'median ms': Math.round(byHandMs),
    },
    {
      what: `floor: the ${TEMPLATE_TABLES} CREATE TABLEs alone, one statement, no HTTP`,
      'median ms': Math.round(aloneMs),
    },
  ]);
  return [
    atMost(`clone of a ${TEMPLATE_TABLES}-table template`, clonedMs, 1000, 'ms'),
    atLeast(`clone against ${TEMPLATE_TABLES} table requests`, byHandMs / clonedMs, 5),
    shown(`the most any one-transaction copy could reach (requests / DDL alone)`, byHandMs / aloneMs),
  ];
}

/** A tenant's own login, as its password was set. */
async function tenantLogin(databaseUrl: string, schema: string, password: string): Promise<pg.Client> {
  const url = new URL(databaseUrl);
  url.username = `${schema}_user`;
  url.password = password;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  return client;
}

/** Runs `work` on every item, `width` at a time. */
async function eachAtOnce<T>(items: T[], width: number, work: (item: T) => Promise<unknown>): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) await work(items[i] as T);
  };
  await Promise.all(Array.from({ length: width }, lane));
}

interface HostHolder {
  host: Host;
}

async function migrationSection(holder: HostHolder, databaseUrl: string): Promise<Target[]> {
  const template = fresh('mtemplate');
  const password = 'bench-tenant-1';
  await api(holder.host, 'POST', '/api/schema/create', { schemaName: template, password });
  const owner = await tenantLogin(databaseUrl, template, password);
  await owner.query(
    "CREATE TABLE items (id serial PRIMARY KEY, name text); INSERT INTO items (name) VALUES ('a')",
  );
  await owner.end();
  const copies = Array.from({ length: MIGRATION_SCHEMAS - 1 }, () => fresh('mtenant'));
  const making = performance.now();
  await eachAtOnce(copies, MADE_AT_ONCE, (schemaName) =>
    api(holder.host, 'POST', '/api/schema/create', { schemaName, password, template, withData: true }),
  );
  console.log(
    `\n${copies.length} copies of the template made in ${((performance.now() - making) / 1000).toFixed(1)} s`,
  );
  // Planted: schemas without the table, and one whose tenant holds a lock on it throughout.
  const missing = copies.slice(0, MISSING_TABLE);
  for (const schema of missing) {
    const client = await tenantLogin(databaseUrl, schema, password);
    await client.query('DROP TABLE items');
    await client.end();
  }
  const lockedSchema = copies[MISSING_TABLE] as string;
  const holderSession = await tenantLogin(databaseUrl, lockedSchema, password);
  await holderSession.query('BEGIN; LOCK TABLE items IN ACCESS SHARE MODE');

  const created = (await api(holder.host, 'POST', '/api/migrations', {
    name: fresh('add-note'),
    sql: 'ALTER TABLE items ADD COLUMN note text; CREATE INDEX items_note ON items (note)',
    target: { template },
    lockTimeoutMs: 500,
    concurrency: 8,
  })) as { id: string };
  type Progress = { done: boolean; counts: Record<string, number>; schemasPerSecond: number | null };
  const slice = (budgetMs: number) =>
    api(holder.host, 'POST', `/api/migrations/${created.id}/run`, { budgetMs }) as Promise<Progress>;
  const started = performance.now();
  let progress = await slice(2_000);
  // A crash in the middle of a slice: the host is killed while schemas run, and started again.
  const inFlight = slice(10_000).catch(() => undefined);
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  const killedAt = performance.now();
  await holder.host.kill();
  await inFlight;
  holder.host = await startHost(databaseUrl);
  const restart = performance.now() - killedAt;
  for (let calls = 0; !progress.done && calls < 300; calls++) {
    // Schemas the killed host had claimed but not begun wait for their claims to lapse.
    if (calls > 0 && progress.counts.pending === 0)
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    progress = await slice(10_000);
  }
  const seconds = (performance.now() - started - restart) / 1000;
  const waited = progress.counts.running === 0 ? '' : ' (not done: schemas still running)';
  await holderSession.query('ROLLBACK');
  await holderSession.end();

  const service = new pg.Client({ connectionString: databaseUrl });
  await service.connect();
  const { rows } = await service.query<{ state: string; changed: string; n: number }>(
    `SELECT s.state,
            CASE WHEN a.attname IS NOT NULL AND i.oid IS NOT NULL THEN 'column and index'
                 WHEN a.attname IS NULL AND i.oid IS NULL THEN 'unchanged' ELSE 'half' END AS changed,
            count(*)::int AS n
       FROM _dbadmin.tenant_migration_schemas s
       JOIN pg_catalog.pg_namespace n ON n.nspname = s.schema_name
       LEFT JOIN pg_catalog.pg_class t ON t.relnamespace = n.oid AND t.relname = 'items'
       LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid = t.oid AND a.attname = 'note' AND NOT a.attisdropped
       LEFT JOIN pg_catalog.pg_class i ON i.relnamespace = n.oid AND i.relname = 'items_note'
      WHERE s.migration_id = $1 GROUP BY 1, 2 ORDER BY 1, 2`,
    [created.id],
  );
  await service.end();
  console.log(
    `\nMigration across ${MIGRATION_SCHEMAS} schemas (${MISSING_TABLE} without the table, 1 locked), killed and resumed`,
  );
  console.table(rows);
  const count = (state: string, changed: string) =>
    rows.filter((r) => r.state === state && r.changed === changed).reduce((sum, r) => sum + r.n, 0);
  const rate = (progress.counts.applied ?? 0) / seconds;
  console.log(
    `${seconds.toFixed(1)} s of slices, claims left by the killed host lapsing included (the ${(restart / 1000).toFixed(1)} s restart left out): ${rate.toFixed(0)} schemas/s${waited}`,
  );
  const accounted = count('applied', 'column and index') + count('failed', 'unchanged');
  const prints = await fingerprintTargets(holder.host, template, progress.counts.failed ?? 0);
  return [
    ...prints,
    atLeast(
      `migration: schemas applied or failed with a reason, of ${MIGRATION_SCHEMAS}`,
      accounted,
      MIGRATION_SCHEMAS,
      '',
    ),
    atMost(
      'migration: schemas half-changed or applied without the change',
      MIGRATION_SCHEMAS - accounted,
      0,
      '',
    ),
    atLeast(
      'migration: failed, as planted (no table, a lock held)',
      progress.counts.failed ?? 0,
      MISSING_TABLE + 1,
      '',
    ),
    shown('migration: schemas per second', rate, ' schemas/s'),
  ];
}

/**
 * Drift at a glance: the fingerprints of the template and its copies (GET /api/drift), timed,
 * next to the trivial GET /api/health through the same host; after the migration the copies
 * that failed it (no table, a lock held) are the ones that drifted.
 */
async function fingerprintTargets(host: Host, template: string, failed: number): Promise<Target[]> {
  type Prints = { schemas: Array<{ drifted: boolean | null }> };
  const read = () => api(host, 'GET', `/api/drift?template=${template}`) as Promise<Prints>;
  const health = () => api(host, 'GET', '/api/health');
  await read();
  const reads: number[] = [];
  const healths: number[] = [];
  let answer: Prints = { schemas: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const start = performance.now();
    answer = await read();
    reads.push(performance.now() - start);
    healths.push(await timed(health));
  }
  const drifted = answer.schemas.filter((s) => s.drifted === true).length;
  console.log(
    `\nDrift fingerprints of ${answer.schemas.length} schemas in one request, ${ROUNDS} rounds, medians`,
  );
  console.table([
    {
      what: `GET /api/drift?template=..., ${answer.schemas.length} schemas`,
      'median ms': Math.round(median(reads)),
    },
    { what: 'baseline: GET /api/health', 'median ms': Math.round(median(healths)) },
    { what: 'drifted from the template (the copies the migration failed in)', 'median ms': drifted },
  ]);
  return [
    atMost(`drift fingerprints for ${answer.schemas.length} schemas, one request`, median(reads), 1000, 'ms'),
    atLeast('drifted copies found, of those the migration failed in', drifted, failed, ''),
  ];
}

const SECTIONS: Array<(holder: HostHolder, databaseUrl: string) => Promise<Target[]>> = [
  (holder, databaseUrl) => cloneSection(holder.host, databaseUrl),
  migrationSection,
];

runBench('templates', async (databaseUrl) => {
  const holder: HostHolder = { host: await startHost(databaseUrl) };
  const targets: Target[] = [];
  try {
    for (const section of SECTIONS) targets.push(...(await section(holder, databaseUrl)));
  } finally {
    await holder.host.stop();
  }
  console.log('\nTargets (issue 38), measured in this run');
  console.table(targets);
});
