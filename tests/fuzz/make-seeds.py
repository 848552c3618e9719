#!/usr/bin/env python3
"""make-seeds.py: (re)writes the seed corpus of the fuzz harnesses.

    tests/fuzz/make-seeds.py HICP_BINARY

Small, valid examples of every format variant the readers accept (the
fuzzer mutates from them), point sets for the model builder, and model files
written by `hicp model build`.  Deterministic: running it again gives the
same files.  Crash reproducers found later go beside them by hand
(regression-*), and stay, as do model files of the previous formats
(model_file/format2-*, written by hicp before file format 3, and
model_file/format3-*, before format 4), which the loader still reads."""
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

PTS = [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (1.0, 1.0, 1.0),
       (0.5, 0.25, 0.75), (-1.0, 2.0, 0.5)]
TRIS = [(0, 1, 2), (0, 2, 3), (1, 2, 4)]


def put(kind, name, data):
    d = os.path.join(CORPUS, kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def ply_header(fmt, props, faces=False, extra=""):
    h = "ply\nformat %s 1.0\ncomment seed\nelement vertex %d\n" % (fmt, len(PTS))
    h += "".join("property %s %s\n" % (t, n) for t, n in props)
    if faces:
        h += "element face %d\nproperty list uchar int vertex_indices\n" % len(TRIS)
    return h + extra + "end_header\n"


def seeds_ply():
    props = [("float", "x"), ("float", "y"), ("float", "z")]
    body = "".join("%g %g %g\n" % p for p in PTS)
    put("ply", "ascii.ply", ply_header("ascii", props) + body)
    put("ply", "ascii-faces.ply", ply_header("ascii", props, True) + body +
        "".join("3 %d %d %d\n" % t for t in TRIS))
    for fmt, e in (("binary_little_endian", "<"), ("binary_big_endian", ">")):
        raw = b"".join(struct.pack(e + "fff", *p) for p in PTS)
        put("ply", fmt + ".ply", ply_header(fmt, props).encode() + raw)
        rawf = raw + b"".join(struct.pack(e + "Biii", 3, *t) for t in TRIS)
        put("ply", fmt + "-faces.ply", ply_header(fmt, props, True).encode() + rawf)
    # doubles, extra properties before and after, a list property in the vertex
    dprops = [("uchar", "flag"), ("double", "x"), ("double", "y"), ("double", "z"), ("float", "nx")]
    raw = b"".join(struct.pack("<Bdddf", 7, p[0], p[1], p[2], 0.5) for p in PTS)
    put("ply", "double-extras.ply", ply_header("binary_little_endian", dprops).encode() + raw)
    put("ply", "empty-body.ply", ply_header("ascii", props))


def seeds_pcd():
    head = ("# .PCD v0.7\nVERSION 0.7\nFIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\n"
            "WIDTH %d\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS %d\n" % (len(PTS), len(PTS)))
    put("pcd", "ascii.pcd", head + "DATA ascii\n" + "".join("%g %g %g\n" % p for p in PTS))
    raw = b"".join(struct.pack("<fff", *p) for p in PTS)
    put("pcd", "binary.pcd", (head + "DATA binary\n").encode() + raw)
    # binary_compressed: fields stored one after another (x..., y..., z...),
    # LZF-compressed; a literal-only LZF stream keeps the seed simple
    soa = b"".join(struct.pack("<%df" % len(PTS), *[p[d] for p in PTS]) for d in range(3))
    lzf = b""
    for i in range(0, len(soa), 32):
        chunk = soa[i:i + 32]
        lzf += bytes([len(chunk) - 1]) + chunk
    put("pcd", "binary_compressed.pcd", (head + "DATA binary_compressed\n").encode() +
        struct.pack("<II", len(lzf), len(soa)) + lzf)
    head4 = head.replace("FIELDS x y z", "FIELDS x y z rgb").replace("SIZE 4 4 4", "SIZE 4 4 4 4") \
        .replace("TYPE F F F", "TYPE F F F U").replace("COUNT 1 1 1", "COUNT 1 1 1 1")
    put("pcd", "ascii-rgb.pcd", head4 + "DATA ascii\n" + "".join("%g %g %g 255\n" % p for p in PTS))


def seeds_off():
    body = "".join("%g %g %g\n" % p for p in PTS) + "".join("3 %d %d %d\n" % t for t in TRIS)
    put("off", "plain.off", "OFF\n%d %d 0\n" % (len(PTS), len(TRIS)) + body)
    put("off", "comments.off", "OFF\n# a comment\n\n%d %d 0 # counts\n" % (len(PTS), len(TRIS)) + body)
    put("off", "coff.off", "COFF\n%d 0 0\n" % len(PTS) + "".join("%g %g %g 1 0 0 1\n" % p for p in PTS))
    put("off", "noff.off", "NOFF\n%d 0 0\n" % len(PTS) + "".join("%g %g %g 0 0 1\n" % p for p in PTS))
    put("off", "counts-on-first-line.off", "OFF %d 0 0\n" % len(PTS) + "".join("%g %g %g\n" % p for p in PTS))


def seeds_xyz():
    put("xyz", "spaces.xyz", "".join("%g %g %g\n" % p for p in PTS))
    put("xyz", "commas.csv", "x,y,z\n" + "".join("%g,%g,%g\n" % p for p in PTS))
    put("xyz", "extra-columns.txt", "# comment\n" + "".join("%g\t%g\t%g\t1\t2\n" % p for p in PTS))
    put("xyz", "crlf.xyz", "".join("%g %g %g\r\n" % p for p in PTS))


def seeds_build():
    put("model_build", "lattice", bytes([0]) + bytes((i * 37) % 9 * 8 & 0xff for i in range(3 * 60)))
    put("model_build", "cube", bytes([0]) + bytes(
        c for x in (0, 8, 16) for y in (0, 8, 16) for z in (0, 8, 16) for c in (x, y, z)))
    put("model_build", "plane", bytes([1]) + bytes((i * 11) % 23 for i in range(3 * 40)))
    put("model_build", "line", bytes([2]) + bytes((i * 7) % 19 for i in range(3 * 20)))
    put("model_build", "floats", bytes([3]) + b"".join(struct.pack("<fff", *p) for p in PTS))
    put("model_build", "duplicates", bytes([0]) + bytes([1, 2, 3] * 10 + [4, 5, 6] * 10))
    put("model_build", "one-point", bytes([0, 5, 6, 7]))


def seeds_model_file(hicp):
    with tempfile.TemporaryDirectory() as t:
        cloud = os.path.join(t, "c.xyz")
        with open(cloud, "w") as f:  # 40 points in general position
            for i in range(40):
                f.write("%g %g %g\n" % ((i * 0.37) % 1.3, (i * 0.61) % 0.9, (i * 0.23) % 1.1))
        flat = os.path.join(t, "f.xyz")
        with open(flat, "w") as f:  # coplanar, built as a kd-tree only model
            for i in range(20):
                f.write("%g %g 0\n" % ((i * 0.37) % 1.3, (i * 0.61) % 0.9))
        box = os.path.join(t, "b.xyz")
        with open(box, "w") as f:  # 100 on each face of a box: a graph with guards
            for i in range(600):
                c = [(i * 0.3719) % 1.0, (i * 0.6143) % 1.0, (i * 0.2281) % 1.0]
                c[(i % 6) // 2] = float(i % 2)
                f.write("%g %g %g\n" % tuple(c))
        for src, name, opts in ((cloud, "delaunay.hicpm", []),
                                (flat, "kdtree.hicpm", ["--no-delaunay"]),
                                (box, "guarded.hicpm", [])):
            out = os.path.join(t, name)
            subprocess.run([hicp, "model", "build", src, "-o", out] + opts, check=True,
                           stdout=subprocess.DEVNULL)
            put("model_file", name, open(out, "rb").read())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    seeds_ply()
    seeds_pcd()
    seeds_off()
    seeds_xyz()
    seeds_build()
    seeds_model_file(sys.argv[1])


if __name__ == "__main__":
    main()
