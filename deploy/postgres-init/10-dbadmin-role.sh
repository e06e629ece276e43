#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised (docker-entrypoint-initdb.d): the
# role dbadmin connects as, and the database it owns. Not a superuser: CREATEROLE (it makes each
# schema's roles) and owning its database (it creates schemas) are all it needs. The superuser
# is used for this and nothing else. Same steps as bin/embedded-postgres.ts provisionServiceRole.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres --set=pw="$DBADMIN_DB_PASSWORD" <<'SQL'
CREATE ROLE dbadmin LOGIN CREATEROLE NOSUPERUSER NOCREATEDB PASSWORD :'pw';
CREATE DATABASE dbadmin OWNER dbadmin;
-- Tenants' logins reach dbadmin's database only: an object one kept elsewhere would make
-- DROP ROLE fail, and the tenant impossible to delete.
REVOKE CONNECT ON DATABASE postgres FROM PUBLIC;
REVOKE CONNECT ON DATABASE template1 FROM PUBLIC;
-- pg_logical_emit_message writes to the WAL outside any transaction (no rollback takes it back):
-- nobody dbadmin serves needs it. Function rights are per database.
\connect dbadmin
DO $$
DECLARE f regprocedure;
BEGIN
  FOR f IN SELECT oid::regprocedure FROM pg_catalog.pg_proc WHERE proname = 'pg_logical_emit_message' LOOP
    EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', f);
  END LOOP;
END $$;
-- The hub: what makes and administers tenants' roles, so that dbadmin is a member of none of
-- them (lib/db/role-admin.ts hubProvisioning); pg_signal_backend and pg_read_all_stats to end
-- their sessions and see what they run. One transaction: all of it or none.
BEGIN;
DO $hub$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'dbadmin_tenants') THEN
    CREATE ROLE "dbadmin_tenants" NOLOGIN NOINHERIT CREATEROLE;
  END IF;
END $hub$;
CREATE SCHEMA IF NOT EXISTS _dbadmin_roles AUTHORIZATION "dbadmin_tenants";
REVOKE ALL ON SCHEMA _dbadmin_roles FROM PUBLIC;
GRANT USAGE ON SCHEMA _dbadmin_roles TO "dbadmin";
DROP FUNCTION IF EXISTS _dbadmin_roles.hub(pg_catalog.text);
CREATE FUNCTION _dbadmin_roles.hub(statements pg_catalog.text)
  RETURNS void LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
  AS $door$ BEGIN EXECUTE statements; END $door$;
REVOKE ALL ON FUNCTION _dbadmin_roles.hub(pg_catalog.text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION _dbadmin_roles.hub(pg_catalog.text) TO "dbadmin";
ALTER FUNCTION _dbadmin_roles.hub(pg_catalog.text) OWNER TO "dbadmin_tenants";
GRANT pg_signal_backend, pg_read_all_stats TO "dbadmin";
COMMIT;
SQL
