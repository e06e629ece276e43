import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { isLambda } from '#lib/config';
import { currentSessionBudget } from '#lib/db/connection-budget';
import { rolePoolUse, roleSetups } from '#lib/db/executor';
import { bundlePoolUse, getDatabase, processServicePoolUse } from '#lib/db/pool';
import { getLicensing } from '#lib/license/index';
import type { LicenseState, LicenseStatusValue } from '#lib/license/licensing';
import { loggedError, logger } from '#lib/log';

/**
 * The service's figures: requests by route and status, their latency, the pools, the database's
 * connections, the license and audit write failures. Served to Prometheus at GET /api/metrics
 * (functions/metrics); on Lambda, where no scraper can reach a container, each invocation also
 * writes its request figures as CloudWatch embedded metrics (Powertools metrics) in its log.
 *
 * Each function is its own bundle with its own copy of this module: on Lambda one per container,
 * but the local host and the container run every bundle in one process. So each bundle's figures
 * (`registry`) join a set kept on the process's global object, and a scrape sums them all
 * (processMetrics); the figures read at scrape time (the database's connections, the license)
 * are the scraping bundle's alone (`scraped`).
 */
const registry = new Registry();
const scraped = new Registry();

const BUNDLES = Symbol.for('dbadmin.metrics.registries');
const processGlobal = globalThis as { [BUNDLES]?: Set<Registry> };
processGlobal[BUNDLES] ??= new Set();
const bundles = processGlobal[BUNDLES];
bundles.add(registry);

/** Every bundle's figures in this process, summed, and the scrape-time figures: Prometheus's text. */
export async function processMetrics(): Promise<{ text: string; contentType: string }> {
  const figures = await Promise.all([...bundles, scraped].map((each) => each.getMetricsAsJSON()));
  const all = AggregatorRegistry.aggregate(figures);
  return { text: await all.metrics(), contentType: all.contentType };
}

const requests = new Counter({
  name: 'dbadmin_http_requests_total',
  help: 'Requests answered, by route (as routed, e.g. GET /api/table/{tableName}) and status',
  labelNames: ['route', 'status'] as const,
  registers: [registry],
});

const latency = new Histogram({
  name: 'dbadmin_http_request_duration_seconds',
  help: 'Time from the request to its answer, by route',
  labelNames: ['route'] as const,
  buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  registers: [registry],
});

const auditFailures = new Counter({
  name: 'dbadmin_audit_write_failures_total',
  help: 'Audit entries that could not be written (a change in a transaction is then refused with 503; one without is kept and logged)',
  registers: [registry],
});

const auditDrainFailures = new Counter({
  name: 'dbadmin_audit_drain_failures_total',
  help: 'Drains of the audit inbox into the log that failed (the entries wait, kept, in the inbox)',
  registers: [registry],
});

const auditRefused = new Counter({
  name: 'dbadmin_audit_entries_refused_total',
  help: 'Rows in the audit inbox refused as entries: not sealed by the service, or sealed for another transaction (a forgery or a replay)',
  registers: [registry],
});

new Gauge({
  name: 'dbadmin_pool_connections',
  help: "This process's database connections by pool and state (in use, idle) and requests waiting for one, summed over its functions",
  labelNames: ['pool', 'state'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const use of bundlePoolUse()) {
      this.set({ pool: use.pool, state: 'in_use' }, use.total - use.idle);
      this.set({ pool: use.pool, state: 'idle' }, use.idle);
      this.set({ pool: use.pool, state: 'waiting' }, use.waiting);
    }
  },
});

// The schema roles' pools are the process's, shared by its bundles: counted once, at scrape time,
// under the same name (a scrape sums the series of every registry).
new Gauge({
  name: 'dbadmin_pool_connections',
  help: "This process's database connections by pool and state (in use, idle) and requests waiting for one, summed over its functions",
  labelNames: ['pool', 'state'] as const,
  registers: [scraped],
  collect() {
    this.reset();
    const use = rolePoolUse();
    this.set({ pool: use.pool, state: 'in_use' }, use.total - use.idle);
    this.set({ pool: use.pool, state: 'idle' }, use.idle);
    this.set({ pool: use.pool, state: 'waiting' }, use.waiting);
  },
});

new Gauge({
  name: 'dbadmin_service_pool_connections',
  help: "The service's own pool, shared by every function in the process: connections in use, idle, and requests waiting",
  labelNames: ['state'] as const,
  registers: [scraped],
  collect() {
    this.reset();
    const use = processServicePoolUse();
    if (!use) return;
    this.set({ state: 'in_use' }, use.total - use.idle);
    this.set({ state: 'idle' }, use.idle);
    this.set({ state: 'waiting' }, use.waiting);
  },
});

new Gauge({
  name: 'dbadmin_session_budget',
  help: "The connections this process's sessions (schema roles, the admin's SQL) may hold together, those open, idle, and requests waiting for one",
  labelNames: ['state'] as const,
  registers: [scraped],
  collect() {
    this.reset();
    const use = currentSessionBudget()?.use;
    if (!use) return;
    for (const state of ['limit', 'open', 'idle', 'waiting'] as const) this.set({ state }, use[state]);
  },
});

const busyAnswers = new Counter({
  name: 'dbadmin_busy_total',
  help: 'Requests answered 503 Service busy (with Retry-After): no database connection came free in time',
  registers: [registry],
});

/** A request was answered 503 Busy. */
export const countBusy = () => busyAnswers.inc();

new Counter({
  name: 'dbadmin_role_setups_total',
  help: 'Schema roles this process prepared (made, granted, password reset) before logging in as them: once per role and change of its roles when all is well',
  labelNames: ['kind'] as const,
  registers: [registry],
  collect() {
    this.reset();
    for (const [kind, n] of Object.entries(roleSetups)) this.inc({ kind }, n);
  },
});

new Gauge({
  name: 'dbadmin_database_connections',
  help: 'Client connections to this database, by state (pg_stat_activity), and the server’s max_connections',
  labelNames: ['state'] as const,
  registers: [scraped],
  async collect() {
    this.reset();
    try {
      const db = await getDatabase();
      const { rows } = await db.query<{ state: string; n: number }>(
        `SELECT coalesce(state, 'unknown') AS state, count(*)::int AS n FROM pg_catalog.pg_stat_activity
          WHERE backend_type = 'client backend' AND datname = pg_catalog.current_database() GROUP BY 1
         UNION ALL SELECT 'max_connections', pg_catalog.current_setting('max_connections')::int`,
      );
      for (const row of rows) this.set({ state: row.state }, row.n);
    } catch (error) {
      logger.warn('metrics: database connections not read', { error: loggedError(error) });
    }
  },
});

const LICENSE_STATES: readonly LicenseStatusValue[] = [
  'active',
  'trial',
  'grace_period',
  'expired',
  'invalid',
  'none',
];

new Gauge({
  name: 'dbadmin_license_state',
  help: 'The license state: 1 for the current one, 0 for the others',
  labelNames: ['state'] as const,
  registers: [scraped],
  async collect() {
    const state = await licenseState();
    for (const value of LICENSE_STATES) this.set({ state: value }, state?.status === value ? 1 : 0);
  },
});

new Gauge({
  name: 'dbadmin_license_days_left',
  help: 'Days until the trial or the grace period ends (absent for a lifetime license)',
  registers: [scraped],
  async collect() {
    this.reset();
    const days = (await licenseState())?.daysRemaining;
    if (typeof days === 'number') this.set(days);
  },
});

/** One read of the license per scrape, shared by its two gauges. */
let licenseRead: { at: number; state: Promise<LicenseState | undefined> } | undefined;

function licenseState(): Promise<LicenseState | undefined> {
  if (licenseRead && performance.now() - licenseRead.at < 1000) return licenseRead.state;
  const state = getLicensing()
    .then((licensing) => licensing.state())
    .catch((error: unknown) => {
      logger.warn('metrics: license state not read', { error: loggedError(error) });
      return undefined;
    });
  licenseRead = { at: performance.now(), state };
  return state;
}

/** On Lambda only: one EMF document per invocation, in the function's log. */
const lambdaMetrics = isLambda()
  ? new Metrics({ namespace: process.env.METRICS_NAMESPACE ?? 'dbadmin', serviceName: 'dbadmin' })
  : undefined;

/** One answered request, counted (lib/http/request-log). */
export function countRequest(route: string, status: number, seconds: number): void {
  requests.inc({ route, status: String(status) });
  latency.observe({ route }, seconds);
  if (lambdaMetrics) {
    lambdaMetrics.addDimensions({ route, status: String(status) });
    lambdaMetrics.addMetric('requests', MetricUnit.Count, 1);
    lambdaMetrics.addMetric('latency', MetricUnit.Milliseconds, seconds * 1000);
    lambdaMetrics.publishStoredMetrics();
  }
}

export function countAuditFailure(): void {
  auditFailures.inc();
  lambdaMetrics?.singleMetric().addMetric('auditWriteFailures', MetricUnit.Count, 1);
}

export function countAuditDrainFailure(): void {
  auditDrainFailures.inc();
  lambdaMetrics?.singleMetric().addMetric('auditDrainFailures', MetricUnit.Count, 1);
}

export function countAuditRefused(rows: number): void {
  auditRefused.inc(rows);
  lambdaMetrics?.singleMetric().addMetric('auditEntriesRefused', MetricUnit.Count, rows);
}
