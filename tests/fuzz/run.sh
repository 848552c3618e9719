#!/bin/sh
# run.sh: builds the libFuzzer harnesses with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer, HICP_FUZZING so the model loader skips its
# checksums) and runs each for a bounded time over a scratch copy of its
# committed seed corpus (tests/fuzz/corpus/NAME).
#
#   tests/fuzz/run.sh [--time SECONDS] [--build DIR] [NAME...]
#
# NAME: ply pcd off xyz model_file model_build (default: all).  Prints the
# executions of each run; exits 1 on any crash, leaving the input that
# crashed in DIR/crashes/ (after the fix, add it to the corpus as
# regression-NAME so that make check replays it forever), 77 if clang's
# libFuzzer is missing.
set -e
src=$(cd "$(dirname "$0")/../.." && pwd)
time=60
build=$src/build-fuzz
while [ $# -gt 0 ]; do
  case $1 in
    --time) time=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
names=${*:-ply pcd off xyz model_file model_build}
cc=${CLANG:-clang}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}' >"$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  echo "fuzz: $cc with libFuzzer not available (Debian: clang, libclang-rt-dev)" >&2
  exit 77
fi
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$src/configure" -nt Makefile ]; then
  echo "== fuzz: configure (clang, sanitizers, no CUDA, no OpenMP)"
  "$src/configure" -q CC="$cc" CFLAGS="-O1 -g $san -fsanitize=fuzzer-no-link -DHICP_FUZZING" \
    --without-cuda --disable-openmp --disable-shared
fi
make -j"$(nproc)" libhicp_core.la >/dev/null
libs="$(pkg-config --libs qhull_r hwloc) -lm"
mkdir -p bin crashes work
status=0
for name in $names; do
  case $name in
    ply|pcd|off|xyz) fmt=$(echo "$name" | tr a-z A-Z); srcf=fuzz_cloud.c; def="-DFUZZ_FORMAT=HICP_FORMAT_$fmt"
      dict="-dict=$src/tests/fuzz/$name.dict"; maxlen=4096 ;;
    model_file) srcf=fuzz_model_file.c; def=; dict=; maxlen=16384 ;;
    model_build) srcf=fuzz_model_build.c; def=; dict=; maxlen=1024 ;;
    *) echo "fuzz: unknown harness $name" >&2; exit 2 ;;
  esac
  "$cc" -O1 -g $san -fsanitize=fuzzer $def -I"$src/lib" -I"$build/lib" -I"$build" \
    "$src/tests/fuzz/$srcf" .libs/libhicp_core.a $libs -o "bin/fuzz_$name"
  rm -rf "work/$name"; mkdir -p "work/$name"
  log=work/$name.log
  if "bin/fuzz_$name" -max_total_time="$time" -timeout=10 -rss_limit_mb=2048 -max_len=$maxlen \
      -print_final_stats=1 -artifact_prefix="crashes/$name-" $dict "work/$name" \
      "$src/tests/fuzz/corpus/$name" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz: $name: $execs executions in ${time}s, $cov, no crash"
  else
    status=1
    echo "fuzz: $name: CRASH; input saved in $build/crashes/" >&2
    grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==' "$log" | head -20 >&2
  fi
done
exit $status
