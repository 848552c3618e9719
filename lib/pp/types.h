/* pp/types.h: the model as the per-point code sees it (plain pointers, so
 * the same view works on host memory and on device memory). */
#ifndef HICP_PP_TYPES_H
#define HICP_PP_TYPES_H

#include "pp/hd.h"

/* A model vertex: its coordinates (relative to the model origin) and an id.
 * In the vertex array the id is the smallest original index of the points at
 * these coordinates; in the kd-tree's leaf array it is the vertex index.
 * 16 bytes, so the GPU reads one with a single 128-bit load. */
typedef struct __attribute__((aligned(16))) hicp__vtx {
  float x, y, z;
  uint32_t id;
} hicp__vtx;

/* kd-tree node.  Internal: `dim` 0..2 splits at `split`; points with a
 * coordinate below split are on the left, above on the right, equal on either
 * side; children are nodes `first` (left) and `first + 1` (right).
 * Leaf: dim == HICP_KD_LEAF, points kd_pts[first .. first + count). */
typedef struct hicp__kdnode {
  float split;
  uint32_t dim;
  uint32_t first;
  uint32_t count;
} hicp__kdnode;

#define HICP_KD_LEAF 3u
#define HICP_KD_MAX_DEPTH 64
/* Points a leaf holds at most (lib/kdtree.c splits at the median until
 * then); a model file's larger leaf is forged, and a leaf of them all
 * would make every kd search a scan of the whole model. */
#define HICP_KD_LEAF_SIZE 8u

/* Read-only view of a model for the nearest-neighbour code. */
typedef struct hicp__mview {
  const hicp__vtx *vtx;      /* nv vertices, in spatial (Morton) order */
  const uint32_t *row;       /* nv + 1 CSR offsets into nbr; NULL: no graph */
  const uint32_t *nbr;       /* Delaunay neighbours (vertex indices) */
  const hicp__kdnode *kd;    /* kd-tree, root at kd[0] */
  const hicp__vtx *kd_pts;   /* vertices in leaf order, id = vertex index */
  float kd_lo[3], kd_hi[3];  /* the kd-tree's root cell (lib/model.h) */
  const float *safe_r2;      /* per vertex, or NULL: see hicp__nn_walk */
  const uint8_t *ecode;      /* per edge: length lower bound in units of eunit */
  const float *eunit;        /* per vertex: the unit of its row's codes */
  uint32_t nv;
  uint32_t zero_start;       /* vertex nearest the centroid (the "zero" walk) */
  const uint32_t *start;     /* start table (lib/model.h), or NULL */
  uint32_t start_dim[3];
  float start_lo[3], start_inv;
  /* With the graph, where a walk's answer holds (hicp__guard_safe): the
   * graph may be the Delaunay graph of the vertices and guard points
   * around them, the guards left out (lib/model.c, hicp__model_guards),
   * and a guard is never nearer a query than its answer within these. */
  float guard_c[3];  /* the guards' centre; each guard is R from it */
  float guard_r2;    /* (0.45 R)^2, rounded down */
  float guard_slack; /* 0.03 R, rounded down (hicp__guard_cut) */
} hicp__mview;

#endif /* HICP_PP_TYPES_H */
