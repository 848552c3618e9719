#!/usr/bin/env python3
"""bench/plot.py: draws bench/run's results as PNGs.

Reads one JSON object on stdin: {"e1": [...], "e2": [...], "e3": [...],
"e4": [...], "e5": {...}, "e6": [...], "dir": OUTDIR} (the rows bench/run records), writes
one PNG per experiment that has data into OUTDIR and prints each file name on
its own line.  Uses Debian's python3-matplotlib with the Agg backend (no
display needed).
"""
import json
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"hicp": "#1b6ca8", "open3d": "#e07b39", "pcl": "#5a9e4b", "nanoflann": "#8c5fb0"}
LABELS = {"hicp": "hicp", "open3d": "Open3D", "pcl": "PCL", "nanoflann": "nanoflann"}


def save(fig, outdir, name, made):
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, name), dpi=110)
    plt.close(fig)
    made.append(name)


def peers_plot(rows, outdir, made, key, ylabel, title, name):
    """Time per case and tool (log scale), each peer's bar marked with its ratio."""
    tools = [t for t in ("hicp", "open3d", "pcl") if any(t in r for r in rows)]
    fig, ax = plt.subplots(figsize=(8, 4))
    w = 0.8 / len(tools)
    for k, t in enumerate(tools):
        xs = [i + (k - (len(tools) - 1) / 2) * w for i in range(len(rows))]
        ys = [r[t][key] if t in r else 0 for r in rows]
        bars = ax.bar(xs, ys, w, label=LABELS[t], color=COLORS[t])
        for b, r in zip(bars, rows):
            if t in r and t != "hicp" and "ratio" in r[t]:
                ax.annotate("x%.1f" % r[t]["ratio"], (b.get_x() + b.get_width() / 2, b.get_height()),
                            ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(["%s\n%d/%d" % (r["case"].replace(".off", ""), r["model_points"], r["scan_points"])
                        for r in rows], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    save(fig, outdir, name, made)


def e2_plot(rows, outdir, made):
    """The thesis ladder: hicp's times next to the thesis's."""
    fig, ax = plt.subplots(figsize=(7, 4))
    n = [r["scan_points"] for r in rows]
    ax.plot(n, [r["thesis_cpu_ms"] for r in rows], "o--", color="#999999", label="thesis CPU (Xeon, 1 core)")
    ax.plot(n, [r["thesis_titanv_ms"] for r in rows], "s--", color="#555555", label="thesis GPU (Titan V)")
    for k in sorted(k for k in rows[0] if k.startswith("cpu") and k.endswith("_ms")):
        t = k[3:-3]
        ax.plot(n, [r[k] for r in rows], "o-", label="hicp CPU, %s thread%s" % (t, "s" if t != "1" else ""))
    if "gpu_ms" in rows[0]:
        ax.plot(n, [r["gpu_ms"] for r in rows], "s-", label="hicp GPU")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sensed points (truth model about 1.3-2.6x more)")
    ax.set_ylabel("ms per registration (30 iterations)")
    ax.set_title("E2: the thesis ladder")
    ax.legend(fontsize=7)
    save(fig, outdir, "e2_ladder.png", made)


def e3_plot(rows, outdir, made):
    """Time over iterations per method, and the walk-length histogram."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for r in rows:
        xs, ys = zip(*r["curve"])
        a.plot(xs, ys, "o-", label=r["method"])
    a.set_yscale("log")
    a.set_xlabel("iterations")
    a.set_ylabel("ms for the first k iterations")
    a.set_title("E3: nearest-neighbour methods inside ICP")
    a.legend(fontsize=7)
    walk = [r for r in rows if r["method"] in ("pnn", "pnn-opt") and sum(r["walk_hist"])]
    for k, r in enumerate(walk):
        h = r["walk_hist"]
        tot = float(sum(h))
        xs = [i + (k - (len(walk) - 1) / 2) * 0.4 for i in range(len(h))]
        b.bar(xs, [c / tot for c in h], 0.4, label=r["method"])
    b.set_xlabel("walk steps per query (15 = 15 or more)")
    b.set_ylabel("fraction of queries")
    b.set_yscale("log")
    b.set_title("walk lengths over all iterations")
    if walk:
        b.legend(fontsize=7)
    save(fig, outdir, "e3_methods.png", made)


def e4_plot(rows, outdir, made):
    """Success rate and median rotation error per (noise, outliers) setting."""
    tools = [t for t in ("hicp", "open3d", "pcl") if any(r["tool"] == t for r in rows)]
    settings = sorted({(r["noise"], r["outliers"]) for r in rows})
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    w = 0.8 / len(tools)
    for k, t in enumerate(tools):
        succ, err = [], []
        for s in settings:
            rs = [r for r in rows if r["tool"] == t and (r["noise"], r["outliers"]) == s]
            succ.append(100.0 * sum(r["success"] for r in rs) / len(rs) if rs else 0)
            err.append(statistics.median(r["rot_err_deg"] for r in rs) if rs else float("nan"))
        xs = [i + (k - (len(tools) - 1) / 2) * w for i in range(len(settings))]
        a.bar(xs, succ, w, label=LABELS[t], color=COLORS[t])
        b.bar(xs, err, w, label=LABELS[t], color=COLORS[t])
    labels = ["noise %g\noutliers %g" % s for s in settings]
    for ax in (a, b):
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels(labels, fontsize=7)
        ax.legend(fontsize=7)
    a.set_ylabel("success rate, %")
    a.set_title("E4: success (rot. < 1 deg, pos. < 1% diag.)")
    b.set_yscale("log")
    b.set_ylabel("median rotation error, degrees")
    b.set_title("E4: accuracy")
    save(fig, outdir, "e4_sweep.png", made)


def e5_plot(e5, outdir, made):
    """Time against points per thread count; queries against nanoflann."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for t in sorted({r["threads"] for r in e5["points"]}):
        rs = sorted((r for r in e5["points"] if r["threads"] == t), key=lambda r: r["n"])
        a.plot([r["n"] for r in rs], [r["ms"] for r in rs], "o-",
               label="registration, %d thread%s" % (t, "s" if t > 1 else ""))
    if e5["build"]:
        rs = sorted(e5["build"], key=lambda r: r["n"])
        a.plot([r["n"] for r in rs], [r["median_ms"] for r in rs], "s--", label="model build (once)")
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("model points (scan about half)")
    a.set_ylabel("ms")
    a.set_title("E5: scaling with points")
    a.legend(fontsize=7)
    q = sorted(e5["queries"], key=lambda r: r["n"])
    if q:
        b.plot([r["n"] for r in q], [r["hicp_ns"] for r in q], "o-", color=COLORS["hicp"], label="hicp (warm walk)")
        if any("nanoflann_ns" in r for r in q):
            qq = [r for r in q if "nanoflann_ns" in r]
            b.plot([r["n"] for r in qq], [r["nanoflann_ns"] for r in qq], "s-", color=COLORS["nanoflann"],
                   label="nanoflann kd-tree")
        b.set_xscale("log")
        b.set_xlabel("model points")
        b.set_ylabel("ns per query")
        b.set_title("coherent nearest-neighbour queries")
        b.legend(fontsize=7)
    save(fig, outdir, "e5_scaling.png", made)


def main():
    d = json.load(sys.stdin)
    outdir = d["dir"]
    os.makedirs(outdir, exist_ok=True)
    made = []
    if d.get("e1"):
        peers_plot(d["e1"], outdir, made, "median_ms", "ms per registration (30 iterations)",
                   "E1: registration time (x = peer / hicp)", "e1_peers.png")
    if d.get("e2"):
        e2_plot(d["e2"], outdir, made)
    if d.get("e3"):
        e3_plot(d["e3"], outdir, made)
    if d.get("e4"):
        e4_plot(d["e4"], outdir, made)
    if d.get("e5") and d["e5"].get("points"):
        e5_plot(d["e5"], outdir, made)
    if d.get("e6"):
        peers_plot(d["e6"], outdir, made, "ms_per_frame", "ms per frame (%d iterations)" % d["e6"][0]["iterations"],
                   "E6: tracking, each frame from the last pose (x = peer / hicp)", "e6_tracking.png")
    for m in made:
        print(m)


if __name__ == "__main__":
    main()
