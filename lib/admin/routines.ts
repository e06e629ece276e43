import type pg from 'pg';
import { schemaNotFound } from '#lib/db/catalog';

/**
 * A schema's functions and procedures as the catalog lists them, for the SQL editor's completion
 * and anyone reading the schema: name, arguments and result as PostgreSQL prints them. Read on
 * the service's pool from pg_proc alone (the printing functions read the system caches, take no
 * lock and run none of the tenant's code).
 */

export interface Routine {
  name: string;
  /** The arguments as a call names them, `a integer, b text DEFAULT 'x'`. */
  arguments: string;
  /** The result type, `integer`, `SETOF record`, `TABLE(id integer)`; null for a procedure. */
  result: string | null;
  kind: 'function' | 'procedure' | 'aggregate' | 'window';
}

const KIND = `CASE p.prokind WHEN 'p' THEN 'procedure' WHEN 'a' THEN 'aggregate' WHEN 'w' THEN 'window' ELSE 'function' END`;

/** At most this many are listed, each form cut at PRINTED_CHARS (a default can be a long constant): under 2 MB. */
export const ROUTINES_LISTED = 2000;
const PRINTED_CHARS = 400;

const ROUTINES = `
  SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1) AS schema_exists,
         (SELECT coalesce(pg_catalog.json_agg(r ORDER BY r.name, r.arguments), '[]')
            FROM (SELECT p.proname AS name,
                         pg_catalog.left(pg_catalog.pg_get_function_arguments(p.oid), ${PRINTED_CHARS}) AS arguments,
                         CASE WHEN p.prokind = 'p' THEN NULL
                              ELSE pg_catalog.left(pg_catalog.pg_get_function_result(p.oid), ${PRINTED_CHARS}) END AS result,
                         ${KIND} AS kind
                    FROM pg_catalog.pg_proc p
                    JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
                   WHERE n.nspname = $1
                   ORDER BY p.proname, p.oid
                   LIMIT $2) AS r) AS routines`;

export async function listRoutines(catalog: pg.Pool, schema: string) {
  const { rows } = await catalog.query<{ schema_exists: boolean; routines: Routine[] }>({
    name: 'dbadmin.routines',
    text: ROUTINES,
    values: [schema, ROUTINES_LISTED],
  });
  if (!rows[0]?.schema_exists) throw schemaNotFound(schema);
  return { schema, functions: rows[0].routines };
}
