#!/bin/sh
# fuzz-replay.sh: every fuzz harness over its committed corpus (seeds and
# regression inputs of crashes once found), built with the ordinary compiler
# as plain programs (TAP, one line per harness).  The fuzzing itself, with
# clang's libFuzzer, is tests/fuzz/run.sh.
src=${HICP_SRCDIR:-.}
build=${HICP_BUILD_DIR:-.}
names="ply pcd off xyz model_file model_build"
set -- $names
echo "1..$#"
n=0
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for name in $names; do
  n=$((n + 1))
  "$build/tests/fuzz/replay_$name" "$src/tests/fuzz/corpus/$name" >"$tmp" 2>&1
  rc=$?
  count=$(grep -c '^ok ' "$tmp")
  if [ $rc -eq 0 ] && [ "$count" -gt 0 ] && ! grep -q '^not ok' "$tmp"; then
    echo "ok $n - $name: $count inputs replayed"
  else
    echo "not ok $n - $name: failed after $count inputs (exit $rc)"
    tail -5 "$tmp" | sed 's/^/# /'
  fi
done
