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
SQL
