#!/bin/sh
# bench-smoke.sh: bench/run --smoke works end to end (TAP).  Checks the
# harness only (data made, every experiment recorded, report and plots
# written), never the speed: timings belong to `make bench`.  Then that
# hicp_bench refuses, with exit 2, what it cannot time.
# Needs $HICP_SRCDIR, $HICP_BUILD_DIR, python3 and the libcgal-demo models.
src=${HICP_SRCDIR:-.}
build=${HICP_BUILD_DIR:-.}
if ! command -v python3 >/dev/null 2>&1; then
  echo "1..0 # SKIP python3 not installed"; exit 0
fi
if [ ! -f /usr/share/doc/libcgal-dev/data.tar.gz ]; then
  echo "1..0 # SKIP libcgal-demo not installed"; exit 0
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/hicp-bench.XXXXXX")
trap 'rm -rf "$out"' EXIT
echo "1..8"
if python3 "$src/bench/run" --smoke --build "$build" --out "$out/run" --report "$out/report.md" \
    >"$out/log" 2>&1; then
  echo "ok 1 - bench/run --smoke exits 0"
else
  echo "not ok 1 - bench/run --smoke exits 0"; sed 's/^/# /' "$out/log"
fi
missing=
for e in E1 E2 E3 E4 E5_points E5_build E5_queries E5_batch E6 machine; do
  [ -s "$out/run/results/$e.jsonl" ] || missing="$missing $e"
done
if [ -z "$missing" ]; then echo "ok 2 - every experiment recorded"; else
  echo "not ok 2 - every experiment recorded (missing:$missing)"; fi
missing=
for s in "## E1" "## E2" "## E3" "## E4" "## E5" "## E6" "## Machine" "## GPU"; do
  grep -q "^$s" "$out/report.md" 2>/dev/null || missing="$missing '$s'"
done
if [ -z "$missing" ]; then echo "ok 3 - report has every section"; else
  echo "not ok 3 - report has every section (missing:$missing)"; fi
py=python3; [ -x /usr/bin/python3 ] && py=/usr/bin/python3  # where bench/run draws
if $py -c "import matplotlib" 2>/dev/null; then
  n=$(ls "$out"/img/*.png 2>/dev/null | wc -l)
  if [ "$n" -eq 6 ]; then echo "ok 4 - six plots"; else echo "not ok 4 - six plots (got $n)"; fi
else
  echo "ok 4 # SKIP python3-matplotlib not installed"
fi
# refused before any file is read, so M, Q and S need not exist: no
# rounds (ns_per_query would be 0/0), an unknown mode (it printed nothing
# and exited 0), an option without its value (it was dropped)
n=4
for args in "nn M Q --rounds 0" "nosuchmode M S" "register M S --iters"; do
  n=$((n + 1))
  "$build/bench/hicp_bench" $args >"$out/hb.out" 2>"$out/hb.err"
  rc=$?
  if [ $rc -eq 2 ] && [ ! -s "$out/hb.out" ] && [ "$(wc -l <"$out/hb.err")" -eq 1 ]; then
    echo "ok $n - hicp_bench $args: exit 2, one line"
  else
    echo "not ok $n - hicp_bench $args: exit 2, one line (got $rc)"; sed 's/^/# /' "$out/hb.err"
  fi
done
# a list's line is one scan's name however long it is (a fixed buffer cut
# one too long to open into two names, and the error named neither)
model=$(ls "$out"/run/data/*.hicpm 2>/dev/null | head -n 1)
if [ -n "$model" ]; then
  python3 -c "print('x' * 5000 + 'END.ply')" >"$out/list"
  "$build/bench/hicp_bench" register "$model" "@$out/list" >"$out/hb.out" 2>"$out/hb.err"
  rc=$?
  if [ $rc -eq 1 ] && [ ! -s "$out/hb.out" ] && [ "$(wc -l <"$out/hb.err")" -eq 1 ] \
      && grep -q "xEND.ply" "$out/hb.err"; then
    echo "ok 8 - hicp_bench names a long listed scan whole"
  else
    echo "not ok 8 - hicp_bench names a long listed scan whole (got $rc)"; cut -c 1-200 "$out/hb.err" | sed 's/^/# /'
  fi
else
  echo "not ok 8 - hicp_bench names a long listed scan whole (no model in $out/run/data)"
fi
