#!/bin/sh
# fetch-data.sh DIR: extracts the real models the tests use from Debian's
# libcgal-demo package into DIR (never committed).  Without the package it
# creates DIR empty, and the tests that need the data skip.
set -e
dir=$1
tarball=${HICP_CGAL_TARBALL:-/usr/share/doc/libcgal-dev/data.tar.gz}
mkdir -p "$dir"
if [ ! -r "$tarball" ]; then
  echo "fetch-data.sh: $tarball not found (apt-get install libcgal-demo); tests needing real models will skip" >&2
  exit 0
fi
tar -xzf "$tarball" -C "$dir" --strip-components=1 \
  data/meshes/bunny00.off data/meshes/ChineseDragon-10kv.off data/meshes/boeing.off \
  data/meshes/fandisk_large.off data/meshes/turbine.off \
  data/points_3/building.ply data/points_3/sphere_20k.xyz data/points_3/kitten.xyz \
  data/points_3/oni.ply data/points_3/cube.xyz data/points_3/poste_france.xyz
