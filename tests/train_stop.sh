#!/bin/sh
# Usage: train_stop.sh SIGNAL PATTERN OUT COMMAND...
# Runs COMMAND in the background with its stdout and stderr in OUT.out and OUT.err, waits until its stdout has a
# line matching PATTERN (grep), sends it SIGNAL and prints "exit: <its exit status>". With SECOND_RUN=1 it first
# runs COMMAND a second time, to the end, and prints "second: <exit status>", "holder: <pid of the first>" and the
# second's stderr.
set -u
signal=$1
pattern=$2
out=$3
shift 3
# Removed first: the wait below must not find the pattern in an earlier run's output before this one's starts.
rm -f "$out.out" "$out.err"
"$@" >"$out.out" 2>"$out.err" &
pid=$!
tries=0
until grep -q "$pattern" "$out.out" 2>/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null || [ "$tries" -ge 6000 ]; then
    echo "no line matching '$pattern' while the command ran"
    break
  fi
  tries=$((tries + 1))
  sleep 0.05
done
if [ "${SECOND_RUN:-0}" = 1 ]; then
  "$@" >/dev/null 2>"$out.second.err"
  echo "second: $?"
  echo "holder: $pid"
  cat "$out.second.err"
fi
kill "-$signal" "$pid"
wait "$pid"
status=$?
echo "exit: $status"
# A run that did not stop on the signal (it crashed, or ended first) shows what it printed, for the failure's report.
case $status in
  130 | 143) ;;
  *) echo "its stderr:"; cat "$out.err" ;;
esac
