#!/bin/sh
# run-all.sh: the whole test suite, from a fresh checkout: installs what is
# missing, then for both a CUDA build (when nvcc is present; GPU tests skip
# without a GPU) and a CPU-only build: configure, build, make check, and
# make distcheck.  Ends with the test summaries.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=$(nproc)
"$root/.ci/install-deps"
(cd "$root" && ./autogen.sh >/dev/null)
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
run() { # run NAME CONFIGURE-FLAGS...
  name=$1; shift
  dir=$root/build-test-$name
  rm -rf "$dir"; mkdir -p "$dir"; cd "$dir"
  echo "== [$name] configure $*"
  "$root/configure" -q "$@"
  echo "== [$name] make"
  make -j"$jobs" >/dev/null
  echo "== [$name] make check"
  if ! make -j"$jobs" check >check.log 2>&1; then
    cat test-suite.log 2>/dev/null || true; tail -50 check.log; exit 1
  fi
  echo "== [$name] make distcheck"
  if ! make -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS="$*" >distcheck.log 2>&1; then
    tail -80 distcheck.log; exit 1
  fi
  { echo "[$name] make check:"; grep -E '^# (TOTAL|PASS|SKIP|XFAIL|FAIL|XPASS|ERROR)' check.log
    echo "[$name] make distcheck: passed"; } >>"$summary"
}
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  run cuda --with-cuda
else
  echo "== no nvcc: skipping the CUDA build" | tee -a "$summary"
fi
run cpu --without-cuda
echo
echo "== test summary"
cat "$summary"
