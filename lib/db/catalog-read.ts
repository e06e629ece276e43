import type pg from 'pg';

/** A catalog read's one row as pg parses it, or as `row_to_json` renders it (CatalogRead's contract). */
export type CatalogRow = Record<string, unknown>;

/**
 * A read of the catalog (or dbadmin's own tables) that a route's work starts with, on the
 * service's pool: no tenant code, no lock a tenant can hold. It runs alone, or carried as one more
 * column of the request's sign-in read (lib/http/authenticate), so that authentication and the read
 * take one round trip. Carried, it must answer exactly as alone, and it is parsed and planned (with
 * its parameters' values) for every caller, before the credentials are judged, although it runs
 * only for those about to pass. Hence its contract:
 *
 * - its parameters are only compared with columns (no function or cast of them that could fail);
 * - its columns come out the same from pg's parsers and from `row_to_json`: text, names, booleans,
 *   int2/int4/float8, json, text[] (not oid, numeric, int8 past 2^53, dates);
 * - one name, one text.
 *
 * test/integration/catalog-reads.test.ts holds every route's read to it.
 */
export interface CatalogRead<T> {
  /** Names its prepared statement, alone and carried; at most 47 bytes. */
  name: string;
  /** A SELECT of at most one row, with parameters $1 to $n. */
  text: string;
  values: unknown[];
  /**
   * The tenant schema it reads about, or null: an API key's sign-in read carries it only within
   * the key's own schema, and a key's read of another schema is refused (lib/http/handler).
   */
  schema: string | null;
  /** Its row (undefined: none) as the route's value; throws the route's 404s. */
  decode: (row: CatalogRow | undefined) => T;
}

export async function runCatalogRead<T>(db: pg.Pool | pg.ClientBase, read: CatalogRead<T>): Promise<T> {
  const { rows } = await db.query<CatalogRow>({ name: read.name, text: read.text, values: read.values });
  return read.decode(rows[0]);
}

/** Whether two reads ask the same question (a read made before authentication, and after it). */
export const sameRead = (a: CatalogRead<unknown>, b: CatalogRead<unknown>) =>
  a.name === b.name &&
  a.text === b.text &&
  a.schema === b.schema &&
  a.values.length === b.values.length &&
  a.values.every((value, i) => Object.is(value, b.values[i]));
