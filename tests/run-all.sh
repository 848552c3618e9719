#!/bin/sh
# run-all.sh: the whole test suite, from a fresh checkout: installs what is
# missing, then
#   - a CUDA build (when nvcc is present; GPU tests skip without a GPU) and a
#     CPU-only build: configure, build, make check, make distcheck;
#   - make check under AddressSanitizer + UndefinedBehaviorSanitizer (a leak
#     or any sanitizer report fails the suite: tests/criterion-tap.sh);
#   - the concurrency tests (tests/test_threads) under ThreadSanitizer;
#   - every libFuzzer harness for HICP_FUZZ_SECONDS each (default 20) over
#     its committed corpus (tests/fuzz/run.sh; skipped without clang).
# Ends with the test summaries.  HICP_QUICK=1 keeps only the first two.
# Every build asks for Criterion (--with-criterion): here a missing one is
# an error, not the unit suites skipped as in a plain configure.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/.ci/install-deps"
(cd "$root" && ./autogen.sh >/dev/null)
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
failed_tests() { # failed_tests LOG DIR: what a failed make check needs to be read
  # from a CI summary that keeps only the end of the output: each failing
  # test's own lines first, the list of failures last
  find "$2" -name '*.log' -path '*tests/*' 2>/dev/null | while read -r log; do
    if grep -qE '^(not ok|Bail out)' "$log"; then
      echo "== $log"
      grep -E -B3 -A12 '^(not ok|Bail out)' "$log" | head -80
    elif grep -qE '^ERROR:' "$log"; then # a crash, a wrong plan or exit status
      echo "== $log"
      tail -30 "$log"
    fi
  done
  echo "== failed:"
  grep -E '^(FAIL|ERROR|XPASS):' "$1" || true
}
check_only() { # check_only NAME "TESTS" CONFIGURE-FLAGS...: build, make check ("" = all)
  name=$1; tests=$2; shift 2
  dir=$root/build-test-$name
  rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
  echo "== [$name] configure $*"
  "$root/configure" -q "$@"
  echo "== [$name] make"
  make -j"$jobs" >/dev/null
  echo "== [$name] make check${tests:+ TESTS=$tests}"
  if ! make -j"$jobs" check ${tests:+TESTS="$tests"} >check.log 2>&1; then
    tail -50 check.log; failed_tests check.log "$dir"; exit 1
  fi
  { echo "[$name] make check:"; grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR)' check.log; } >>"$summary"
}
run() { # run NAME CONFIGURE-FLAGS...: the whole make check, then make distcheck
  check_only "$@"
  name=$1; shift 2
  echo "== [$name] make distcheck"
  if ! make -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS="$*" >distcheck.log 2>&1; then
    tail -80 distcheck.log; failed_tests distcheck.log "$dir"; exit 1
  fi
  echo "[$name] make distcheck: passed" >>"$summary"
}
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  run cuda "" --with-cuda --with-criterion
else
  echo "== no nvcc: skipping the CUDA build" | tee -a "$summary"
fi
run cpu "" --without-cuda --with-criterion
if [ "${HICP_QUICK:-0}" != 1 ]; then
  check_only asan-ubsan "" --without-cuda --with-criterion --enable-sanitizers
  # libgomp is not built for ThreadSanitizer: threads come from the tests
  # and the library's own pthreads (batches, streams)
  check_only tsan tests/test_threads --without-cuda --disable-openmp --enable-sanitizers=thread
  echo "== [fuzz] libFuzzer harnesses"
  set +e
  "$root/tests/fuzz/run.sh" --time "${HICP_FUZZ_SECONDS:-20}" --build "$root/build-test-fuzz" >"$summary.fuzz" 2>&1
  st=$?
  set -e
  cat "$summary.fuzz"
  case $st in
    0) { echo "[fuzz]"; grep '^fuzz:' "$summary.fuzz"; } >>"$summary" ;;
    77) echo "[fuzz] skipped: no clang with libFuzzer" >>"$summary" ;;
    *) rm -f "$summary.fuzz"; exit 1 ;;
  esac
  rm -f "$summary.fuzz"
fi
echo
echo "== test summary"
cat "$summary"
