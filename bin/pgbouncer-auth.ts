/**
 * What PgBouncer needs in dbadmin's database to serve every tenant login without a file of their
 * passwords (the container's `pgbouncer` profile, and the tests and benchmarks that run the real
 * PgBouncer): a login of its own, `pgbouncer_auth`, that may do one thing, call
 * `_dbadmin_pgbouncer.get_auth(name)`, a SECURITY DEFINER function answering a login's SCRAM
 * verifier, in a schema whose name no tenant may take (the API refuses names starting with `_`).
 * PgBouncer checks a client's SCRAM proof against it and, from that proof, logs in to PostgreSQL
 * as the same role (SCRAM pass-through): it never learns a password.
 *
 * CVE-2025-12819 (PgBouncer before 1.25.1): a client's startup packet could set the search_path
 * the auth_query ran with, when `search_path` was in `track_extra_parameters`, so an unqualified
 * name or operator in the query could be an attacker's. Here the query names its function
 * schema-qualified and holds no operator (AUTH_QUERY), the function pins `search_path =
 * pg_catalog, pg_temp` and qualifies its own operators, and dbadmin's configuration never sets
 * `track_extra_parameters`.
 *
 * It never answers for a superuser, a role that bypasses row security, a replication role, or
 * itself: those never go through the pooler. Run by a superuser (only one may read pg_authid);
 * idempotent. The auth user's password is set apart (psql's :'pw', or ALTER ROLE).
 */

export const PGBOUNCER_AUTH_USER = 'pgbouncer_auth';

/** PgBouncer's auth_query: schema-qualified, no operator, nothing a search_path could redirect. */
export const AUTH_QUERY = 'SELECT username, password FROM _dbadmin_pgbouncer.get_auth($1)';

export const pgbouncerAuthProvisioning = () => `DO $auth$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = '${PGBOUNCER_AUTH_USER}') THEN
    CREATE ROLE ${PGBOUNCER_AUTH_USER} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT CONNECTION LIMIT 10;
  END IF;
END $auth$;
DO $schema$
BEGIN
  -- Never a schema someone else made under the name: its owner could replace the function.
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_namespace
              WHERE nspname = '_dbadmin_pgbouncer' AND nspowner <> (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = CURRENT_USER)) THEN
    RAISE EXCEPTION 'schema _dbadmin_pgbouncer exists and belongs to another role: drop it, then run this again';
  END IF;
END $schema$;
CREATE SCHEMA IF NOT EXISTS _dbadmin_pgbouncer;
REVOKE ALL ON SCHEMA _dbadmin_pgbouncer FROM PUBLIC;
GRANT USAGE ON SCHEMA _dbadmin_pgbouncer TO ${PGBOUNCER_AUTH_USER};
CREATE OR REPLACE FUNCTION _dbadmin_pgbouncer.get_auth(p_usename pg_catalog.text)
  RETURNS TABLE (username pg_catalog.text, password pg_catalog.text)
  LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
  SELECT a.rolname::pg_catalog.text, a.rolpassword
    FROM pg_catalog.pg_authid a
   WHERE a.rolname OPERATOR(pg_catalog.=) p_usename
     AND a.rolcanlogin
     AND (a.rolvaliduntil IS NULL OR a.rolvaliduntil OPERATOR(pg_catalog.>) pg_catalog.now())
     AND NOT a.rolsuper AND NOT a.rolbypassrls AND NOT a.rolreplication
     AND a.rolname OPERATOR(pg_catalog.<>) '${PGBOUNCER_AUTH_USER}'
$fn$;
REVOKE ALL ON FUNCTION _dbadmin_pgbouncer.get_auth(pg_catalog.text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _dbadmin_pgbouncer.get_auth(pg_catalog.text) TO ${PGBOUNCER_AUTH_USER};`;
