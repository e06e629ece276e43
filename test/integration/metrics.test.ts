import { handler as health } from '#functions/health';
import { handler as metrics } from '#functions/metrics';
import { handler as tables } from '#functions/tables';
import { closePool } from '#lib/db/pool';
import { bearer, createKey, tenantSchema } from '#test/security/tenant';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { withSetting } from '#test/support/settings';

/**
 * GET /api/metrics in Prometheus' text format: the admin's credentials or METRICS_TOKEN, nothing
 * else; requests by route and status, latency, pools, connections, license, audit failures.
 */
afterAll(closePool);

const TOKEN = 'metrics-token-0123456789abcdef0123456789';
withSetting('METRICS_TOKEN', TOKEN);

const scrape = async (auth = {}) => call(metrics, { path: '/api/metrics', ...auth });
const value = (text: string, series: string) => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
};

it('counts requests by route and status, with their latency', async () => {
  const before =
    value((await scrape()).text, 'dbadmin_http_requests_total{route="GET /api/health",status="200"}') ?? 0;
  await call(health, { path: '/api/health', auth: null });
  await call(health, { path: '/api/health', auth: null });
  const reply = await scrape();

  expect(reply.status).toBe(200);
  expect(reply.headers['content-type']).toMatch(/^text\/plain/);
  expect(reply.headers['content-disposition']).toBeUndefined();
  expect(value(reply.text, 'dbadmin_http_requests_total{route="GET /api/health",status="200"}')).toBe(
    before + 2,
  );
  expect(
    value(reply.text, 'dbadmin_http_request_duration_seconds_count{route="GET /api/health"}'),
  ).toBeGreaterThanOrEqual(2);
  expect(reply.text).toMatch(/dbadmin_service_pool_connections\{state="idle"\} \d+/);
  expect(reply.text).toMatch(/dbadmin_database_connections\{state="max_connections"\} \d+/);
  expect(reply.text).toMatch(/dbadmin_license_state\{state="[a-z_]+"\} 1/);
  expect(reply.text).toContain('dbadmin_audit_write_failures_total');
});

it('counts an audit entry that could not be written', async () => {
  const schema = await tenantSchema('metr');
  const before = value((await scrape()).text, 'dbadmin_audit_write_failures_total') ?? 0;
  await withAdminClient((c) =>
    c.query(
      "ALTER TABLE _dbadmin_audit.inbox ADD CONSTRAINT test_metrics CHECK (strpos(convert_from(decode(entry, 'base64'), 'UTF8'), 'metered') = 0) NOT VALID",
    ),
  );
  try {
    const reply = await call(tables, {
      method: 'POST',
      path: '/api/table/create',
      body: { schema, tableName: 'metered', columns: [{ name: 'id', type: 'INTEGER' }] },
    });
    expect(reply.status).toBe(503);
  } finally {
    await withAdminClient((c) => c.query('ALTER TABLE _dbadmin_audit.inbox DROP CONSTRAINT test_metrics'));
  }
  expect(value((await scrape()).text, 'dbadmin_audit_write_failures_total')).toBe(before + 1);
});

describe('who may read them', () => {
  let key: string;
  beforeAll(async () => {
    key = (await createKey(await tenantSchema('metrkey'), 'service_role')).key;
  });

  it('the admin, and whoever holds METRICS_TOKEN', async () => {
    expect((await scrape()).status).toBe(200);
    expect((await scrape(bearer(TOKEN))).status).toBe(200);
  });

  it.each([
    ['no credentials', { auth: null }],
    ['a wrong token', bearer(`${TOKEN}x`)],
    ['an API key', undefined],
  ])('not %s (401)', async (_, auth) => {
    const reply = await scrape(auth ?? bearer(key));
    expect(reply.status).toBe(401);
    expect(reply.text).not.toContain('dbadmin_http_requests_total');
  });
});
