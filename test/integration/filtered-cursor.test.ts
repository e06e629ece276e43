import type pg from 'pg';
import { handler as query } from '#functions/query';
import { handler as tables } from '#functions/tables';
import { type SearchPageInput, searchStatement } from '#lib/admin/row-search';
import { EXACT_COUNT_MAX_ROWS } from '#lib/admin/table-pages';
import { getConfig } from '#lib/config';
import { runCatalogRead } from '#lib/db/catalog-read';
import { closePool } from '#lib/db/pool';
import { tableEstimateRead } from '#lib/db/table-estimate';
import { loginAs } from '#test/security/tenant';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * Paging by cursor under a filter (issue 35): a sort key the filter fixes (`qty.eq.7`) is left out
 * of the cursor's condition, and a column the filter keeps from NULL loses its `IS NULL` branch,
 * so a deep page seeks in the index its plan walks instead of walking it from the start. Every
 * walk, across NULLs and ties, is checked against the same rows read as one page; the plans of a
 * table big enough for PostgreSQL to walk its key's index against the first page's.
 */
afterAll(closePool);

let schema: string;

type Query = Record<string, string | string[]>;

async function sql(text: string) {
  const reply = await call(query, { method: 'POST', path: '/api/query', body: { sql: text, schema } });
  if (reply.status !== 200) throw new Error(`${text}: ${reply.text}`);
  return reply.body.rows as Record<string, unknown>[];
}

const find = (table: string, q: Query) =>
  call(tables, { path: `/api/table/${table}`, query: { schema, ...q } });

/** The ids of one page. */
async function page(table: string, q: Query): Promise<{ ids: number[]; nextCursor: string | null }> {
  const reply = await find(table, q);
  if (reply.status !== 200) throw new Error(`${JSON.stringify(q)}: ${reply.status} ${reply.text}`);
  return { ids: reply.body.data.map((row: { id: number }) => row.id), nextCursor: reply.body.nextCursor };
}

/** Every page by nextCursor, `size` rows at a time: the ids in the order they came. */
async function walk(table: string, q: Query, size: number): Promise<number[]> {
  const seen: number[] = [];
  let after: string | undefined;
  for (let pages = 0; pages < 500; pages++) {
    const found = await page(table, { ...q, limit: String(size), ...(after ? { after } : {}) });
    seen.push(...found.ids);
    after = found.nextCursor ?? undefined;
    if (!after) return seen;
  }
  throw new Error('the cursor never ended');
}

/**
 * stock: 300 rows; qty 0..4 with a NULL in every 11th row, name n0..n3 with a NULL in every 7th:
 * ties on both, and NULLs placed first and last. An index on qty, as the table has.
 */
beforeAll(async () => {
  schema = await freshSchema('fcur');
  // ci: 'a' and 'A' under a case-insensitive collation, where `=` holds for values that differ.
  await sql(`CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
             CREATE TABLE stock (id int PRIMARY KEY, qty int, name text, ci text COLLATE ci);
             INSERT INTO stock SELECT g, CASE WHEN g % 11 = 0 THEN NULL ELSE g % 5 END,
                                         CASE WHEN g % 7 = 0 THEN NULL ELSE 'n' || (g % 4) END,
                                         CASE WHEN g % 3 = 0 THEN 'A' ELSE 'a' END
                                 FROM generate_series(1, 300) g;
             CREATE INDEX stock_qty ON stock (qty);`);
});

describe('walking a filtered order by cursor', () => {
  it.each<[string, Query]>([
    ['the order on the column an eq fixes', { filter: 'qty.eq.3', order: 'qty' }],
    ['it descending', { filter: 'qty.eq.3', order: 'qty.desc' }],
    ['another column, with ties and NULLs', { filter: 'qty.eq.3', order: 'name' }],
    ['another column descending', { filter: 'qty.eq.3', order: 'name.desc' }],
    ['NULLs first, then the fixed column', { filter: 'qty.eq.3', order: 'name.asc.nullsfirst,qty' }],
    ['two fixed columns', { filter: ['qty.eq.3', 'name.eq.n1'], order: 'name,qty.desc' }],
    ['a fixed column between two others', { filter: 'qty.eq.2', order: 'name.nullsfirst,qty,id.desc' }],
    ['the key fixed', { filter: 'id.eq.10', order: 'qty' }],
    ['a range that keeps NULLs out', { filter: 'qty.gt.1', order: 'qty' }],
    ['it descending with another column', { filter: 'qty.gt.1', order: 'qty.desc,name' }],
    ['not.is.null', { filter: 'qty.not.is.null', order: 'qty.desc.nullslast,name.nullsfirst' }],
    ['a negated eq, which keeps NULLs out', { filter: 'name.not.eq.n2', order: 'name,qty' }],
    ['is.null, which keeps them', { filter: 'qty.is.null', order: 'qty,name' }],
    ['an or, which fixes nothing', { or: '(qty.eq.1,qty.is.null)', order: 'qty' }],
    ['not.in.(), which lets NULLs through', { filter: 'qty.not.in.()', order: 'qty' }],
    ['an eq under a case-insensitive collation, which fixes nothing', { filter: 'ci.eq.a', order: 'ci' }],
    ['an and group', { and: '(qty.eq.4,name.is.null)', order: 'name,qty' }],
    [
      'a negated and group, which fixes nothing',
      { and: '(not.and(qty.eq.4,name.eq.n0))', order: 'qty,name' },
    ],
  ])('walks every row once: %s', async (_, q) => {
    const all = (await page('stock', { ...q, limit: '1000' })).ids;

    expect(all.length).toBeGreaterThan(0);
    for (const size of [1, 4, 9]) expect(await walk('stock', q, size)).toEqual(all);
  });

  it('reads a cursor made under another filter as the row it names', async () => {
    // Page 1 of qty = 2 ends at a row (2, id): every qty = 3 row comes after it, no qty = 1 row.
    const { nextCursor } = await page('stock', { filter: 'qty.eq.2', order: 'qty', limit: '3' });
    const after = nextCursor as string;
    const rest = async (filter: string) =>
      (await page('stock', { filter, order: 'qty', limit: '1000', after })).ids;

    expect(await rest('qty.eq.3')).toEqual(
      (await page('stock', { filter: 'qty.eq.3', order: 'qty', limit: '1000' })).ids,
    );
    expect(await rest('qty.eq.1')).toEqual([]);
    expect((await rest('qty.eq.2')).length).toBe(
      (await page('stock', { filter: 'qty.eq.2', order: 'qty', limit: '1000' })).ids.length - 3,
    );
  });
});

interface PlanNode {
  'Node Type': string;
  'Index Cond'?: string;
  'Recheck Cond'?: string;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

/**
 * big: 200,000 rows, qty = id % 1000 (NULL in every 997th), an index on qty: big enough that
 * PostgreSQL pages `qty.eq.7` ordered by qty along the key's index, filtering as it goes. ranked:
 * the same rows with an index on (qty, id), which a row comparison on (qty, id) can seek in.
 */
describe('a deep page under a filter', () => {
  let tenant: pg.Client;
  beforeAll(async () => {
    const rows = `SELECT g, CASE WHEN g % 997 = 0 THEN NULL ELSE g % 1000 END FROM generate_series(1, 200000) g`;
    await sql(`CREATE TABLE big (id int PRIMARY KEY, qty int); INSERT INTO big ${rows};
               CREATE INDEX big_qty ON big (qty); ANALYZE big;
               CREATE TABLE ranked (id int PRIMARY KEY, qty int); INSERT INTO ranked ${rows};
               CREATE INDEX ranked_qty_id ON ranked (qty, id); ANALYZE ranked;`);
    tenant = loginAs(`${schema}_user`, 'schema-pass-1');
    await tenant.connect();
  }, 60_000);
  afterAll(() => tenant.end());

  type Search = Pick<SearchPageInput, 'filter' | 'order' | 'after'>;

  /** The page's statement as searchPage runs it, explained with its rows read, as the schema's role. */
  async function plan(table: string, search: Search) {
    const info = await runCatalogRead(tenant, tableEstimateRead(schema, table));
    const { text, values } = searchStatement(info, {
      ...search,
      page: 1,
      limit: 10,
      count: false,
      cursorSecret: (await getConfig()).DBADMIN_SECRET,
      exactCountMaxRows: EXACT_COUNT_MAX_ROWS,
    });
    // The plan that walks the key's index, as PostgreSQL's default cost of a random page (4) picks
    // it; the embedded server's 1.1 (bin/embedded-postgres) reads the qty index and sorts instead.
    await tenant.query("SET random_page_cost = '4'");
    const { rows } = await tenant
      .query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values)
      .finally(() => tenant.query('RESET random_page_cost'));
    const nodes = nodesOf((rows[0]['QUERY PLAN'] as { Plan: PlanNode }[])[0]?.Plan as PlanNode);
    return {
      removed: nodes.reduce((sum, node) => sum + (node['Rows Removed by Filter'] ?? 0), 0),
      /** Some index condition starts the scan past the cursor's key. */
      seeksTheKey: nodes.some((node) =>
        /\bid > /.test(`${node['Index Cond'] ?? ''} ${node['Recheck Cond'] ?? ''}`),
      ),
    };
  }

  it('seeks past the cursor in the key’s index when an eq fixes the sort column', async () => {
    const search = { filter: ['qty.eq.7'], order: 'qty' };
    let after: string | undefined;
    for (let n = 1; n < 10; n++) {
      after = (await page('big', { ...search, limit: '10', ...(after ? { after } : {}) }))
        .nextCursor as string;
    }

    const first = await plan('big', search);
    const tenth = await plan('big', { ...search, after });

    expect(tenth.seeksTheKey).toBe(true);
    // Before: the tenth page filtered out the rows of the nine before it too (some 90,000).
    expect(tenth.removed).toBeLessThanOrEqual(2 * first.removed + 1000);
  });

  it('seeks by the row comparison when the filter keeps the sort column from NULL', async () => {
    const search = { filter: ['qty.gt.500'], order: 'qty' };
    const { nextCursor } = await page('ranked', { ...search, limit: '10', page: '100' });

    const deep = await plan('ranked', { ...search, after: nextCursor as string });

    // Before: `OR qty IS NULL` kept (qty, id) out of the index condition, and the 1,000 rows of
    // the pages before were read and filtered out.
    expect(deep.removed).toBeLessThan(100);
  });
});
