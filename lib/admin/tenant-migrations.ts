import { createHash, randomUUID } from 'node:crypto';
import type pg from 'pg';
import { type PlannedStatement, planStatements } from '#lib/admin/migration-plan';
import { getConfig } from '#lib/config';
import type { AuditDraft } from '#lib/db/audit-log';
import { isSystemSchema, type SchemaAccess } from '#lib/db/executor';
import { NOT_TENANT_SCHEMAS } from '#lib/db/own-schemas';
import { pgErrorOf } from '#lib/db/pg-errors';
import { withTransaction } from '#lib/db/pool';
import { inPlainTransaction } from '#lib/db/transaction';
import { ApiError, BadRequest, Busy, NotFound, ServiceUnavailable } from '#lib/errors';

/**
 * One change across many tenant schemas. A migration is its SQL and the schemas it reaches (a
 * list, a template and every schema cloned from it, or every tenant schema), recorded with one
 * ledger row per schema in dbadmin's own schema: pending, running, applied, failed (with
 * PostgreSQL's error) or skipped (a migration of that name already applied there).
 *
 * It runs in slices (`runMigration`), each as long as one request may take: every schema is
 * changed in one transaction of its own, on a session of that schema's role (never the service's:
 * a tenant may put its own code in the path of SQL the service runs there), with a lock timeout, `concurrency` schemas at a time. A failure
 * rolls its schema back and never stops the others. The next slice goes on where one ended:
 * after a crash or a timeout, a schema left running is settled by the transaction it ran in
 * (recorded before its SQL ran): committed is applied, aborted is pending again, still running is
 * left to its session; one that never began is pending again once its claim has lapsed.
 */

export type MigrationTarget = { schemas: string[] } | { template: string } | { all: true };
export type RunAs = 'schema';

export interface MigrationInput {
  name: string;
  sql: string;
  target: MigrationTarget;
  runAs: RunAs;
  lockTimeoutMs: number;
  concurrency: number;
}

export const SCHEMA_STATES = ['pending', 'running', 'applied', 'failed', 'skipped'] as const;
export type SchemaState = (typeof SCHEMA_STATES)[number];

/**
 * How long a claim on a schema holds before another slice may take the schema over, unless its
 * run has recorded its transaction (which then decides): the time a run may wait for its
 * connection (the service's, a slot of the budget, the login) and a margin. A run that records
 * later finds its claim taken and rolls back.
 */
export const claimMs = (connectTimeoutMs: number) => 3 * connectTimeoutMs + 10_000;

/** A pool or one of its sessions. */
type Queryable = pg.Pool | pg.ClientBase;

const sqlHash = (sql: string) => createHash('sha256').update(sql).digest('hex');

/** Every tenant schema's name: not PostgreSQL's, not dbadmin's, not public. */
async function tenantSchemas(client: Queryable): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT nspname AS name FROM pg_catalog.pg_namespace
      WHERE nspname !~ '^pg_' AND nspname <> ALL ($1::text[]) ORDER BY nspname`,
    [NOT_TENANT_SCHEMAS],
  );
  return rows.map((row) => row.name).filter((name) => !isSystemSchema(name));
}

async function existing(client: Queryable, names: string[]): Promise<Set<string>> {
  const { rows } = await client.query<{ name: string }>(
    'SELECT nspname AS name FROM pg_catalog.pg_namespace WHERE nspname = ANY ($1::text[])',
    [names],
  );
  return new Set(rows.map((row) => row.name));
}

/** The schemas a target reaches, sorted; 404 for a named schema or template that does not exist. */
export async function targetSchemas(client: Queryable, target: MigrationTarget): Promise<string[]> {
  if ('all' in target) return tenantSchemas(client);
  if ('template' in target) {
    if (isSystemSchema(target.template) || target.template === 'public')
      throw new BadRequest('Invalid target', `${target.template}: not a tenant schema; name a tenant schema`);
    if (!(await existing(client, [target.template])).has(target.template))
      throw new NotFound('Schema not found', `template "${target.template}" does not exist`);
    const { rows } = await client.query<{ name: string }>(
      `SELECT t.schema_name AS name FROM _dbadmin.schema_templates t
         JOIN pg_catalog.pg_namespace n ON n.nspname = t.schema_name
        WHERE t.template = $1`,
      [target.template],
    );
    return [target.template, ...rows.map((row) => row.name)].sort();
  }
  const names = [...new Set(target.schemas)].sort();
  const system = names.filter((name) => isSystemSchema(name) || name === 'public');
  if (system.length > 0)
    throw new BadRequest(
      'Invalid target',
      `${system.join(', ')}: not a tenant schema; name tenant schemas only`,
    );
  const found = await existing(client, names);
  const missing = names.filter((name) => !found.has(name));
  if (missing.length > 0)
    throw new NotFound(
      'Schema not found',
      `no schema ${missing.map((s) => `"${s}"`).join(', ')}; name existing schemas`,
    );
  return names;
}

/** Schemas where a migration of this name is already applied, with when and by which. */
async function appliedIn(client: Queryable, name: string, schemas: string[]) {
  const { rows } = await client.query<{ schema: string; id: string | null; at: Date }>(
    `SELECT schema_name AS schema, migration_id::text AS id, applied_at AS at FROM _dbadmin.schema_migrations
      WHERE migration_name = $1 AND schema_name = ANY ($2::text[])`,
    [name, schemas],
  );
  return new Map(rows.map((row) => [row.schema, row]));
}

const appliedReason = (row: { id: string | null; at: Date }) =>
  `already applied${row.id ? ` by migration ${row.id}` : ''} at ${row.at.toISOString()}`;

const WRITES_ROWS = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE', 'COPY']);

/** Whether a migration's SQL writes rows (a structure-only copy of its schema has none of them). */
async function writesRows(sql: string): Promise<boolean> {
  try {
    return (await planStatements(sql)).some((statement) => WRITES_ROWS.has(statement.kind));
  } catch {
    return true;
  }
}

/**
 * A copy holds what its template's migrations made, as of the snapshot the template was read in:
 * those migrations are applied in the copy's own ledger too, so running one of them again skips
 * it. One that committed after the snapshot is not (the copy lacks its change), nor, for a copy
 * without the rows, one that wrote rows. Within the caller's transaction.
 */
export async function inheritLedger(
  client: pg.ClientBase,
  schema: string,
  { template, withData, snapshot }: { template: string; withData: boolean; snapshot: string },
): Promise<void> {
  const { rows } = await client.query<{
    name: string;
    hash: string;
    id: string | null;
    at: Date;
    sql: string | null;
  }>(
    `SELECT s.migration_name AS name, s.sql_hash AS hash, s.migration_id::text AS id, s.applied_at AS at, m.sql
       FROM _dbadmin.schema_migrations s LEFT JOIN _dbadmin.tenant_migrations m ON m.id = s.migration_id
      WHERE s.schema_name = $1
        AND NOT EXISTS (SELECT 1 FROM _dbadmin.tenant_migration_schemas t
                         WHERE t.migration_id = s.migration_id AND t.schema_name = $1 AND t.xact_id IS NOT NULL
                           AND NOT pg_catalog.pg_visible_in_snapshot(t.xact_id, $2::pg_catalog.pg_snapshot))
     UNION ALL
     SELECT m.name, m.sql_hash, m.id::text, pg_catalog.now(), m.sql
       FROM _dbadmin.tenant_migration_schemas t JOIN _dbadmin.tenant_migrations m ON m.id = t.migration_id
      WHERE t.schema_name = $1 AND t.state = 'running' AND t.xact_id IS NOT NULL
        AND pg_catalog.pg_visible_in_snapshot(t.xact_id, $2::pg_catalog.pg_snapshot)
        AND pg_catalog.pg_xact_status(t.xact_id) = 'committed'`,
    [template, snapshot],
  );
  const kept = [];
  for (const row of rows) if (withData || row.sql === null || !(await writesRows(row.sql))) kept.push(row);
  if (kept.length === 0) return;
  await client.query(
    `INSERT INTO _dbadmin.schema_migrations (schema_name, migration_name, sql_hash, migration_id, applied_at)
     SELECT $1, name, hash, id::bigint, at
       FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                       pg_catalog.unnest($5::timestamptz[])) AS i(name, hash, id, at)
     ON CONFLICT DO NOTHING`,
    [schema, kept.map((r) => r.name), kept.map((r) => r.hash), kept.map((r) => r.id), kept.map((r) => r.at)],
  );
}

/** A dry run: the statements with their locks, and what each schema would get. Changes nothing. */
export async function previewMigration(db: pg.Pool, input: MigrationInput) {
  const statements = await planStatements(input.sql);
  const schemas = await targetSchemas(db, input.target);
  const applied = await appliedIn(db, input.name, schemas);
  const plan = schemas.map((schema) => {
    const done = applied.get(schema);
    return done
      ? { schema, state: 'skipped' as const, reason: appliedReason(done) }
      : { schema, state: 'pending' as const };
  });
  return {
    dryRun: true as const,
    name: input.name,
    runAs: input.runAs,
    statements,
    counts: countsOf(plan.map((entry) => entry.state)),
    schemas: plan,
  };
}

function countsOf(states: SchemaState[]): Record<SchemaState, number> {
  const counts = Object.fromEntries(SCHEMA_STATES.map((state) => [state, 0])) as Record<SchemaState, number>;
  for (const state of states) counts[state] += 1;
  return counts;
}

/** Records the migration and its schemas (skipped where already applied), with the audit entry. */
export async function createMigration(
  db: pg.Pool,
  input: MigrationInput,
  createdBy: string | undefined,
  audit: AuditDraft | undefined,
) {
  await planStatements(input.sql);
  const id = await withTransaction(
    db,
    async (client) => {
      const { rows: taken } = await client.query<{ id: string }>(
        'SELECT id::text FROM _dbadmin.tenant_migrations WHERE name = $1',
        [input.name],
      );
      if (taken[0]) {
        throw new ApiError(
          409,
          'Migration exists',
          `a migration named "${input.name}" exists (${taken[0].id}): run it again with POST /api/migrations/${taken[0].id}/run, or choose another name`,
        );
      }
      const schemas = await targetSchemas(client, input.target);
      if (schemas.length === 0) throw new BadRequest('Invalid target', 'the target reaches no schema');
      const { rows } = await client.query<{ id: string }>(
        `INSERT INTO _dbadmin.tenant_migrations (name, sql, sql_hash, run_as, lock_timeout_ms, concurrency, target, created_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id::text`,
        [
          input.name,
          input.sql,
          sqlHash(input.sql),
          input.runAs,
          input.lockTimeoutMs,
          input.concurrency,
          JSON.stringify(input.target),
          createdBy ?? null,
        ],
      );
      const migrationId = rows[0]?.id as string;
      await addSchemas(client, migrationId, input.name, schemas);
      return migrationId;
    },
    { audit },
  );
  return migrationProgress(db, id, {});
}

interface MigrationRow {
  id: string;
  name: string;
  sql: string;
  sql_hash: string;
  run_as: RunAs;
  lock_timeout_ms: number;
  concurrency: number;
  target: MigrationTarget;
  created_by: string | null;
  created_at: Date;
}

async function migrationRow(db: pg.Pool, id: string): Promise<MigrationRow> {
  const { rows } = await db.query<MigrationRow>(
    `SELECT id::text, name, sql, sql_hash, run_as, lock_timeout_ms, concurrency, target, created_by, created_at
       FROM _dbadmin.tenant_migrations WHERE id = $1`,
    [id],
  );
  if (!rows[0])
    throw new NotFound('Migration not found', `no migration ${id}; GET /api/migrations lists them`);
  return rows[0];
}

export interface ProgressQuery {
  state?: SchemaState;
  after?: string;
  limit?: number;
}

/** Where a migration stands: its counts, its rate, and a page of its schemas (by name). */
export async function migrationProgress(
  db: pg.Pool,
  id: string,
  { state, after, limit = 100 }: ProgressQuery,
) {
  const migration = await migrationRow(db, id);
  const [{ rows: states }, { rows: timing }, { rows: schemas }] = await Promise.all([
    db.query<{ state: SchemaState; n: number }>(
      `SELECT state, count(*)::int AS n FROM _dbadmin.tenant_migration_schemas WHERE migration_id = $1 GROUP BY state`,
      [id],
    ),
    db.query<{ first: Date | null; last: Date | null; finished: number }>(
      `SELECT min(started_at) AS first, max(finished_at) AS last,
              count(*) FILTER (WHERE finished_at IS NOT NULL AND state IN ('applied', 'failed'))::int AS finished
         FROM _dbadmin.tenant_migration_schemas WHERE migration_id = $1`,
      [id],
    ),
    db.query(
      `SELECT schema_name AS schema, state, reason, sqlstate, attempts, started_at AS "startedAt", finished_at AS "finishedAt"
         FROM _dbadmin.tenant_migration_schemas
        WHERE migration_id = $1 AND ($2::text IS NULL OR state = $2) AND ($3::text IS NULL OR schema_name > $3)
        ORDER BY schema_name LIMIT $4`,
      [id, state ?? null, after ?? null, limit + 1],
    ),
  ]);
  const counts = countsOf([]);
  for (const row of states) counts[row.state] = row.n;
  const span =
    timing[0]?.first && timing[0]?.last ? (timing[0].last.getTime() - timing[0].first.getTime()) / 1000 : 0;
  const page = schemas.slice(0, limit);
  return {
    id: migration.id,
    name: migration.name,
    sql: migration.sql,
    runAs: migration.run_as,
    lockTimeoutMs: migration.lock_timeout_ms,
    concurrency: migration.concurrency,
    target: migration.target,
    createdBy: migration.created_by,
    createdAt: migration.created_at.toISOString(),
    counts,
    done: counts.pending === 0 && counts.running === 0,
    schemasPerSecond: span > 0 ? Number(((timing[0]?.finished ?? 0) / span).toFixed(2)) : null,
    schemas: page.map((row) => ({
      ...row,
      startedAt: row.startedAt?.toISOString() ?? null,
      finishedAt: row.finishedAt?.toISOString() ?? null,
    })),
    nextAfter: schemas.length > limit ? (page[page.length - 1]?.schema ?? null) : null,
  };
}

/** The migrations, newest first, each with its counts. */
export async function listMigrations(db: pg.Pool) {
  const { rows } = await db.query(
    `SELECT m.id::text, m.name, m.run_as AS "runAs", m.created_by AS "createdBy", m.created_at AS "createdAt",
            count(*) FILTER (WHERE s.state = 'pending')::int AS pending,
            count(*) FILTER (WHERE s.state = 'running')::int AS running,
            count(*) FILTER (WHERE s.state = 'applied')::int AS applied,
            count(*) FILTER (WHERE s.state = 'failed')::int AS failed,
            count(*) FILTER (WHERE s.state = 'skipped')::int AS skipped
       FROM _dbadmin.tenant_migrations m LEFT JOIN _dbadmin.tenant_migration_schemas s ON s.migration_id = m.id
      GROUP BY m.id ORDER BY m.id DESC LIMIT 200`,
  );
  return rows.map(({ pending, running, applied, failed, skipped, createdAt, ...row }) => ({
    ...row,
    createdAt: (createdAt as Date).toISOString(),
    counts: { pending, running, applied, failed, skipped },
  }));
}

/** Failed schemas (all, or those named) pending again, for the next run. */
export async function retryMigration(
  db: pg.Pool,
  id: string,
  schemas: string[] | undefined,
  audit: AuditDraft | undefined,
) {
  await migrationRow(db, id);
  await withTransaction(
    db,
    (client) =>
      client.query(
        `UPDATE _dbadmin.tenant_migration_schemas SET state = 'pending', reason = NULL, sqlstate = NULL, claim = NULL
          WHERE migration_id = $1 AND state = 'failed' AND ($2::text[] IS NULL OR schema_name = ANY ($2::text[]))`,
        [id, schemas ?? null],
      ),
    { audit },
  );
  return migrationProgress(db, id, {});
}

export interface RunOptions {
  /** How long this slice may start schemas for; those started finish after it. */
  budgetMs: number;
  signal?: AbortSignal;
  /** The clock claims are measured with (tests move it). */
  now?: () => Date;
  /** Where a schema's SQL runs as its role (the route's accessTo). */
  schemaAccess: (schema: string) => Promise<SchemaAccess>;
}

/** A slice of the migration: schemas claimed and changed until the budget is spent. */
export async function runMigration(db: pg.Pool, id: string, options: RunOptions) {
  const migration = await migrationRow(db, id);
  const now = options.now ?? (() => new Date());
  const claimFor = claimMs((await getConfig()).DB_CONNECT_TIMEOUT_MS);
  const deadline = performance.now() + options.budgetMs;
  await reachNewSchemas(db, migration);
  await settleAbandoned(db, id, now());
  let stop = false;
  const worker = async () => {
    while (!stop && performance.now() < deadline && !options.signal?.aborted) {
      const claim = randomUUID();
      const schema = await claimNext(db, id, claim, new Date(now().getTime() + claimFor));
      if (schema === undefined) return;
      if ((await applyTo(db, migration, schema, claim, options)) === 'stop') stop = true;
    }
  };
  // Every worker ends before the answer, even when one fails: none is left holding a transaction.
  const workers = await Promise.allSettled(Array.from({ length: migration.concurrency }, worker));
  const failed = workers.find((w): w is PromiseRejectedResult => w.status === 'rejected');
  if (failed) throw failed.reason;
  return migrationProgress(db, id, {});
}

/**
 * A template's or every schema's migration reaches the schemas made since it was recorded: pending,
 * or skipped where a migration of its name is applied already (a copy of a template it changed).
 */
async function reachNewSchemas(db: pg.Pool, migration: MigrationRow): Promise<void> {
  if ('schemas' in migration.target) return;
  const schemas = await targetSchemas(db, migration.target).catch((error: unknown) => {
    // A template deleted since: its schemas are the ones recorded.
    if (error instanceof NotFound) return [];
    throw error;
  });
  await addSchemas(db, migration.id, migration.name, schemas);
}

/** The schemas' ledger rows, pending or skipped; those already there are left as they are. */
async function addSchemas(client: Queryable, id: string, name: string, schemas: string[]): Promise<void> {
  await client.query(
    `INSERT INTO _dbadmin.tenant_migration_schemas (migration_id, schema_name, state, reason)
     SELECT $1, s, CASE WHEN m.schema_name IS NULL THEN 'pending' ELSE 'skipped' END,
            CASE WHEN m.schema_name IS NOT NULL THEN 'already applied'
                   || coalesce(' by migration ' || m.migration_id, '') || ' at ' || m.applied_at END
       FROM pg_catalog.unnest($2::text[]) s
       LEFT JOIN _dbadmin.schema_migrations m ON m.schema_name = s AND m.migration_name = $3
     ON CONFLICT (migration_id, schema_name) DO NOTHING`,
    [id, schemas, name],
  );
}

async function claimNext(db: pg.Pool, id: string, claim: string, until: Date): Promise<string | undefined> {
  const { rows } = await db.query<{ schema: string }>(
    `UPDATE _dbadmin.tenant_migration_schemas t
        SET state = 'running', claim = $2, claimed_until = $3, attempts = t.attempts + 1, started_at = now(),
            finished_at = NULL, xact_id = NULL, reason = NULL, sqlstate = NULL
      WHERE (t.migration_id, t.schema_name) = (
              SELECT migration_id, schema_name FROM _dbadmin.tenant_migration_schemas
               WHERE migration_id = $1 AND state = 'pending' ORDER BY schema_name LIMIT 1 FOR UPDATE SKIP LOCKED)
      RETURNING t.schema_name AS schema`,
    [id, claim, until],
  );
  return rows[0]?.schema;
}

/**
 * Schemas a slice left running (its process crashed, or its function timed out): applied when the
 * transaction it recorded committed, pending again when it aborted, or when it recorded none and
 * its claim has lapsed. One still in progress is left to the session running it.
 */
async function settleAbandoned(db: pg.Pool, id: string, now: Date): Promise<void> {
  await db.query(
    `WITH settled AS (
       UPDATE _dbadmin.tenant_migration_schemas t
          SET state = CASE s.status WHEN 'committed' THEN 'applied' ELSE 'pending' END,
              finished_at = CASE s.status WHEN 'committed' THEN now() END,
              reason = CASE s.status WHEN 'committed' THEN 'applied (recorded after its run ended)' END,
              claim = NULL
         FROM (SELECT schema_name, CASE WHEN xact_id IS NOT NULL THEN pg_catalog.pg_xact_status(xact_id) END AS status
                 FROM _dbadmin.tenant_migration_schemas WHERE migration_id = $1 AND state = 'running') s
        WHERE t.migration_id = $1 AND t.schema_name = s.schema_name AND t.state = 'running'
          AND (s.status IN ('committed', 'aborted') OR (s.status IS NULL AND t.claimed_until < $2))
        RETURNING t.schema_name, t.state)
     INSERT INTO _dbadmin.schema_migrations (schema_name, migration_name, sql_hash, migration_id)
     SELECT settled.schema_name, m.name, m.sql_hash, m.id FROM settled, _dbadmin.tenant_migrations m
      WHERE settled.state = 'applied' AND m.id = $1
     ON CONFLICT DO NOTHING`,
    [id, now],
  );
}

/** The schema's claim was taken over (it lapsed): this run leaves the schema to that one. */
class ClaimLost extends Error {}

/**
 * How long a migration's transaction may sit idle (its slice's process frozen, as Lambda freezes
 * a function between invocations) before PostgreSQL ends it, releasing the tenant's table.
 */
const IDLE_IN_TRANSACTION_MS = 60_000;

type Outcome = { state: 'applied' } | { state: 'failed'; error: unknown } | { state: 'left' | 'pending' };

/**
 * Changes one schema in one transaction: the transaction's id is recorded under the claim before
 * the SQL runs, so a crash leaves an answer; the ledger says applied or failed after. 'stop'
 * when the slice should start no more (the connection budget or the database gave out).
 */
async function applyTo(
  db: pg.Pool,
  migration: MigrationRow,
  schema: string,
  claim: string,
  options: RunOptions,
): Promise<'done' | 'stop'> {
  const key = [migration.id, schema, claim];
  let xid: string | undefined;
  let outcome: Outcome;
  try {
    const access = await options.schemaAccess(schema);
    await access.run((client) =>
      inPlainTransaction(client, 'BEGIN', async () => {
        await client.query(
          `SET LOCAL lock_timeout = ${Math.trunc(migration.lock_timeout_ms)};
           SET LOCAL idle_in_transaction_session_timeout = ${IDLE_IN_TRANSACTION_MS}`,
        );
        const { rows } = await client.query<{ xid: string }>(
          'SELECT pg_catalog.pg_current_xact_id()::pg_catalog.text AS xid',
        );
        const recorded = await db.query(
          `UPDATE _dbadmin.tenant_migration_schemas SET xact_id = $4::xid8
            WHERE migration_id = $1 AND schema_name = $2 AND claim = $3 AND state = 'running'`,
          [...key, rows[0]?.xid],
        );
        if (recorded.rowCount !== 1) throw new ClaimLost();
        xid = rows[0]?.xid;
        await client.query(migration.sql);
        const kept = await client.query('SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1', [schema]);
        if (kept.rowCount !== 1)
          throw new BadRequest('Schema dropped', 'a migration may not drop its own schema');
      }),
    );
    outcome = { state: 'applied' };
  } catch (error) {
    if (error instanceof ClaimLost) return 'done';
    if (error instanceof Busy || error instanceof ServiceUnavailable) {
      await release(db, key);
      return 'stop';
    }
    outcome = await outcomeOf(db, xid, error, options.signal?.aborted === true);
  }
  await record(db, migration, key, outcome);
  return 'done';
}

/**
 * What an error left: a transaction whose COMMIT was under way when the connection went (its
 * outcome unknown to us) is asked of PostgreSQL: committed is applied, still running is left for
 * a later slice to settle. One our own deadline cut short (the request ending) is pending again,
 * not the schema's failure.
 */
async function outcomeOf(
  db: pg.Pool,
  xid: string | undefined,
  error: unknown,
  ended: boolean,
): Promise<Outcome> {
  if (xid !== undefined) {
    const { rows } = await db.query<{ status: string | null }>(
      'SELECT pg_catalog.pg_xact_status($1::xid8) AS status',
      [xid],
    );
    if (rows[0]?.status === 'committed') return { state: 'applied' };
    if (rows[0]?.status === 'in progress') return { state: 'left' };
  }
  if (ended) return { state: 'pending' };
  return { state: 'failed', error };
}

/** A schema given back unchanged (no connection came): pending, as if never claimed. */
const release = (db: pg.Pool, key: string[]) =>
  db.query(
    `UPDATE _dbadmin.tenant_migration_schemas SET state = 'pending', claim = NULL, attempts = attempts - 1
      WHERE migration_id = $1 AND schema_name = $2 AND claim = $3 AND state = 'running'`,
    key,
  );

/** The outcome in the ledger, under the claim (a claim taken over records nothing). */
async function record(db: pg.Pool, migration: MigrationRow, key: string[], outcome: Outcome): Promise<void> {
  if (outcome.state === 'left') return;
  if (outcome.state === 'pending') {
    await db.query(
      `UPDATE _dbadmin.tenant_migration_schemas SET state = 'pending', claim = NULL
        WHERE migration_id = $1 AND schema_name = $2 AND claim = $3 AND state = 'running'`,
      key,
    );
    return;
  }
  if (outcome.state === 'failed') {
    const cause = pgErrorOf(outcome.error);
    await db.query(
      `UPDATE _dbadmin.tenant_migration_schemas
          SET state = 'failed', finished_at = now(), reason = $4, sqlstate = $5, claim = NULL
        WHERE migration_id = $1 AND schema_name = $2 AND claim = $3 AND state = 'running'`,
      [...key, cause?.message ?? (outcome.error as Error).message, cause?.code ?? null],
    );
    return;
  }
  await db.query(
    `WITH applied AS (
       UPDATE _dbadmin.tenant_migration_schemas SET state = 'applied', finished_at = now(), claim = NULL
        WHERE migration_id = $1 AND schema_name = $2 AND claim = $3 AND state = 'running' RETURNING schema_name)
     INSERT INTO _dbadmin.schema_migrations (schema_name, migration_name, sql_hash, migration_id)
     SELECT schema_name, $4, $5, $1 FROM applied ON CONFLICT DO NOTHING`,
    [...key, migration.name, migration.sql_hash],
  );
}

export type { PlannedStatement };
