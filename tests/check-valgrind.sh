#!/bin/sh
# check-valgrind.sh: the hicp tool's main jobs run clean under Valgrind's
# memcheck (TAP): no invalid read or write, no use of an uninitialised
# value, no leak definitely or indirectly lost, nothing printed by
# Valgrind at all, and nothing on stderr but the tool's own lines (a
# refusal's "hicp: ...", nn --stats' figures).  The library writes nothing, also where Valgrind's
# emulated CPU makes hwloc's x86 component complain (robustness.md).  The sanitizer builds cover much of this, but not
# uninitialised reads (MemorySanitizer needs clang and an instrumented
# libgomp), and a build without sanitizers is what users run.  Skips
# without valgrind, in a sanitizer build (the two do not mix) and without
# the libcgal-demo models.  glibc's cached thread stacks show as "possibly
# lost" from pthread_create: not counted, as they are not ours to free;
# tests/valgrind.supp says what else is not ours and why.
bin=${HICP_BIN:-tools/hicp}
data=${HICP_TEST_DATA:-tests/data}/meshes
build=${HICP_BUILD_DIR:-.}
supp=${HICP_SRCDIR:-.}/tests/valgrind.supp
if ! command -v valgrind >/dev/null 2>&1; then
  echo "1..0 # SKIP no valgrind"
  exit 0
fi
if [ -n "${HICP_SANITIZER_FLAGS:-}" ]; then
  echo "1..0 # SKIP a sanitizer build"
  exit 0
fi
if [ ! -r "$data/boeing.off" ]; then
  echo "1..0 # SKIP no test data (tests/fetch-data.sh)"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hicp-valgrind.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..9"
n=0
# libtool's wrapper would be what Valgrind ran; --mode=execute runs the tool
vg() { # vg NAME EXIT-STATUS STDERR-PATTERN hicp-arguments... ("" = no stderr)
  n=$((n + 1))
  name=$1; want=$2; pat=$3; shift 3
  "$build/libtool" --mode=execute valgrind -q --error-exitcode=99 --num-callers=40 --leak-check=full \
    --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
    --suppressions="$supp" --log-file="$tmp/vg.$n" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
  st=$?
  if [ -z "$pat" ]; then quiet=$(wc -l <"$tmp/err"); else quiet=$(grep -vc "$pat" "$tmp/err"); fi
  if [ "$st" -eq "$want" ] && [ ! -s "$tmp/vg.$n" ] && [ "$quiet" -eq 0 ]; then
    echo "ok $n - $name"
  else
    echo "not ok $n - $name (exit $st, wanted $want; 99 is Valgrind's; $quiet other stderr lines)"
    sed 's/^/# /' "$tmp/err" "$tmp/vg.$n" | head -60
  fi
}
m=$data/boeing.off
vg "perturb" 0 "" perturb "$m" -o "$tmp/scan.ply" --rotate 5,-4,6 --translate-rel 0.01,0,0 \
  --noise 1e-3 --view 0,0,1 --outliers 0.1 --truth "$tmp/truth.txt"
vg "model build" 0 "" model build "$m" -o "$tmp/m.hicpm"
vg "model info" 0 "" model info "$tmp/m.hicpm"
vg "register, 2 threads, JSON" 0 "" register "$tmp/m.hicpm" "$tmp/scan.ply" --truth "$tmp/truth.txt" \
  --json --threads 2
vg "register, trimmed and filtered, 1 thread" 0 "" register "$m" "$tmp/scan.ply" --trim 0.85 \
  --filter-start 3 --filter-sigma 2.5 --max-dist 1 --threads 1 --output "$tmp/moved.ply"
vg "nn with statistics" 0 "^hicp nn: " nn "$tmp/m.hicpm" "$tmp/scan.ply" --stats --nn pnn
vg "track" 0 "" track "$tmp/m.hicpm" "$tmp/scan.ply" "$tmp/moved.ply" --json
vg "devices (hwloc, CUDA probed where built)" 0 "" devices
vg "a refused input" 1 "^hicp: " register "$m" "$tmp/missing.ply"
