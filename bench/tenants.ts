/**
 * The tenants view with a thousand schemas (issue 27), for npm run bench:data: GET /api/tenants
 * (every schema's size, tables and sessions, one catalog query) through the host, next to the
 * host's ceiling, one connection at a time as a page refreshing every few seconds reads it.
 */
import type pg from 'pg';
import { atMost, compare, load, type Row, shown, type Target } from './support';

const SCHEMAS = 1000;

export async function seedTenants(client: pg.Client) {
  await client.query(`DO $$ BEGIN
    FOR i IN 1..${SCHEMAS} LOOP
      EXECUTE format('CREATE SCHEMA IF NOT EXISTS tenant_%s', i);
      EXECUTE format('CREATE TABLE IF NOT EXISTS tenant_%s.items (id int PRIMARY KEY, name text)', i);
    END LOOP; END $$`);
}

export async function tenantsBench(
  api: (path: string) => string,
  headers: Record<string, string>,
  rounds: number,
) {
  return compare(
    {
      'trivial handler (ceiling), 1 connection': () => load(api('/bench/ceiling'), headers, {}, 1),
      [`GET /api/tenants, ${SCHEMAS}+ schemas, 1 connection`]: () =>
        load(api(`/api/tenants?limit=${SCHEMAS + 100}`), headers, {}, 1),
    },
    rounds,
  );
}

export function tenantsTargets(rows: Row[]): Target[] {
  const read = rows.find((r) => r.name.startsWith('GET /api/tenants'));
  if (!read) return [];
  return [
    // No answer within the run is no figure, not 0 ms.
    atMost(
      `tenants read with ${SCHEMAS} schemas, p50`,
      read.rps > 0 ? read.p50 : Number.POSITIVE_INFINITY,
      200,
      ' ms',
    ),
    shown(`tenants read with ${SCHEMAS} schemas, req/s`, read.rps, ' req/s'),
  ];
}
