#!/bin/sh
# check-nvcc-flags.sh: build-aux/nvcc-host-flags hands a packager's
# CPPFLAGS and CXXFLAGS to nvcc so that the host compiler gets each flag
# whole, commas included (Fedora's -Wp,-U_FORTIFY_SOURCE,-D_FORTIFY_SOURCE=3),
# and refuses what nvcc cannot take with a line naming it (TAP).  With
# nvcc present, a small .cu compiled with the script's output proves the
# flags arrive; without it those checks skip.
src=${HICP_SRCDIR:-.}
flags="$src/build-aux/nvcc-host-flags"
nvcc=${NVCC:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hicp-nvccflags.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo "1..5"

# (and link-time optimisation left out: the host code nvcc generates
# defines fatbinData in a top-level asm(), which an LTO link of libhicp.so
# lost)
out=$(sh "$flags" -O2 -flto=auto '-Wp,-DHICP_A=1,-DHICP_B=2' -I/x '-DHICP_C=f(a,b)' \
  -ffat-lto-objects -UHICP_D) || out=FAILED
want='-Xcompiler=-O2
-Xcompiler=-Wp\,-DHICP_A=1\,-DHICP_B=2
-I/x
-DHICP_C=f(a\,b)
-UHICP_D
-Xcompiler=-fno-lto'
if [ "$out" = "$want" ]; then
  echo "ok 1 - host flags and definitions with commas escaped, no LTO"
else
  echo "not ok 1 - host flags and definitions with commas escaped, no LTO"
  printf '# got:\n%s\n' "$out" | sed 's/^/# /'
fi

if err=$(sh "$flags" -O2 '-I/a,b' 2>&1 >/dev/null); then
  echo "not ok 2 - an include directory with a comma is refused"
else
  case $err in
    *"'-I/a,b'"*comma*) echo "ok 2 - an include directory with a comma is refused" ;;
    *) echo "not ok 2 - an include directory with a comma is refused # message: $err" ;;
  esac
fi

cat >"$tmp/t.cu" <<'CU'
#define STR_(x) #x
#define STR(x) STR_(x)
/* -D reaches host and device code; -Wp only the host compiler */
static_assert(sizeof STR(HICP_C) == sizeof "f(a,b)", "-D with a comma");
#if !defined(__CUDA_ARCH__) && !(HICP_A == 1 && HICP_B == 2)
#error "-Wp,-D...,-D... did not reach the host compiler whole"
#endif
#ifdef HICP_D
#error "-U did not arrive"
#endif
__global__ void k(int *p) { *p = HICP_B; }
CU
n=3
for case in "plain" "fortify"; do
  if [ -z "$nvcc" ] || ! "$nvcc" --version >/dev/null 2>&1; then
    echo "ok $n # SKIP no nvcc"
    n=$((n + 1))
    continue
  fi
  extra=
  [ "$case" = fortify ] && extra='-O2 -Wp,-U_FORTIFY_SOURCE,-D_FORTIFY_SOURCE=2 -fstack-protector-strong'
  # shellcheck disable=SC2086 # word splitting of the script's lines is the point
  set -- $(sh "$flags" $extra '-Wp,-DHICP_A=1,-DHICP_B=2' '-DHICP_C=f(a,b)' -DHICP_D -UHICP_D)
  if log=$("$nvcc" -std=c++17 "$@" -c -o "$tmp/t.o" "$tmp/t.cu" 2>&1); then
    echo "ok $n - nvcc compiles with the flags ($case)"
  else
    echo "not ok $n - nvcc compiles with the flags ($case)"
    printf '%s\n' "$log" | sed 's/^/# /'
  fi
  n=$((n + 1))
done

# the escaped flag is one argument for the host compiler: nvcc's dry run
# names it whole
if [ -z "$nvcc" ] || ! "$nvcc" --version >/dev/null 2>&1; then
  echo "ok 5 # SKIP no nvcc"
else
  set -- $(sh "$flags" '-Wp,-DHICP_A=1,-DHICP_B=2')
  if "$nvcc" -dryrun "$@" -c -o "$tmp/t.o" "$tmp/t.cu" 2>&1 | grep -q -- '-Wp,-DHICP_A=1,-DHICP_B=2'; then
    echo "ok 5 - the host compiler's command holds the flag whole"
  else
    echo "not ok 5 - the host compiler's command holds the flag whole"
  fi
fi
