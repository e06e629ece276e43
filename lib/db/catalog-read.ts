import type pg from 'pg';

/** A catalog read's one row as pg parses it, or as `row_to_json` renders it: the same values. */
export type CatalogRow = Record<string, unknown>;

/**
 * A read of the catalog (or dbadmin's own tables) that a route's work starts with, on the
 * service's pool: no tenant code, no lock a tenant can hold. It runs alone, or as one column of the
 * request's sign-in read (lib/http/authenticate), so that authentication and the read take one round
 * trip; its columns must therefore come out the same from pg and from `row_to_json` (text, numbers,
 * booleans, arrays, json; no dates).
 */
export interface CatalogRead<T> {
  /** Names its prepared statement, alone and in the sign-in read; one name, one text. */
  name: string;
  /** A SELECT of at most one row, with parameters $1 to $n and no other `$`. */
  text: string;
  values: unknown[];
  /**
   * The tenant schema it reads about, or null: an API key's sign-in read carries it only within
   * the key's own schema.
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
  a.values.length === b.values.length &&
  a.values.every((value, i) => Object.is(value, b.values[i]));
