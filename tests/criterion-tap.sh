#!/bin/sh
# criterion-tap.sh PROGRAM: runs a Criterion suite so that it reports TAP on
# standard output for automake's TAP driver (its own log goes to stderr).
#
# Under sanitizers a leak is reported by LeakSanitizer when a test's child
# process exits, after Criterion has already counted the test as passed, and
# a ThreadSanitizer warning does not change the exit status either.  So the
# suite's stderr is kept and any sanitizer report in it fails the suite
# ("Bail out!", an ERROR for the TAP driver), naming the first test seen in
# the report.
prog=$1
shift
#
# The TAP goes to a file and is printed after the run: with --tap=- Criterion
# drops what the tests print on stderr (the accuracy figures of
# docs/accuracy.md), with a file it keeps it.
err=$(mktemp "${TMPDIR:-/tmp}/hicp-tap.XXXXXX") || exit 99
tap=$(mktemp "${TMPDIR:-/tmp}/hicp-tap.XXXXXX") || exit 99
trap 'rm -f "$err" "$tap"' EXIT
"$prog" --tap="$tap" "$@" 2>"$err"
status=$?
cat "$tap"
cat "$err" >&2
if grep -qE 'ERROR: (Address|Leak|Memory)Sanitizer|WARNING: ThreadSanitizer|runtime error:' "$err"; then
  where=$(grep -oE '[A-Za-z0-9_]+_impl' "$err" | head -1)
  echo "Bail out! sanitizer report${where:+ in ${where%_impl}} (see the log)"
  exit 1
fi
exit $status
