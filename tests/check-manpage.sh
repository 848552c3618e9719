#!/bin/sh
# check-manpage.sh: the manual page hicp.1 renders without warnings, has a
# section for every command of 'hicp --help', and each section names
# exactly the options its command accepts: those of the command's getopt
# table (or argument compares) in tools/cmd_*.c, --help aside (TAP).
man=${HICP_BUILD_DIR:-.}/tools/hicp.1
src=${HICP_SRCDIR:-.}/tools
bin=${HICP_BIN:-tools/hicp}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/hicp-man.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); echo "not ok $n - $1"; }
commands="register nn model track perturb devices"
echo "1..9"
if [ ! -r "$man" ]; then
  notok "$man exists (configure makes it from tools/hicp.1.in)"
  i=1
  while [ $i -lt 9 ]; do notok "no manual page to check"; i=$((i + 1)); done
  exit 0
fi
ok "$man exists"
if command -v groff >/dev/null 2>&1; then
  LC_ALL=C groff -man -ww -z -Tutf8 "$man" >"$tmp/warn" 2>&1
  if [ ! -s "$tmp/warn" ]; then
    ok "groff renders it without warnings"
  else
    notok "groff renders it without warnings"
    sed 's/^/# /' "$tmp/warn"
  fi
else
  ok "groff renders it without warnings # SKIP groff is not installed"
fi
# the commands of 'hicp --help' (lines "  NAME ..." under "commands:")
"$bin" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }' |
  sort -u >"$tmp/listed"
echo "$commands" | tr ' ' '\n' | sort -u >"$tmp/known"
if [ -s "$tmp/listed" ] && cmp -s "$tmp/listed" "$tmp/known"; then
  ok "hicp --help lists the commands this test knows: $commands"
else
  notok "hicp --help lists the commands this test knows: $commands"
  diff "$tmp/known" "$tmp/listed" | sed 's/^/# /'
fi
for c in $commands; do
  # the options in the man page's sections ".SS "hicp $c ...""
  awk -v c="$c" '
    /^\.SS / { on = index($0, "\"hicp " c " ") == 5 || index($0, "\"hicp " c "\"") == 5; next }
    /^\.SH / { on = 0 }
    on { print }' "$man" |
    grep -o '\\-\\-[a-z][a-z0-9]*\(\\-[a-z0-9]*\)*' | tr -d '\\' | sed 's/^--//' | sort -u >"$tmp/man.$c"
  # the options the command accepts
  { grep -o '{"[a-z][a-z0-9-]*",' "$src/cmd_$c.c" | sed 's/^{"//; s/",$//'
    grep -o 'strcmp(argv\[i\], "--[a-z][a-z0-9-]*")' "$src/cmd_$c.c" | sed 's/.*"--//; s/")$//'
  } | grep -v '^help$' | sort -u >"$tmp/src.$c"
  if [ ! -s "$tmp/src.$c" ]; then
    notok "hicp $c: no options found in $src/cmd_$c.c"
  elif cmp -s "$tmp/man.$c" "$tmp/src.$c"; then
    ok "hicp $c: the manual names every option it accepts ($(wc -l <"$tmp/src.$c")), and no other"
  else
    notok "hicp $c: the manual's options differ from cmd_$c.c's (< manual, > program)"
    diff "$tmp/man.$c" "$tmp/src.$c" | grep '^[<>]' | sed 's/^/# /'
  fi
done
