#!/usr/bin/env bash
# Runs one golden CLI test: loom with the arguments on the first line of the .cmd file;
# compares the exit code ("exit: N" line, default 0), stdout with .out and stderr with .err
# when those files exist. Version strings are stripped before comparing.
# Set LOOM_GOLDEN_UPDATE=1 to rewrite the expected files from the current output.
set -u
loom=$1
cmd=$2
base=${cmd%.cmd}
args=$(head -n 1 "$cmd")
want_exit=$(sed -n 's/^exit: *//p' "$cmd")
want_exit=${want_exit:-0}
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
eval "\"$loom\" $args" >"$out" 2>"$err"
got_exit=$?
strip() { sed -E 's/"version": "[^"]*"/"version": "X"/; s/loom [0-9]+\.[0-9]+\.[0-9]+/loom X/' "$1"; }
status=0
if [ "$got_exit" != "$want_exit" ]; then
  echo "exit code $got_exit, expected $want_exit"; cat "$err"; status=1
fi
for kind in out err; do
  file=$out; [ $kind = err ] && file=$err
  if [ "${LOOM_GOLDEN_UPDATE:-0}" = 1 ] && [ -f "$base.$kind" ]; then strip "$file" >"$base.$kind"; continue; fi
  if [ -f "$base.$kind" ] && ! diff -u "$base.$kind" <(strip "$file"); then
    echo "std$kind differs from $base.$kind"; status=1
  fi
done
exit $status
