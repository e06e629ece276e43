#!/bin/sh
# Writes PgBouncer's auth file (the auth user's password only; tenants' logins are looked up
# through _dbadmin_pgbouncer.get_auth) where only this user reads it, then runs PgBouncer in the foreground.
set -eu
: "${PGBOUNCER_AUTH_PASSWORD:?set PGBOUNCER_AUTH_PASSWORD}"
umask 077
mkdir -p /run/pgbouncer
printf '"pgbouncer_auth" "%s"\n' "$(printf '%s' "$PGBOUNCER_AUTH_PASSWORD" | sed 's/"/""/g')" > /run/pgbouncer/userlist.txt
exec pgbouncer /etc/pgbouncer/pgbouncer.ini
