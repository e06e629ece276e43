#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised: what PgBouncer (docker compose
# --profile pgbouncer) needs to serve every tenant login without a file of their passwords, a
# login of its own that may only call _dbadmin_pgbouncer.get_auth (bin/pgbouncer-auth.ts). Harmless
# without PgBouncer: the login has no password until PGBOUNCER_AUTH_PASSWORD gives it one.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname dbadmin <<'SQL'
DO $auth$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgbouncer_auth') THEN
    CREATE ROLE pgbouncer_auth LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT CONNECTION LIMIT 10;
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
GRANT USAGE ON SCHEMA _dbadmin_pgbouncer TO pgbouncer_auth;
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
     AND a.rolname OPERATOR(pg_catalog.<>) 'pgbouncer_auth'
$fn$;
REVOKE ALL ON FUNCTION _dbadmin_pgbouncer.get_auth(pg_catalog.text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _dbadmin_pgbouncer.get_auth(pg_catalog.text) TO pgbouncer_auth;
SQL
if [ -n "${PGBOUNCER_AUTH_PASSWORD:-}" ]; then
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname dbadmin --set=pw="$PGBOUNCER_AUTH_PASSWORD" <<'SQL'
ALTER ROLE pgbouncer_auth PASSWORD :'pw';
SQL
fi
