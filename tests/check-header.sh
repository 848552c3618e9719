#!/bin/sh
# check-header.sh: hicp.h compiles without a warning, -pedantic -Werror,
# under every C standard from C89 and every C++ standard from C++98
# (TAP).  Users include it from code built with their own flags: a
# warning there is an error in any project built with -Werror.
src=${HICP_SRCDIR:-.}/lib
build=${HICP_BUILD_DIR:-.}/lib
cc=${CC:-cc}
cxx=${CXX:-c++}
c_stds="c89 c99 c11 c17"
cxx_stds="c++98 c++11 c++17"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hicp-header.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# hicp_version.h is made by configure (in the build tree); the body uses
# the header's names so that a declaration the compiler drops unseen
# still has to parse.
cat >"$tmp/t.c" <<'C'
#include <hicp.h>
int main(void)
{
  hicp_error e = HICP_ERANGE;
  hicp_backend b = HICP_BACKEND_CPU;
  return hicp_version_number() > 0 && e < 0 && b == 1 &&
         hicp_strerror(HICP_OK) != 0 ? 0 : 1;
}
C
cp "$tmp/t.c" "$tmp/t.cc"
set -- $c_stds
n=$#
set -- $cxx_stds
n=$((n + $#))
echo "1..$n"
i=0
check() { # compiler, standard, file
  i=$((i + 1))
  if ! $1 --version >/dev/null 2>&1; then
    echo "ok $i # SKIP no compiler '$1'"
    return
  fi
  if out=$($1 -std="$2" -pedantic -Wall -Wextra -Werror -I"$build" -I"$src" \
      -fsyntax-only "$3" 2>&1); then
    echo "ok $i - hicp.h under $1 -std=$2 -pedantic -Wall -Wextra -Werror"
  else
    echo "not ok $i - hicp.h under $1 -std=$2 -pedantic -Wall -Wextra -Werror"
    printf '%s\n' "$out" | sed 's/^/# /'
  fi
}
for s in $c_stds; do check "$cc" "$s" "$tmp/t.c"; done
for s in $cxx_stds; do check "$cxx" "$s" "$tmp/t.cc"; done
