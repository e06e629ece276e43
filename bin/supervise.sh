#!/bin/sh
# npm start's supervisor: runs the host (the command in its arguments), and runs it again half a
# second after it ends by a crash: exit 70, an uncaught error the host logged before leaving
# (bin/contain-errors.cjs); or a signal it did not ask for (KILL, ABRT when out of memory, SEGV,
# BUS). Any other end is final, with the host's status: 0 when stopped, 1 when it could not start.
# Ctrl-C and SIGTERM stop the host and this with it. A shell, not a second Node process: it costs
# a few hundred kilobytes, not 50 MB.
child=
stopping=
trap 'stopping=1; [ -n "$child" ] && kill -TERM "$child" 2>/dev/null' INT TERM

why() {
  case $1 in
    70) echo 'an uncaught error, logged above' ;;
    134) echo 'aborted: out of memory?' ;;
    135) echo 'killed by SIGBUS' ;;
    137) echo 'killed by SIGKILL' ;;
    139) echo 'killed by SIGSEGV' ;;
  esac
}

while :; do
  # A stop asked for while none ran (during the pause below) is honoured here.
  [ -n "$stopping" ] && exit 0
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
  echo "dbadmin: the host ended (exit $status: $reason); starting it again" >&2
  sleep 0.5 2>/dev/null || sleep 1
done
