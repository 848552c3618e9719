/* model.h: the model object.  Built by model_build.c (Delaunay graph from
 * delaunay_qhull.c, kd-tree from kdtree.c), saved and loaded back by
 * model_file.c, checked by model_validate.c. */
#ifndef HICP_MODEL_H
#define HICP_MODEL_H

#include <math.h>

#include "internal.h"
#include "pp/types.h"

struct hicp_model {
  uint64_t npoints;        /* points given */
  uint32_t nv;             /* distinct points = graph vertices */
  uint64_t nedges;         /* directed edges (each undirected edge twice) */
  hicp__vtx *vtx;          /* nv: coordinates; id = smallest original index */
  uint32_t *vertex_of;     /* npoints: original index -> vertex */
  uint32_t *row;           /* nv + 1, or NULL without a Delaunay graph */
  uint32_t *nbr;           /* nedges */
  uint8_t *ecode;          /* nedges: edge length lower bound, in eunit[v];
                              rows are sorted by edge length */
  float *eunit;            /* nv */
  float *safe_r2;          /* nv, with the graph: squared radius of the ball
                              around each vertex inside its Voronoi cell,
                              shrunk to cover rounding (pp/nn.h) */
  hicp__kdnode *kd;        /* nkd nodes */
  uint32_t nkd;
  hicp__vtx *kd_pts;       /* nv, leaf order, id = vertex index */
  float kd_lo[3], kd_hi[3]; /* the kd-tree's root cell: the least and
                               greatest float coordinates of its points,
                               computed from them (hicp__kdtree_box), never
                               read from a file */
  /* The start table (start_table.c), with the graph: a grid of
   * start_dim[0] x [1] x [2] cells over the bounding box, cell side
   * 1/start_inv from start_lo, x fastest; start[c] is the vertex nearest
   * cell c's centre, where a walk with no previous match begins.  NULL
   * without a graph. */
  uint32_t *start;
  uint32_t start_dim[3];
  float start_lo[3], start_inv;
  uint32_t zero_start;     /* vertex nearest the centroid */
  double origin[3];        /* coordinates are relative to this */
  double bbox_min[3], bbox_max[3]; /* of the relative coordinates */
  double diag;             /* bounding-box diagonal */
  int has_delaunay;
  uint32_t guards;         /* with the graph: the guard points it was built
                              with (lib/delaunay_qhull.c), 0 for none */
  char fallback[128];      /* why there is no graph */
  double build_ms, qhull_ms;
  uint64_t uid;            /* process-unique id (device caches key on it) */
  /* Storage: owned heap blocks (a loaded model's sections lie in one, the
   * file's bytes). */
  void *owned[16]; /* a build owns 10 today */
  int nowned;
};

/* The per-point code's view of a model. */
hicp__mview hicp__model_view(const hicp_model *m);
/* The guard points a Delaunay graph may be built with (double, in the
 * vertices' coordinates), in g (room for HICP_GUARDS_MAX), and how many:
 * on the sphere of radius R about the box's centre, one for about 64
 * vertices.  The view's guard_c, guard_r2 and guard_slack come from the
 * same box and R (lib/model.c). */
#define HICP_GUARD_GRID_MAX 26u
#define HICP_GUARDS_MAX (6u * HICP_GUARD_GRID_MAX * HICP_GUARD_GRID_MAX)
uint32_t hicp__model_guards(const hicp_model *m, double (*g)[3]);
/* The bounding box of the vertices (relative coordinates) and its
 * diagonal, as a build sets bbox_min, bbox_max and diag; a loaded file's
 * header must agree with it to the bit (lib/model_file.c). */
void hicp__model_box(const hicp_model *m, double lo[3], double hi[3], double *diag);
/* Sets kd_lo and kd_hi from the model's kd_pts. */
void hicp__kdtree_box(hicp_model *m);
/* The model's memory, part by part: the bytes_* fields of *info (the
 * rest untouched); hicp_model_get_info reports them. */
void hicp__model_bytes(const hicp_model *m, hicp_model_info *info);

/* Allocates an empty model with a fresh uid. */
hicp_model *hicp__model_new(void);
/* Records a heap block as owned by the model (freed with it) and returns it;
 * when the table is full (a programming error) frees the block and returns
 * NULL, which callers report as out of memory: never a silent leak. */
void *hicp__model_own(hicp_model *m, void *block);

/* Delaunay neighbour lists of nv distinct points (delaunay_qhull.c, the only
 * file that includes Qhull), triangulated with the nguards guard points,
 * which the lists leave out.  On success *row (nv + 1) and *nbr are heap
 * arrays, sorted by neighbour index within each row (hicp_model_build then
 * re-sorts each row by edge length), and *resolution2 is the squared
 * distance below which Qhull's double arithmetic could not tell these
 * points' Delaunay structure (its distance roundoff, back in the points'
 * units): the caller checks the closest pair against it.  Returns
 * HICP_EQHULL with Qhull's message when no 3-D triangulation exists (tiny
 * input): the caller falls back to the kd-tree. */
int hicp__delaunay_graph(hicp_context *ctx, const hicp__vtx *vtx, uint32_t nv,
                         const double (*guards)[3], uint32_t nguards, uint32_t **row,
                         uint32_t **nbr, uint64_t *nedges, double *qhull_ms,
                         double *resolution2);
/* The most of the nv points on one facet of their convex hull, vertices
 * and points on it to Qhull's roundoff alike, in *most: a flat face of the
 * hull, which lifts into one vertical facet of the Delaunay hull (guards,
 * lib/delaunay_qhull.c).  Milliseconds: 60,000 points in 15 ms.  0, or 1
 * when Qhull finds no 3-D hull (flat, collinear or tiny input) or fails,
 * or -1 out of memory. */
int hicp__flat_hull_face(const hicp__vtx *vtx, uint32_t nv, uint32_t *most);
/* A floor under that resolution2 for the same points, known without
 * running Qhull (0 when there is none, -1 out of memory): a closest pair
 * below it fails the check whatever Qhull gives. */
double hicp__delaunay_resolution_floor(const hicp__vtx *vtx, uint32_t nv,
                                       const double (*guards)[3], uint32_t nguards);

/* The squared distance between two vertices in double: the differences of
 * floats are exact there, and contraction is off, so every caller gets the
 * same bits; the model build compares such distances for equality
 * (model_build.c, check_graph), so they all come from here. */
static inline double hicp__vtx_dist2(const hicp__vtx *a, const hicp__vtx *b)
{
  const double dx = (double)a->x - b->x, dy = (double)a->y - b->y, dz = (double)a->z - b->z;
  return dx * dx + dy * dy + dz * dz;
}

/* The squared length of vertex v's shortest edge (+inf for none). */
static inline double hicp__shortest_edge2(const hicp_model *m, uint32_t v)
{
  double best = HUGE_VAL;
  for (uint32_t e = m->row[v]; e < m->row[v + 1]; e++) {
    const double d = hicp__vtx_dist2(&m->vtx[v], &m->vtx[m->nbr[e]]);
    best = d < best ? d : best;
  }
  return best;
}

/* Builds the start table of a model with a Delaunay graph and a kd-tree
 * (start_table.c). */
int hicp__start_table_build(hicp_context *ctx, hicp_model *m);

/* Builds the kd-tree over the model's vertices (kdtree.c). */
int hicp__kdtree_build(hicp_context *ctx, hicp_model *m);

/* The squared distance, in double, from vertex v to its nearest other
 * vertex (+inf when nv is 1), from the kd-tree (kdtree.c): the model build
 * checks the Delaunay graph against it. */
double hicp__kdtree_nearest_other(const hicp_model *m, uint32_t v);

/* Checks the model's invariants: neighbour lists sorted, in range, symmetric,
 * without self-loops or repeats; every vertex reachable from vertex 0;
 * duplicates mapped to a vertex with identical coordinates and the smallest
 * original index; kd-tree leaves covering every vertex once.  0 or
 * HICP_EINTERNAL with a message. */
int hicp__model_validate(hicp_context *ctx, const hicp_model *m);
/* Copies the caller's options (NULL = defaults) into @p o and checks them;
 * shared by building and by opening a saved model. */
int hicp__model_options_read(hicp_context *ctx, const hicp_model_options *user,
                             hicp_model_options *o);

/* Loads or saves the model file format (model_file.c). */
int hicp__model_is_file(const unsigned char *buf, size_t len);

#endif /* HICP_MODEL_H */
