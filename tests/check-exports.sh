#!/bin/sh
# check-exports.sh: the shared library exports only hicp_* symbols (TAP).
lib=${HICP_LIBDIR:-.libs}/libhicp.so
nm=${NM:-nm}
echo "1..2"
if [ ! -e "$lib" ]; then
  echo "ok 1 # SKIP no shared library was built (--disable-shared)"
  echo "ok 2 # SKIP no shared library was built (--disable-shared)"
  exit 0
fi
# Defined, dynamic symbols that are not ours.  Linker-made markers are
# not symbols of the API.
bad=$($nm -D --defined-only "$lib" | awk '{print $NF}' |
  grep -v -E '^(hicp_[a-z][A-Za-z0-9_]*|_init|_fini|_edata|_end|__bss_start)$' || true)
if [ -z "$bad" ]; then
  echo "ok 1 - $lib exports only hicp_* symbols"
else
  echo "not ok 1 - $lib exports symbols outside hicp_*:"
  echo "$bad" | sed 's/^/# /'
fi
internal=$($nm -D --defined-only "$lib" | awk '{print $NF}' | grep -E '^hicp__' || true)
count=$($nm -D --defined-only "$lib" | awk '{print $NF}' | grep -c -E '^hicp_[a-z]')
if [ -z "$internal" ] && [ "$count" -gt 30 ]; then
  echo "ok 2 - no internal hicp__ symbol is exported ($count public functions)"
else
  echo "not ok 2 - internal symbols exported or API missing ($count public): $internal"
fi
