#!/usr/bin/python3
"""open3d_icp.py: Open3D's point-to-point ICP, timed the way bench/run times
hicp: the registration call alone (file reading excluded).  Open3D builds its
kd-tree of the target inside registration_icp, on every call, and offers no
way to hand it one built beforehand: that build is included in its times
and said so, and timed apart as well (tree_build_ms: the same KDTreeFlann
built on its own) so that a report can show what it costs.

usage: open3d_icp.py MODEL.ply SCAN.ply|@LIST --iters N --threads T --repeat R [--track]
Prints one JSON object per scan: times, median, transform, inlier_rmse,
fitness.  --track registers the listed scans in order as a tracker's
frames, each from the pose found for the one before (the first from the
identity); each repeat runs the whole sequence again.
Needs Debian's python3-open3d (import from /usr/bin/python3)."""
import argparse
import json
import os
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("scan")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    # milliseconds between two registrations (frames at a camera's rate)
    ap.add_argument("--gap", type=float, default=0.0)
    ap.add_argument("--tol", type=float, default=0.0,
                    help="relative fitness and RMSE change to stop at (0: never)")
    ap.add_argument("--track", action="store_true",
                    help="each scan starts from the pose found for the one before")
    a = ap.parse_args()
    # OpenMP reads the thread count when it starts: set it before importing.
    # The import starts OpenMP's threads (the process has OMP_NUM_THREADS
    # threads right after it), before any file is read: hicp_bench does the
    # same with hicp_context_start_threads, so neither tool's first timed
    # call pays for starting them.
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import numpy as np
    import open3d as o3d
    o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)
    target = o3d.io.read_point_cloud(a.model)
    if len(target.points) == 0:
        sys.exit("open3d_icp: could not read " + a.model)
    # SCAN, or @FILE listing one scan per line (one JSON line each)
    scans = [a.scan]
    if a.scan.startswith("@"):
        scans = [l.strip() for l in open(a.scan[1:]) if l.strip()]
    builds = []
    for _ in range(3):
        t0 = time.perf_counter()
        o3d.geometry.KDTreeFlann(target)
        builds.append((time.perf_counter() - t0) * 1e3)
    tree_ms = statistics.median(builds)
    reg = o3d.pipelines.registration
    # No distance cut-off (every scan point takes its nearest model point)
    # and, by default, no early stop: a radius far beyond the data.
    big = 1e30
    crit = reg.ICPConvergenceCriteria(relative_fitness=a.tol, relative_rmse=a.tol,
                                      max_iteration=a.iters)
    sources = []
    for path in scans:  # read first: a tracker's frames arrive in memory
        source = o3d.io.read_point_cloud(path)
        if len(source.points) == 0:
            sys.exit("open3d_icp: could not read " + path)
        sources.append(source)
    times = [[] for _ in scans]
    results = [None for _ in scans]

    def register(f, init):
        t0 = time.perf_counter()
        results[f] = reg.registration_icp(sources[f], target, big, init,
                                          reg.TransformationEstimationPointToPoint(), crit)
        times[f].append((time.perf_counter() - t0) * 1e3)

    if a.track:
        for k in range(a.repeat):
            for f in range(len(scans)):
                register(f, results[f - 1].transformation if f else np.identity(4))
    else:
        for f in range(len(scans)):
            for k in range(a.repeat):
                if k > 0 and a.gap > 0:
                    time.sleep(a.gap / 1e3)
                register(f, np.identity(4))
    for f, path in enumerate(scans):
        result = results[f]
        print(json.dumps({
            "peer": "open3d", "version": o3d.__version__, "scan": path, "threads": a.threads,
            "iterations": a.iters, "scan_points": len(sources[f].points),
            "model_points": len(target.points), "median_ms": statistics.median(times[f]),
            "times_ms": times[f], "includes_tree_build": True, "tree_build_ms": tree_ms,
            "transform": [float(x) for x in np.asarray(result.transformation).reshape(-1)],
            "inlier_rmse": result.inlier_rmse, "fitness": result.fitness}), flush=True)


if __name__ == "__main__":
    main()
