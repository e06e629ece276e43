#!/bin/sh
# npm start's supervisor: runs the host (the command in its arguments), and runs it again half a
# second after it ends by a crash: exit 70, an uncaught error the host logged before leaving
# (bin/contain-errors.cjs); exit 75, an embedded PostgreSQL that kept dying however often the host
# started it again (bin/postgres-restart.ts); or a signal it did not ask for (KILL, ABRT when out
# of memory, SEGV, BUS). A host that crashes again within a minute of starting waits twice as long
# each time, up to 30 s, so one that cannot stay up does not spin. Any other end is final, with the
# host's status: 0 when stopped, 1 when it could not start.
# Ctrl-C and SIGTERM stop the host and this with it. A shell, not a second Node process: it costs
# a few hundred kilobytes, not 50 MB.
child=
stopping=
trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' INT TERM

why() {
  case $1 in
    70) echo 'an uncaught error, logged above' ;;
    75) echo 'its embedded PostgreSQL kept dying, logged above' ;;
    134) echo 'aborted: out of memory?' ;;
    135) echo 'killed by SIGBUS' ;;
    137) echo 'killed by SIGKILL' ;;
    139) echo 'killed by SIGSEGV' ;;
  esac
}

# Seconds since the epoch (POSIX date has no finer unit).
now() { date +%s; }

# The pause before the next start, after `quick` crashes in a row, each within a minute of its start.
pause() {
  case $1 in
    0) echo 0.5 ;;
    1) echo 1 ;;
    2) echo 2 ;;
    3) echo 4 ;;
    4) echo 8 ;;
    5) echo 16 ;;
    *) echo 30 ;;
  esac
}

quick=0
while :; do
  # A stop asked for while none ran (during the pause below) is honoured here.
  [ -n "$stopping" ] && exit 0
  started=$(now)
  "$@" &
  child=$!
  # ...and one that came between the start and the line above.
  [ -n "$stopping" ] && kill -TERM "$child" 2>/dev/null
  status=0
  wait "$child" || status=$?
  # A trapped signal ends the wait early: wait again until the host has ended.
  while kill -0 "$child" 2>/dev/null; do
    status=0
    wait "$child" || status=$?
  done
  child=
  [ -n "$stopping" ] && exit 0
  reason=$(why "$status")
  [ -n "$reason" ] || exit "$status"
  # A host that stayed up a minute starts the count again.
  [ $(($(now) - started)) -lt 60 ] || quick=0
  wait_for=$(pause "$quick")
  quick=$((quick + 1))
  echo "dbadmin: the host ended (exit $status: $reason); starting it again in ${wait_for} s" >&2
  sleep "$wait_for" 2>/dev/null || sleep 1
done
