import { routes as keyRoutes } from '#functions/keys';
import { routes as queryRoutes } from '#functions/query';
import { routes as rowRoutes } from '#functions/rows';
import { routes as schemaRoutes } from '#functions/schemas';
import { routes as tableRoutes, handler as tables } from '#functions/tables';
import { type CatalogRead, runCatalogRead } from '#lib/db/catalog-read';
import { closePool, getDatabase } from '#lib/db/pool';
import { signInRead } from '#lib/http/authenticate';
import type { AnyRoute } from '#lib/http/route';
import { withAdminClient } from '#test/support/db';
import { call } from '#test/support/http';
import { freshSchema } from '#test/support/tables';

/**
 * Every route's catalog read (lib/http/route `reads`) answers the same whether it runs alone or
 * carried by the sign-in read (lib/db/catalog-read's contract), and, carried for credentials that
 * will not pass, is parsed and planned without failing and never runs.
 */
afterAll(closePool);

const routesWithReads = [...schemaRoutes, ...tableRoutes, ...rowRoutes, ...queryRoutes, ...keyRoutes].filter(
  (route: AnyRoute) => route.reads,
) as AnyRoute[];

let schema: string;
let empty: string;
const TABLES = ['a"b', 'é😀', 'NULL', ' lead', 'a,b', 'plain'];

beforeAll(async () => {
  [schema, empty] = [await freshSchema('reads'), await freshSchema('reads')];
  await withAdminClient((c) =>
    c.query(`
      CREATE DOMAIN "${schema}".positive AS int CHECK (VALUE > 0);
      CREATE DOMAIN "${schema}".small AS "${schema}".positive CHECK (VALUE < 100);
      ${TABLES.map((t) => `CREATE TABLE "${schema}"."${t.replace(/"/g, '""')}" (id int PRIMARY KEY, label text);`).join('\n')}
      CREATE TABLE "${schema}".typed (id bigint PRIMARY KEY, n "${schema}".small, tags text[], at timestamptz, doc jsonb);
      CREATE TABLE "${schema}".parent (id int PRIMARY KEY);
      CREATE TABLE "${schema}".child (extra text) INHERITS ("${schema}".parent);
      CREATE TABLE "${schema}".parted (id int, at date) PARTITION BY RANGE (at);
      CREATE TABLE "${schema}".parted_2026 PARTITION OF "${schema}".parted FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
      INSERT INTO "${schema}".parent SELECT g FROM generate_series(1, 20) g;
      INSERT INTO "${schema}".child SELECT g, 'x' FROM generate_series(21, 30) g;
      ANALYZE "${schema}".parent; ANALYZE "${schema}".child;`),
  );
});

/** The route's read for a schema and table, as the route's own schemas parse the request. */
function readOf(route: AnyRoute, schemaName: string, table: string): CatalogRead<unknown> | undefined {
  const params = route.params?.safeParse({ tableName: table, schemaName, schema: schemaName });
  const query = route.query?.safeParse({ schema: schemaName });
  if (params?.success === false || query?.success === false) return undefined;
  return route.reads?.({ params: params?.data, query: query?.data });
}

const outcome = async (work: () => unknown) => {
  try {
    return { value: await work() };
  } catch (error) {
    return { error: String(error), status: (error as { status?: number }).status };
  }
};

const admin = { kind: 'basic', user: 'x', pass: 'y' } as const;
const carry = (read: CatalogRead<unknown>, passes: boolean) => ({
  read,
  admin: passes,
  keyTypes: [] as const,
  limit: 10,
  now: new Date(),
});

describe.each(routesWithReads.map((route) => [`${route.method} ${route.path}`, route] as const))(
  '%s',
  (_, route) => {
    const cases = () => [
      ...[...TABLES, 'typed', 'parent', 'parted'].map((table) => [schema, table]),
      [schema, 'missing'],
      ['no_such_schema', 'plain'],
      [empty, 'plain'],
    ];

    it('answers the same alone and carried by the sign-in read', async () => {
      const db = await getDatabase();
      let compared = 0;
      for (const [schemaName, table] of cases()) {
        const read = readOf(route, schemaName as string, table as string);
        if (!read) continue;
        const alone = await outcome(() => runCatalogRead(db, read));
        const carried = await outcome(async () => {
          const signIn = await signInRead(db, '192.0.2.90', admin, carry(read, true));
          if (!signIn.carried) throw new Error('not carried');
          return read.decode(signIn.carried.row);
        });
        expect({ schemaName, table, ...carried }).toEqual({ schemaName, table, ...alone });
        compared++;
      }
      expect(compared).toBeGreaterThan(0);
    });

    it('is planned without failing, and never runs, for credentials that will not pass', async () => {
      const db = await getDatabase();
      for (const [schemaName, table] of cases()) {
        const read = readOf(route, schemaName as string, table as string);
        if (!read) continue;
        // More than five times: PostgreSQL plans the first five with the values, then generically.
        for (let i = 0; i < 7; i++) {
          const signIn = await signInRead(db, '192.0.2.91', admin, carry(read, false));
          expect(signIn.carried).toBeUndefined();
        }
      }
    });
  },
);

describe('a read before the rows, for a schema whose rows no role of ours reads', () => {
  it.each([
    ['/api/table/pg_class', 'pg_catalog'],
    ['/api/table/pg_class/export', 'pg_catalog'],
    ['/api/table/tables', 'information_schema'],
  ])(
    'GET %s in %s is refused with 400 System schema, as before the read was carried',
    async (path, inSchema) => {
      const reply = await call(tables, { path, query: { schema: inSchema } });

      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('System schema');
    },
  );
});
