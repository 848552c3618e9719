#!/bin/sh
# check-exports.sh: the shared library exports only hicp_* symbols, and
# exactly the functions hicp.h declares (TAP): a public function gone or
# renamed is an ABI break.
lib=${HICP_LIBDIR:-.libs}/libhicp.so
header=${HICP_SRCDIR:-.}/lib/hicp.h
nm=${NM:-nm}
echo "1..4"
if [ ! -e "$lib" ]; then
  echo "ok 1 # SKIP no shared library was built (--disable-shared)"
  echo "ok 2 # SKIP no shared library was built (--disable-shared)"
  echo "ok 3 # SKIP no shared library was built (--disable-shared)"
  echo "ok 4 # SKIP no shared library was built (--disable-shared)"
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
# The header's functions: each HICP_API declaration's name, the word
# before its first parenthesis (declarations span lines; join them first).
declared=$(tr '\n' ' ' <"$header" | grep -o 'HICP_API [^(;]*(' |
  sed -e 's/($//' -e 's/.*[ *]//' | grep -E '^hicp_[a-z]' | sort -u)
exported=$($nm -D --defined-only "$lib" | awk '{print $NF}' | grep -E '^hicp_[a-z]' | sort -u)
ndeclared=$(echo "$declared" | grep -c .)
if [ -n "$declared" ] && [ "$declared" = "$exported" ]; then
  echo "ok 3 - the exports are the $ndeclared functions hicp.h declares"
else
  echo "not ok 3 - the exports differ from hicp.h's $ndeclared declarations"
  echo "# declared, not exported: $(echo "$declared" | grep -v -x -F "$exported" | tr '\n' ' ')"
  echo "# exported, not declared: $(echo "$exported" | grep -v -x -F "$declared" | tr '\n' ' ')"
fi
# No fused multiply-add in the library's code: a*b+c rounded once gives
# other bits than the CPU's other builds and the GPU's (stop 65's second
# review: clang with -fno-fast-math after -ffast-math put contraction back
# on, 3,149 vfmadd with -march=native; config.h turns it off for clang).
# The mnemonics of x86's FMA3 and FMA4 forms (vfmadd231sd, vfmaddsub231pd,
# vfnmsubps, the half-precision ones), AArch64's scalar, vector and SVE
# ones (fmadd, fnmsub, fmla, fmls, fmad, fmsb), 32-bit ARM's (vfma.f64)
# and RISC-V's (fmadd.d).
objdump=${OBJDUMP:-objdump}
if ! command -v "$objdump" >/dev/null 2>&1; then
  echo "ok 4 # SKIP no $objdump"
else
  fused=$("$objdump" -d --no-show-raw-insn "$lib" |
    grep -c -E '[[:space:]](v?fn?m(add|sub)(add|sub)?[0-9]*[ps][sdh]|fn?m(add|sub)(\.[sdhq])?|fn?ml[as]|fn?m(ad|sb)|vfn?m[as](\.f[0-9]+)?)[[:space:]]' || true)
  if [ "$fused" -eq 0 ]; then
    echo "ok 4 - no fused multiply-add instruction in $lib"
  else
    echo "not ok 4 - $fused fused multiply-add instructions in $lib (contraction on: see config.h)"
  fi
fi
