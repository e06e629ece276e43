/**
 * The most database connections the Lambda deployment can hold at once. Each warm container of a
 * function keeps up to DB_PROCESS_CONNECTIONS open across all its pools (lib/db/pool), and a
 * function's reservedConcurrency caps its containers, so the deployment holds at most
 * Σ reservedConcurrency × DB_PROCESS_CONNECTIONS over the functions that reach the database.
 * `serverless package` (and so deploy) stops when a database function has no reservedConcurrency or
 * the sum passes DATABASE_MAX_CONNECTIONS (deploy/lambda-connections-plugin.cjs); `npm run build`
 * prints it (bin/build.ts).
 */
import { LAMBDA_PROCESS_CONNECTIONS } from '#lib/config';

type Env = Record<string, string | undefined>;

/**
 * serverless.yml as far as this count reads it (provider.environment, custom.lambdaConnections, each
 * function's reservedConcurrency and environment): resolved by packaging, or as written (bin/build).
 */
export interface LambdaService {
  provider: object;
  custom?: unknown;
  functions: Record<string, object>;
}

/** `value[key]` when value is an object with it; serverless.yml's shape is checked by reading it. */
const field = (value: unknown, key: string): unknown =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;

const record = (value: unknown): Record<string, unknown> =>
  typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};

export interface FunctionConnections {
  name: string;
  /** False for a function listed under custom.lambdaConnections.withoutDatabase. */
  database: boolean;
  /** Its reservedConcurrency; undefined when it has none (unbounded). */
  reserved: number | undefined;
  perContainer: number;
  connections: number;
}

export interface LambdaConnections {
  functions: FunctionConnections[];
  total: number;
  /** DATABASE_MAX_CONNECTIONS, when set. */
  limit: number | undefined;
  /** What stops packaging, one sentence each. */
  problems: string[];
}

/** `${env:NAME, 'fallback'}` as serverless resolves it; anything else is taken as written. */
const ENV_REFERENCE = /^\$\{env:([A-Za-z_]\w*)(?:\s*,\s*(?:'([^']*)'|"([^"]*)"|([^\s}]*)))?\s*\}$/;

function resolved(value: unknown, env: Env): unknown {
  if (typeof value !== 'string') return value;
  const match = ENV_REFERENCE.exec(value.trim());
  if (!match) return value;
  const [, name = '', single, double, bare] = match;
  return env[name] ?? single ?? double ?? bare;
}

/** Unset: an empty variable means the default, as lib/config reads it. */
const unset = (value: unknown) => value === undefined || value === null || value === '';

/**
 * A whole number at least `min` from a setting, undefined when unset; `problems` gets a sentence
 * when it is neither.
 */
function count(what: string, value: unknown, min: number, problems: string[]): number | undefined {
  if (unset(value)) return undefined;
  const text = String(value).trim();
  if (/^\d+$/.test(text) && Number(text) >= min) return Number(text);
  problems.push(`${what} is ${JSON.stringify(value)}, not a whole number of at least ${min}`);
  return undefined;
}

/** The names under custom.lambdaConnections.withoutDatabase, each checked against the functions. */
function functionsWithoutDatabase(service: LambdaService, problems: string[]): Set<string> {
  const listed = field(field(service.custom, 'lambdaConnections'), 'withoutDatabase') ?? [];
  const names = Array.isArray(listed) ? listed.map(String) : [];
  if (!Array.isArray(listed)) problems.push('custom.lambdaConnections.withoutDatabase is not a list');
  for (const name of names.filter((name) => !(name in service.functions)))
    problems.push(`custom.lambdaConnections.withoutDatabase names no function "${name}"`);
  return new Set(names);
}

/**
 * One function's share: its containers × its per-container budget (its own environment wins).
 * A database function with no reservedConcurrency at all goes to `unbounded`.
 */
function functionConnections(
  name: string,
  service: LambdaService,
  withoutDatabase: Set<string>,
  { env, problems, unbounded }: { env: Env; problems: string[]; unbounded: string[] },
): FunctionConnections {
  const definition = service.functions[name];
  const given = resolved(field(definition, 'reservedConcurrency'), env);
  const reserved = count(`${name}'s reservedConcurrency`, given, 0, problems);
  const environment = {
    ...record(field(service.provider, 'environment')),
    ...record(field(definition, 'environment')),
  };
  const perContainer =
    count(
      `${name}'s DB_PROCESS_CONNECTIONS`,
      resolved(environment.DB_PROCESS_CONNECTIONS, env),
      1,
      problems,
    ) ?? LAMBDA_PROCESS_CONNECTIONS;
  if (withoutDatabase.has(name)) return { name, database: false, reserved, perContainer: 0, connections: 0 };
  if (unset(given)) unbounded.push(name);
  return { name, database: true, reserved, perContainer, connections: (reserved ?? 0) * perContainer };
}

/**
 * The deployment's connections by function, their sum and what is wrong with them. `env` resolves
 * `${env:...}` references in a serverless.yml read as written; packaging passes them resolved.
 */
export function lambdaConnections(service: LambdaService, env: Env = process.env): LambdaConnections {
  const problems: string[] = [];
  const unbounded: string[] = [];
  const withoutDatabase = functionsWithoutDatabase(service, problems);
  const functions = Object.keys(service.functions).map((name) =>
    functionConnections(name, service, withoutDatabase, { env, problems, unbounded }),
  );
  const total = functions.reduce((sum, fn) => sum + fn.connections, 0);
  const limit = count(
    'DATABASE_MAX_CONNECTIONS',
    resolved(field(field(service.provider, 'environment'), 'DATABASE_MAX_CONNECTIONS'), env),
    1,
    problems,
  );
  if (unbounded.length > 0)
    problems.push(
      'no reservedConcurrency, so no bound on their connections, for functions that reach the ' +
        `database: ${unbounded.join(', ')}; give each one in serverless.yml (or ` +
        'DBADMIN_RESERVED_CONCURRENCY), or list a function that never connects under ' +
        'custom.lambdaConnections.withoutDatabase',
    );
  if (limit !== undefined && total > limit)
    problems.push(
      `the functions may hold ${total} database connections, more than DATABASE_MAX_CONNECTIONS ${limit}: ` +
        'lower reservedConcurrency (serverless.yml or DBADMIN_RESERVED_CONCURRENCY) or DB_PROCESS_CONNECTIONS, ' +
        'or move to a larger instance class and raise DATABASE_MAX_CONNECTIONS with it',
    );
  return { functions, total, limit, problems };
}

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/**
 * RDS for PostgreSQL's default max_connections is LEAST(DBInstanceClassMemory/9531392, 5000),
 * where DBInstanceClassMemory is the class's memory less what RDS's own processes use, an amount
 * AWS does not publish. 250 MiB and 2 % of the memory matches the SHOW max_connections people
 * report for 2, 4, 8 and 15.25 GiB classes (198, 413, 856, 1660) within 3 %.
 */
export function rdsDefaultMaxConnections(memoryGiB: number): number {
  const memory = memoryGiB * GiB;
  const classMemory = memory - 250 * MiB - 0.02 * memory;
  return Math.min(Math.floor(classMemory / 9_531_392), 5000);
}

/**
 * Slots a deployment cannot have: superuser_reserved_connections (3) and
 * rds.rds_superuser_reserved_connections (2), RDS's defaults, which only superusers may take; and
 * 15 for RDS's own sessions, the operator's psql and monitoring.
 */
export const RDS_RESERVED_CONNECTIONS = 20;

/** Instance classes to size against when DATABASE_MAX_CONNECTIONS is unset. */
export const RDS_INSTANCE_CLASSES = [
  { name: 'db.t4g.micro', memoryGiB: 1 },
  { name: 'db.t4g.small', memoryGiB: 2 },
  { name: 'db.t4g.medium', memoryGiB: 4 },
  { name: 'db.t4g.large', memoryGiB: 8 },
  { name: 'db.r6g.large', memoryGiB: 16 },
  { name: 'db.r6g.xlarge', memoryGiB: 32 },
] as const;

/** What a deployment may use on an instance class with the default parameter group. */
export const rdsUsableConnections = (memoryGiB: number) =>
  rdsDefaultMaxConnections(memoryGiB) - RDS_RESERVED_CONNECTIONS;

/** Columns padded to their widest cell, the first left-aligned, the rest right-aligned. */
function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  return rows.map((row) =>
    row
      .map((cell, column) =>
        column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd(),
  );
}

function instanceClassLines(total: number): string[] {
  return [
    `DATABASE_MAX_CONNECTIONS is unset: nothing checks ${total}. RDS for PostgreSQL, default parameters:`,
    ...table([
      ['  instance class', 'memory', 'max_connections', 'usable', `fits ${total}`],
      ...RDS_INSTANCE_CLASSES.map(({ name, memoryGiB }) => [
        `  ${name}`,
        `${memoryGiB} GiB`,
        `~${rdsDefaultMaxConnections(memoryGiB)}`,
        `~${rdsUsableConnections(memoryGiB)}`,
        total <= rdsUsableConnections(memoryGiB) ? 'yes' : 'no',
      ]),
    ]),
    "  max_connections: LEAST(DBInstanceClassMemory/9531392, 5000), RDS's own memory estimated;",
    `  usable: less ${RDS_RESERVED_CONNECTIONS} (3 + 2 superuser slots, 15 for RDS's sessions and yours).`,
    '  Set DATABASE_MAX_CONNECTIONS (SHOW max_connections less those) to have packaging check it.',
  ];
}

/**
 * The count as packaging and npm run build print it: a table by function, then the total against
 * DATABASE_MAX_CONNECTIONS or, unset, against instance classes. Its problems are not among them.
 */
export function connectionsReport(counted: LambdaConnections): string[] {
  const reservedTotal = counted.functions.reduce(
    (sum, fn) => sum + (fn.database ? (fn.reserved ?? 0) : 0),
    0,
  );
  const lines = [
    'Database connections on Lambda, at most: reservedConcurrency × DB_PROCESS_CONNECTIONS per function',
    ...table([
      ['  function', 'reserved concurrency', 'per container', 'connections'],
      ...counted.functions.map((fn) =>
        fn.database
          ? [
              `  ${fn.name}`,
              fn.reserved === undefined ? 'none' : String(fn.reserved),
              String(fn.perContainer),
              fn.reserved === undefined ? 'unbounded' : String(fn.connections),
            ]
          : [`  ${fn.name}`, 'no database', '', '0'],
      ),
      ['  all functions', String(reservedTotal), '', String(counted.total)],
    ]),
  ];
  if (counted.limit === undefined) lines.push(...instanceClassLines(counted.total));
  else {
    const spare = counted.limit - counted.total;
    lines.push(
      `${counted.total} of DATABASE_MAX_CONNECTIONS ${counted.limit}: ` +
        (spare >= 0 ? `${spare} to spare` : `${-spare} too many`),
    );
  }
  return lines;
}
