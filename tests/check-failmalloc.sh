#!/bin/sh
# check-failmalloc.sh: every allocation the library makes may fail (TAP).
# Each of the tool's main jobs runs once with no allocation failing, to
# count libhicp's allocations, then once for each of them with that one
# failing (tests/failmalloc.c, preloaded).  Each run must either end as a
# refusal (exit 1, one line "hicp: ...", no output file and no temporary
# left) or recover and give exactly the unfailed run's result; never a
# crash, a hang or a different result.  Qhull's allocations are failed
# too, at a spread of points over its some 5,000 (boeing): a model
# cannot be built without its Delaunay graph, so each of those must be a
# refusal naming the memory (stop 48: one was saved as a slower model).
#
# Skips in a sanitizer build (the sanitizers' allocator comes first),
# without the shared library and module (--disable-shared) and without
# the libcgal-demo models.
bin=${HICP_BIN:-tools/hicp}
data=${HICP_TEST_DATA:-tests/data}/meshes
build=${HICP_BUILD_DIR:-.}
shim=$build/tests/.libs/failmalloc.so
if [ -n "${HICP_SANITIZER_FLAGS:-}" ]; then
  echo "1..0 # SKIP a sanitizer build"
  exit 0
fi
if [ ! -r "$shim" ] || [ ! -e "$build/.libs/libhicp.so" ]; then
  echo "1..0 # SKIP no shared build (the failing allocations are preloaded)"
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "1..0 # SKIP no python3 (to read the JSON)"
  exit 0
fi
if [ ! -r "$data/boeing.off" ]; then
  echo "1..0 # SKIP no test data (tests/fetch-data.sh)"
  exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hicp-failmalloc.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
m=$data/boeing.off
n=0
echo "1..8"
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; }

# failing IN AT command...: runs the tool in $tmp/run (emptied first), with
# the AT-th allocation made by the object IN failing (0: none); leaves the
# exit status in $st, the allocations counted in $count.
failing() {
  rm -rf "$tmp/run"; mkdir "$tmp/run"
  in=$1; at=$2; shift 2
  (cd "$tmp/run" && $limit env HICP_FAILMALLOC_IN="$in" HICP_FAILMALLOC_AT="$at" \
    HICP_FAILMALLOC_REPORT="$tmp/report" LD_PRELOAD="$shim" "$bin" "$@" >"$tmp/out" 2>"$tmp/err")
  st=$?
  count=$(cut -d' ' -f1 "$tmp/report" 2>/dev/null)
  hit=$(cut -d' ' -f2 "$tmp/report" 2>/dev/null)
  rm -f "$tmp/report"
}
# a hang is a failure too, not a stalled make check
limit=""
command -v timeout >/dev/null 2>&1 && limit="timeout 120"

# A refusal: exit 1, one line "hicp: ..." (matching $1 if given), and the
# run's directory as empty as it started.
refused() {
  [ "$st" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^hicp: ${1:-}" "$tmp/err" &&
    [ -z "$(ls -A "$tmp/run")" ]
}

# sweep NAME SAME-COMMAND command...: the job with each of libhicp's
# allocations failing in turn; SAME-COMMAND (a shell function) says whether
# a run that ended with exit 0 gave the reference result.
sweep() {
  name=$1; same=$2; shift 2
  failing libhicp 0 "$@"
  if [ "$st" -ne 0 ] || [ -z "$count" ] || [ "$count" -lt 1 ]; then
    notok "$name: the unfailed run (exit $st, ${count:-no} allocations counted)"
    sed 's/^/# /' "$tmp/err"
    return
  fi
  total=$count; bad=""; refusals=0; recovered=0; missed=0
  k=1
  while [ "$k" -le "$total" ]; do
    failing libhicp "$k" "$@"
    if refused; then
      refusals=$((refusals + 1))
    elif [ "$st" -eq 0 ] && "$same"; then
      # recovered, or (threads allocating in another order) never failed
      if [ "$hit" = 1 ]; then recovered=$((recovered + 1)); else missed=$((missed + 1)); fi
    else
      bad="$bad $k(exit $st: $(head -c 160 "$tmp/err" | tr '\n' '|'))"
    fi
    k=$((k + 1))
  done
  if [ -z "$bad" ] && [ "$refusals" -eq 0 ]; then
    notok "$name: none of $total allocations failing was refused (is the module failing them?)"
  elif [ -z "$bad" ]; then
    ok "$name: each of libhicp's $total allocations failing: $refusals refused, $recovered recovered with the same result${missed:+, $missed not reached}"
  else
    notok "$name: allocations failing gave neither a refusal nor the same result:$bad"
  fi
}

# References, with nothing failing
"$bin" perturb "$m" -o "$tmp/scan.ply" --rotate 5,-4,6 --translate-rel 0.01,0,0 --noise 1e-3 \
  --view 0,0,1 >/dev/null 2>&1 &&
  "$bin" model build "$m" -o "$tmp/m.hicpm" >/dev/null 2>&1 &&
  "$bin" model info "$tmp/m.hicpm" 2>/dev/null | grep -v '^model\|^build' >"$tmp/info.ref" &&
  "$bin" register "$tmp/m.hicpm" "$tmp/scan.ply" --json --threads 2 >"$tmp/reg.json" 2>/dev/null &&
  "$bin" nn "$tmp/m.hicpm" "$tmp/scan.ply" --csv >"$tmp/nn.ref" 2>/dev/null &&
  "$bin" track "$tmp/m.hicpm" "$tmp/scan.ply" "$tmp/scan.ply" "$tmp/scan.ply" --json \
    --threads 2 >"$tmp/track.json" 2>/dev/null &&
  "$bin" track "$tmp/m.hicpm" "$tmp/scan.ply" "$tmp/scan.ply" "$tmp/scan.ply" --json \
    --threads 2 --independent >"$tmp/batch.json" 2>/dev/null
if [ $? -ne 0 ]; then
  echo "Bail out! the references could not be made"
  exit 1
fi
# what a registration found, all 17 digits (not its times)
pose() { python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(repr(d["transform"]), repr(d["rmse"]), d["iterations"], d["stop"], d["inliers"])' "$1" 2>/dev/null; }
pose "$tmp/reg.json" >"$tmp/reg.ref"
# the same for each frame of hicp track's JSON lines
poses() { python3 -c 'import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    print(d["frame"], repr(d["transform"]), repr(d["rmse"]), d["iterations"], d["stop"])' "$1" 2>/dev/null; }
poses "$tmp/track.json" >"$tmp/track.ref"
poses "$tmp/batch.json" >"$tmp/batch.ref"
# a reference that read as nothing would match any run that printed nothing
if [ ! -s "$tmp/reg.ref" ] || [ "$(wc -l <"$tmp/track.ref")" -ne 3 ] ||
   [ "$(wc -l <"$tmp/batch.ref")" -ne 3 ]; then
  echo "Bail out! the reference results could not be read"
  exit 1
fi

same_model() { [ -s "$tmp/run/m.hicpm" ] && "$bin" model info "$tmp/run/m.hicpm" 2>/dev/null |
  grep -v '^model\|^build' | cmp -s - "$tmp/info.ref"; }
same_pose() { pose "$tmp/out" | cmp -s - "$tmp/reg.ref"; }
same_moved() { same_pose && [ -s "$tmp/run/moved.ply" ]; }
same_nn() { cmp -s "$tmp/out" "$tmp/nn.ref"; }
same_track() { poses "$tmp/out" | cmp -s - "$tmp/track.ref"; }
same_batch() { poses "$tmp/out" | cmp -s - "$tmp/batch.ref"; }
same_info() { grep -v '^model\|^build' "$tmp/out" | cmp -s - "$tmp/info.ref"; }

sweep "model build" same_model model build "$m" -o m.hicpm
sweep "model info (loading a model file)" same_info model info "$tmp/m.hicpm"
sweep "register, 2 threads" same_pose register "$tmp/m.hicpm" "$tmp/scan.ply" --json --threads 2
sweep "register from the mesh, 1 thread, writing the moved scan" same_moved register "$m" \
  "$tmp/scan.ply" --json --threads 1 --output moved.ply
sweep "nn" same_nn nn "$tmp/m.hicpm" "$tmp/scan.ply" --csv
# a tracked stream and an untracked one (hicp track always runs a stream;
# tests/test_alloc.c 6 fails the matches of a tracked batch and stream)
sweep "track (a tracked stream), 3 frames, 2 threads" same_track track "$tmp/m.hicpm" \
  "$tmp/scan.ply" "$tmp/scan.ply" "$tmp/scan.ply" --json --threads 2
sweep "track --independent (an untracked stream), 3 frames, 2 threads" same_batch track "$tmp/m.hicpm" \
  "$tmp/scan.ply" "$tmp/scan.ply" "$tmp/scan.ply" --json --threads 2 --independent

# Qhull's allocations: the first three (its set-up), then a spread up to
# the last one
failing libqhull_r 0 model build "$m" -o m.hicpm
qcount=${count:-0}
if [ "$st" -ne 0 ] || [ "$qcount" -lt 10 ]; then
  notok "model build: Qhull's allocations counted (exit $st, $qcount counted)"
else
  bad=""
  for k in 1 2 3 $((qcount / 7)) $((2 * qcount / 7)) $((3 * qcount / 7)) $((4 * qcount / 7)) \
    $((5 * qcount / 7)) $((6 * qcount / 7)) "$qcount"; do
    failing libqhull_r "$k" model build "$m" -o m.hicpm
    refused ".*memory" || bad="$bad $k(exit $st: $(head -c 160 "$tmp/err" | tr '\n' '|'))"
  done
  if [ -z "$bad" ]; then
    ok "model build: Qhull's allocation failing (10 of its $qcount) is a refusal naming the memory"
  else
    notok "model build: Qhull's allocation failing was not a refusal naming the memory:$bad"
  fi
fi
