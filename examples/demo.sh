#!/bin/sh
# demo.sh: the main job, from a fresh checkout: installs what is missing,
# builds hicp, takes a real model (bunny00 from Debian's libcgal-demo), makes
# a scan of it with a known pose (the camera-facing part, rotated 10, -8, 12
# degrees, shifted 2% of its size, with noise), registers the scan to the
# model and prints the pose, its error against the truth, and the time.
set -e
root=$(cd "$(dirname "$0")/.." && pwd)
build=${HICP_BUILD_DIR:-$root/build}
"$root/.ci/install-deps"
if [ ! -x "$build/tools/hicp" ]; then
  [ -x "$root/configure" ] || (cd "$root" && ./autogen.sh >/dev/null)
  mkdir -p "$build"
  (cd "$build" && "$root/configure" -q && make -j"$(nproc)" >/dev/null)
fi
work=$build/demo
mkdir -p "$work"
# (HICP_CGAL_TARBALL: the same archive elsewhere, as tests/fetch-data.sh takes it)
tarball=${HICP_CGAL_TARBALL:-/usr/share/doc/libcgal-dev/data.tar.gz}
if [ ! -r "$tarball" ]; then
  echo "demo.sh: $tarball not found: libcgal-demo is installed without it (an image that leaves out /usr/share/doc?); set HICP_CGAL_TARBALL to the package's data.tar.gz" >&2
  exit 1
fi
tar -xzf "$tarball" -C "$work" --strip-components=2 data/meshes/bunny00.off
hicp=$build/tools/hicp
echo "== making a scan of bunny00.off with a known pose"
"$hicp" perturb "$work/bunny00.off" -o "$work/scan.ply" --truth "$work/truth.txt" \
  --rotate 10,-8,12 --translate-rel 0.02,0,-0.01 --view 0,0,1 --noise 1e-3
echo "== hicp register bunny00.off scan.ply"
"$hicp" register "$work/bunny00.off" "$work/scan.ply" --truth "$work/truth.txt"
