#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised: what PgBouncer (docker compose
# --profile pgbouncer) needs to serve every tenant login without a file of their passwords, a
# login of its own that may only call pgbouncer.get_auth (bin/pgbouncer-auth.ts). Harmless
# without PgBouncer: the login has no password until PGBOUNCER_AUTH_PASSWORD gives it one.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname dbadmin <<'SQL'
DO $auth$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pgbouncer_auth') THEN
    CREATE ROLE pgbouncer_auth LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT CONNECTION LIMIT 10;
  END IF;
END $auth$;
CREATE SCHEMA IF NOT EXISTS pgbouncer;
REVOKE ALL ON SCHEMA pgbouncer FROM PUBLIC;
GRANT USAGE ON SCHEMA pgbouncer TO pgbouncer_auth;
CREATE OR REPLACE FUNCTION pgbouncer.get_auth(p_usename pg_catalog.text)
  RETURNS TABLE (username pg_catalog.text, password pg_catalog.text)
  LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, pg_temp
AS $fn$
  SELECT a.rolname::pg_catalog.text,
         CASE WHEN a.rolvaliduntil IS NULL OR a.rolvaliduntil OPERATOR(pg_catalog.>) pg_catalog.now()
              THEN a.rolpassword END
    FROM pg_catalog.pg_authid a
   WHERE a.rolname OPERATOR(pg_catalog.=) p_usename
     AND a.rolcanlogin
     AND NOT a.rolsuper AND NOT a.rolbypassrls AND NOT a.rolreplication
     AND a.rolname OPERATOR(pg_catalog.<>) 'pgbouncer_auth'
$fn$;
REVOKE ALL ON FUNCTION pgbouncer.get_auth(pg_catalog.text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION pgbouncer.get_auth(pg_catalog.text) TO pgbouncer_auth;
SQL
if [ -n "${PGBOUNCER_AUTH_PASSWORD:-}" ]; then
  psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname dbadmin --set=pw="$PGBOUNCER_AUTH_PASSWORD" <<'SQL'
ALTER ROLE pgbouncer_auth PASSWORD :'pw';
SQL
fi
