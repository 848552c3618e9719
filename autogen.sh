#!/bin/sh
# Regenerates the build system (configure, Makefile.in) from a git checkout.
set -e
cd "$(dirname "$0")"
autoreconf --install --force --warnings=all
# automake does not install its TAP driver by itself.
cp -f "$(automake --print-libdir)/tap-driver.sh" build-aux/tap-driver.sh
