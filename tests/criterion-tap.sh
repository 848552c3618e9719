#!/bin/sh
# criterion-tap.sh PROGRAM: runs a Criterion suite so that it reports TAP on
# standard output for automake's TAP driver (its own log goes to stderr).
prog=$1
shift
exec "$prog" --tap=- "$@"
