/**
 * A thousand tenants, one shape (issue 38), for npm run bench:templates, through the production
 * host (bin/build, started as `node <build>/bin/start.js`, on a throw-away embedded PostgreSQL
 * unless DATABASE_URL is set). Prints, each next to a baseline of the same run:
 *  - clone: a schema started from a 50-table template (POST /api/schema/create with `template`,
 *    structure only), next to making the same schema and its 50 tables one request at a time
 *    (POST /api/schema/create, then POST /api/table/create for each), rounds alternating, medians;
 *    and, as the floor any copy in one transaction stands on, the same 50 CREATE TABLEs sent by the
 *    schema's own login in one statement (pg.Client, no HTTP), rolled back.
 * A section is a function that prints its table and returns its target rows.
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

const SECTIONS: Array<(host: Host, databaseUrl: string) => Promise<Target[]>> = [cloneSection];

runBench('templates', async (databaseUrl) => {
  const host = await startHost(databaseUrl);
  const targets: Target[] = [];
  try {
    for (const section of SECTIONS) targets.push(...(await section(host, databaseUrl)));
  } finally {
    await host.stop();
  }
  console.log('\nTargets (issue 38), measured in this run');
  console.table(targets);
});
