/* model_build.c: hicp_model_build: distinct points, Delaunay graph, kd-tree.
 *
 * Duplicates: points with equal coordinates become one vertex, answering
 * with the smallest of their original indices (the vertex's id).
 *
 * Vertex order: along a Morton (Z-order) curve, so vertices near in space
 * are near in memory.  A walk step reads a vertex's row and then the
 * coordinates of its ~16 neighbours; in original order those are scattered
 * over the whole array, in curve order most share a few cache lines.  On
 * 1M points this cut coherent queries from 496 to 337 ns (docs/design.md).
 * The nearest-neighbour tie-break compares ids, not vertex indices, so the
 * order changes no answer. */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "fpenv.h"
#include "model.h"
#include "order.h"
#include "pp/nn.h"

typedef struct keyed {
  float x, y, z;
  uint32_t idx;
} keyed;

static int cmp_keyed(const void *pa, const void *pb)
{
  const keyed *a = pa, *b = pb;
  if (a->x != b->x)
    return a->x < b->x ? -1 : 1;
  if (a->y != b->y)
    return a->y < b->y ? -1 : 1;
  if (a->z != b->z)
    return a->z < b->z ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Copies the input (checking it) and maps duplicates to representatives. */
static int dedup(hicp_context *ctx, hicp_model *m, const float *xyz, size_t n, size_t stride)
{
  keyed *k = malloc(sizeof *k * n);
  uint32_t *rep = malloc(sizeof *rep * n);
  if (k == NULL || rep == NULL) {
    free(k);
    free(rep);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory reading %zu model points", n);
  }
  const unsigned char *base = (const unsigned char *)xyz;
  for (size_t i = 0; i < n; i++) {
    float p[3];
    memcpy(p, base + i * stride, sizeof p);
    int rc = hicp__check_point(ctx, "model", i, p[0], p[1], p[2]);
    if (rc != HICP_OK) {
      free(k);
      free(rep);
      return rc;
    }
    k[i].x = p[0];
    k[i].y = p[1];
    k[i].z = p[2];
    k[i].idx = (uint32_t)i;
  }
  qsort(k, n, sizeof *k, cmp_keyed);
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && k[j].x == k[i].x && k[j].y == k[i].y && k[j].z == k[i].z)
      rep[k[j++].idx] = k[i].idx; /* sorted by index within the group */
    i = j;
  }
  free(k);

  uint32_t nv = 0;
  for (size_t i = 0; i < n; i++)
    nv += rep[i] == i;
  m->vtx = hicp__model_own(m, hicp__aligned_alloc(64, sizeof(hicp__vtx) * nv));
  m->vertex_of = hicp__model_own(m, malloc(sizeof(uint32_t) * n));
  if (m->vtx == NULL || m->vertex_of == NULL) {
    free(rep);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for %zu model points", n);
  }
  uint32_t v = 0;
  for (size_t i = 0; i < n; i++) {
    if (rep[i] == i) {
      float p[3];
      memcpy(p, base + i * stride, sizeof p);
      m->vtx[v].x = p[0];
      m->vtx[v].y = p[1];
      m->vtx[v].z = p[2];
      m->vtx[v].id = (uint32_t)i;
      m->vertex_of[i] = v++;
    } else {
      /* rep[i] < i, so its vertex is already numbered. */
      m->vertex_of[i] = m->vertex_of[rep[i]];
    }
  }
  free(rep);
  m->nv = nv;
  m->npoints = n;
  return HICP_OK;
}

typedef struct zkey {
  uint64_t key;
  uint32_t id; /* original index: equal keys keep the original order */
  uint32_t v;  /* vertex before the reordering */
} zkey;

static int cmp_zkey(const void *pa, const void *pb)
{
  const zkey *a = pa, *b = pb;
  if (a->key != b->key)
    return a->key < b->key ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* Renumbers the vertices along the Morton curve over the model's bounding
 * box (order.h) and remaps vertex_of and zero_start to match. */
static int spatial_order(hicp_context *ctx, hicp_model *m)
{
  const uint32_t nv = m->nv;
  zkey *k = malloc(sizeof *k * nv);
  hicp__vtx *tmp = malloc(sizeof *tmp * nv);
  uint32_t *now = malloc(sizeof *now * nv); /* old vertex -> new vertex */
  if (k == NULL || tmp == NULL || now == NULL) {
    free(k);
    free(tmp);
    free(now);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory ordering %u model points", (unsigned)nv);
  }
  hicp__zgrid g;
  hicp__zgrid_init(&g, m->bbox_min, m->bbox_max);
  for (uint32_t v = 0; v < nv; v++) {
    k[v].key = hicp__zkey(&g, m->vtx[v].x, m->vtx[v].y, m->vtx[v].z);
    k[v].id = m->vtx[v].id;
    k[v].v = v;
  }
  qsort(k, nv, sizeof *k, cmp_zkey);
  for (uint32_t i = 0; i < nv; i++) {
    tmp[i] = m->vtx[k[i].v];
    now[k[i].v] = i;
  }
  memcpy(m->vtx, tmp, sizeof *tmp * nv);
  for (uint64_t i = 0; i < m->npoints; i++)
    m->vertex_of[i] = now[m->vertex_of[i]];
  m->zero_start = now[m->zero_start];
  free(k);
  free(tmp);
  free(now);
  return HICP_OK;
}

static void vtx_point(const void *arg, size_t i, double p[3])
{
  const hicp__vtx *v = &((const hicp_model *)arg)->vtx[i];
  p[0] = v->x;
  p[1] = v->y;
  p[2] = v->z;
}

/* A float model far from the origin next to its size (a float cloud in
 * UTM coordinates, or any float array) is kept relative to an origin of
 * its own, as the readers keep data held in double (docs/design.md,
 * "Coordinates far from the origin"): queries and scans given with more
 * detail than its floats (doubles, clouds with their own origin) are then
 * searched at the model's scale, not rounded to floats 4e6 from zero, a
 * quarter unit apart (stop 49: `hicp nn` answered with a farther vertex).
 * The vertices keep every bit (below); the condition is the readers'
 * (hicp__far_centre). */
static void far_origin(hicp_model *m)
{
  double lo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  for (uint32_t i = 0; i < m->nv; i++) {
    const double p[3] = {m->vtx[i].x, m->vtx[i].y, m->vtx[i].z};
    for (int d = 0; d < 3; d++) {
      lo[d] = p[d] < lo[d] ? p[d] : lo[d];
      hi[d] = p[d] > hi[d] ? p[d] : hi[d];
    }
  }
  double mid[3];
  if (m->nv == 0 || !hicp__far_centre(lo, hi, m->nv, vtx_point, m, mid))
    return;
  /* A float origin on each axis where every vertex less it is a float
   * again, exactly; 0 on the others.  Where all the values lie within a
   * factor two of it that holds by Sterbenz's lemma, but it is tested
   * vertex by vertex: a stray point at 0 (a missed return) breaks the
   * factor two and still subtracts exactly (stop 66's review: it left a
   * float map 4.5e6 from zero with origin 0). */
  float o[3];
  for (int d = 0; d < 3; d++) {
    o[d] = (float)mid[d];
    for (uint32_t i = 0; i < m->nv && o[d] != 0.0f; i++) {
      /* v - o exactly (Knuth's two-sum: its rounding error, t's part that
       * a double lost, must be 0; 1e-40 next to 1.0 lost itself in the
       * double: stop 66's second review), and a float */
      const double a = d == 0 ? m->vtx[i].x : d == 1 ? m->vtx[i].y : m->vtx[i].z;
      const double b = -(double)o[d], t = a + b, bb = t - a, lost = (a - (t - bb)) + (b - bb);
      if (lost != 0.0 || (double)(float)t != t)
        o[d] = 0.0f;
    }
    m->origin[d] = o[d];
  }
  for (uint32_t i = 0; i < m->nv; i++) {
    m->vtx[i].x -= o[0];
    m->vtx[i].y -= o[1];
    m->vtx[i].z -= o[2];
  }
}

void hicp__model_box(const hicp_model *m, double lo[3], double hi[3], double *diag)
{
  for (int d = 0; d < 3; d++) {
    lo[d] = HUGE_VAL;
    hi[d] = -HUGE_VAL;
  }
  for (uint32_t i = 0; i < m->nv; i++) {
    const double p[3] = {m->vtx[i].x, m->vtx[i].y, m->vtx[i].z};
    for (int d = 0; d < 3; d++) {
      lo[d] = p[d] < lo[d] ? p[d] : lo[d];
      hi[d] = p[d] > hi[d] ? p[d] : hi[d];
    }
  }
  double s = 0.0;
  for (int d = 0; d < 3; d++) {
    const double e = hi[d] - lo[d];
    s += e * e;
  }
  *diag = sqrt(s);
}

static void geometry(hicp_model *m)
{
  hicp__model_box(m, m->bbox_min, m->bbox_max, &m->diag);
  double c[3] = {0, 0, 0};
  for (uint32_t i = 0; i < m->nv; i++) {
    c[0] += m->vtx[i].x;
    c[1] += m->vtx[i].y;
    c[2] += m->vtx[i].z;
  }
  float q[3];
  for (int d = 0; d < 3; d++)
    q[d] = (float)(c[d] / m->nv);
  hicp__mview view = hicp__model_view(m);
  float dd;
  hicp__nn_brute(&view, q, &m->zero_start, &dd);
}

typedef struct edge_len {
  double len;
  uint32_t u;
} edge_len;

static int cmp_edge_len(const void *pa, const void *pb)
{
  const edge_len *a = pa, *b = pb;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  return a->u < b->u ? -1 : a->u > b->u;
}

/* A row's edges by (length, neighbour): a strict order, the neighbours of
 * a row being distinct, so any sort gives the same row.  Insertion for the
 * short rows of real models (16 edges on average), qsort beyond. */
static void sort_edges(edge_len *e, uint32_t n)
{
  if (n > 48) {
    qsort(e, n, sizeof *e, cmp_edge_len);
    return;
  }
  for (uint32_t i = 1; i < n; i++) {
    const edge_len x = e[i];
    uint32_t j = i;
    for (; j > 0 && cmp_edge_len(&x, &e[j - 1]) < 0; j--)
      e[j] = e[j - 1];
    e[j] = x;
  }
}

/* One row of sort_rows; tmp holds the row's degree. */
static void sort_row(hicp_model *m, uint32_t v, edge_len *tmp)
{
  uint32_t b = m->row[v], n = m->row[v + 1] - b;
  const hicp__vtx *a = &m->vtx[v];
  for (uint32_t k = 0; k < n; k++) {
    tmp[k].len = sqrt(hicp__vtx_dist2(a, &m->vtx[m->nbr[b + k]]));
    tmp[k].u = m->nbr[b + k];
  }
  sort_edges(tmp, n);
  /* lengths are computed in double from float coordinates: shrink the
   * bounds by 1e-12 relative to stay below the exact lengths */
  double lmax = tmp[n - 1].len * (1.0 - 1e-12);
  float unit = hicp__round_down(lmax / 255.0);
  m->eunit[v] = unit;
  for (uint32_t k = 0; k < n; k++) {
    double lo = tmp[k].len * (1.0 - 1e-12);
    double c = unit > 0.0f ? floor(lo / unit) : 0.0;
    if (c > 255.0)
      c = 255.0;
    while (c > 0.0 && c * unit > lo)
      c -= 1.0;
    m->nbr[b + k] = tmp[k].u;
    m->ecode[b + k] = (uint8_t)c;
  }
  /* less an absolute 8 FLT_MIN: computed squared distances below FLT_MIN
   * lose their relative accuracy (the walk's early exit, lib/pp/nn.h) */
  double r2 = 0.25 * tmp[0].len * tmp[0].len * (1.0 - 4e-5) - 8.0 * (double)FLT_MIN;
  m->safe_r2[v] = hicp__round_down(r2);
}

/* Sorts each row by edge length and records, per edge, a lower bound of
 * its length as an 8-bit multiple of a per-row unit (Lmax / 255, rounded
 * down): the walk skips the rest of a row once the bound shows that no
 * further neighbour can be nearer the query (pp/nn.h).  Also the safe radius
 * of each vertex: half the distance to its nearest other vertex (always a
 * Delaunay neighbour), squared, shrunk by 4e-5 relative and rounded down, so
 * that a query inside it has that vertex as its nearest beyond any
 * rounding.
 *
 * The rows are independent: sorted on the build's threads, each row the
 * same whatever thread sorts it. */
static int sort_rows(hicp_context *ctx, hicp_model *m)
{
  m->safe_r2 = hicp__model_own(m, malloc(sizeof(float) * m->nv));
  m->eunit = hicp__model_own(m, malloc(sizeof(float) * m->nv));
  /* 16 bytes of padding: vector code scans may read past a row's end */
  m->ecode = hicp__model_own(m, calloc(m->nedges + 16, 1));
  uint32_t maxdeg = 0;
  for (uint32_t v = 0; v < m->nv; v++)
    maxdeg = m->row[v + 1] - m->row[v] > maxdeg ? m->row[v + 1] - m->row[v] : maxdeg;
  if (m->safe_r2 == NULL || m->eunit == NULL || m->ecode == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the model");
  const long long nv = m->nv;
  int lost = 0;
  const int threads = hicp__team_use(hicp__team_threads(ctx));
  (void)threads; /* a build without OpenMP drops the pragma that takes it */
#pragma omp parallel num_threads(threads) reduction(| : lost)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
    edge_len *tmp = malloc(sizeof *tmp * (maxdeg ? maxdeg : 1));
    lost |= tmp == NULL;
#pragma omp for schedule(dynamic, 1024)
    for (long long v = 0; v < nv; v++)
      if (tmp != NULL)
        sort_row(m, (uint32_t)v, tmp);
    free(tmp);
    hicp__fpenv_leave(&fe);
  }
  if (lost)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the model");
  return HICP_OK;
}

/* Each vertex's squared distance to its nearest other vertex, by the
 * kd-tree (in double), for below_resolution and check_graph: one search
 * a vertex, on the build's threads (each vertex's own, so the values are
 * the same for any number of threads; both checks read them in vertex
 * order).  They searched each vertex in turn, twice: 1.7% of a 200k-point
 * build on one thread.  NULL out of memory (8 bytes a vertex, inside the
 * build's budget: model_build). */
static double *nearest_others(hicp_context *ctx, const hicp_model *m)
{
  double *near = malloc(sizeof *near * (m->nv ? m->nv : 1));
  if (near == NULL)
    return NULL;
  const long long nv = m->nv;
  const int threads = hicp__team_use(hicp__team_threads(ctx));
  (void)threads; /* a build without OpenMP drops the pragma that takes it */
#pragma omp parallel num_threads(threads)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
#pragma omp for schedule(dynamic, 1024)
    for (long long v = 0; v < nv; v++)
      near[v] = hicp__kdtree_nearest_other(m, (uint32_t)v);
    hicp__fpenv_leave(&fe);
  }
  return near;
}

/* Whether the Delaunay graph Qhull gave (rows not yet sorted) can serve
 * the exact walk, checked against the kd-tree's nearest other vertex of
 * each vertex (in double, near: nearest_others):
 * - the closest pair must lie above the distance Qhull's arithmetic
 *   resolves at these points' range (hicp__delaunay_graph's resolution2);
 * - each vertex's nearest other vertex must be one of its neighbours at
 *   the shortest edge: a nearest neighbour is strictly Gabriel (no other
 *   point in or on the sphere with that edge as diameter), so it is an
 *   edge of every Delaunay triangulation, and a graph without it is not
 *   one.
 * Answers HICP_EQHULL, and the caller falls back to the kd-tree, which
 * answers every method exactly; real models pass both with a wide margin
 * (docs/design.md, "When Qhull cannot resolve the points").  The vertices
 * are checked on the build's threads; which check fails, and the closest
 * pair, do not depend on their number. */
static int check_graph(hicp_context *ctx, const hicp_model *m, const double *near,
                       double resolution2)
{
  double closest = HUGE_VAL;
  int missing = 0;
  const long long nv = m->nv;
  const int threads = hicp__team_use(hicp__team_threads(ctx));
  (void)threads;
#pragma omp parallel num_threads(threads) reduction(min : closest) reduction(| : missing)
  {
    hicp__fpenv fe;
    hicp__fpenv_enter(&fe);
#pragma omp for schedule(dynamic, 1024)
    for (long long v = 0; v < nv; v++) {
      missing |= hicp__shortest_edge2(m, (uint32_t)v) > near[v];
      closest = near[v] < closest ? near[v] : closest;
    }
    hicp__fpenv_leave(&fe);
  }
  if (missing)
    return hicp__fail(ctx, HICP_EQHULL,
                      "the triangulation misses a nearest-neighbour edge (Qhull precision)");
  if (closest < resolution2)
    return hicp__fail(ctx, HICP_EQHULL,
                      "points %.3g apart are below Qhull's resolution at this range (%.3g)",
                      sqrt(closest), sqrt(resolution2));
  return HICP_OK;
}

/* The graph is built with guards (lib/delaunay_qhull.c) when a face of
 * the points' convex hull holds at least this many of them, flat to
 * Qhull's roundoff (sampled CAD panels, a depth frame's wall, points on a
 * plane x = y, a flat model), which Qhull alone builds in time quadratic
 * in the face's points (hicp__flat_hull_face finds it).  The same box of
 * faces turned 30 degrees (its coordinates rounded to float, off the
 * plane by some 1e-8 of the side) took 0.76 s, 15 s unturned.  Other
 * models are built as before: their Qhull takes about as long either way
 * (bunny00 0.73 s, 0.64 s with 600 guards), but the guards widen the range
 * of the lifted points, and with it the closest pair Qhull resolves
 * (check_graph), and keep a few hull edges out of the graph
 * (docs/design.md, "Guards"). */
#define GUARD_FACE_MIN 64u

/* For inputs with no 3-D hull: the most vertices on one of the six planes
 * of the kd-tree's box (the box the guards are placed by), or within 1e-9
 * of the box's longest side of it.  A flat input on an axis-aligned plane
 * gets a graph with guards; other flat inputs and lines go to the kd-tree
 * as before. */
static int box_plane_guards(const hicp_model *m)
{
  uint32_t on[6] = {0, 0, 0, 0, 0, 0};
  double side = 0.0;
  for (int d = 0; d < 3; d++)
    side = fmax(side, (double)m->kd_hi[d] - (double)m->kd_lo[d]);
  const double tol = 1e-9 * side;
  for (uint32_t v = 0; v < m->nv; v++) {
    const double c[3] = {m->vtx[v].x, m->vtx[v].y, m->vtx[v].z};
    for (int d = 0; d < 3; d++) {
      on[2 * d] += c[d] - (double)m->kd_lo[d] <= tol;
      on[2 * d + 1] += (double)m->kd_hi[d] - c[d] <= tol;
    }
  }
  for (int k = 0; k < 6; k++)
    if (on[k] >= GUARD_FACE_MIN)
      return 1;
  return 0;
}

/* Whether the graph needs guards (*need): a flat face of GUARD_FACE_MIN
 * points or more on the hull (fandisk_large.off's top face holds 2,133
 * vertices at z = -3.4e-14 and others up to 3.2e-14, flat to Qhull's
 * roundoff: its Qhull took 1.8 s, 0.4 s with guards), or for an input
 * without a 3-D hull, box_plane_guards.  HICP_ENOMEM when the hull's
 * Qhull runs out of memory, as the triangulation's would: the system's
 * failure, not the input's (tests/check-failmalloc.sh). */
static int needs_guards(hicp_context *ctx, const hicp_model *m, int *need)
{
  uint32_t most;
  const int rc = hicp__flat_hull_face(m->vtx, m->nv, &most);
  if (rc < 0)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the points' convex hull (Qhull)");
  *need = rc == 0 ? most >= GUARD_FACE_MIN : box_plane_guards(m);
  return HICP_OK;
}

/* check_graph's resolution test before Qhull runs, against the floor of
 * the resolution (hicp__delaunay_resolution_floor): HICP_EQHULL, the
 * kd-tree fallback, where Qhull's graph would certainly be refused. */
static int below_resolution(hicp_context *ctx, const hicp_model *m, const double *near,
                            const double (*guards)[3], uint32_t nguards)
{
  const double floor2 = hicp__delaunay_resolution_floor(m->vtx, m->nv, guards, nguards);
  if (floor2 < 0.0)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the Delaunay triangulation");
  if (floor2 == 0.0)
    return HICP_OK;
  double closest = HUGE_VAL;
  for (uint32_t v = 0; v < m->nv && closest >= floor2; v++)
    closest = near[v] < closest ? near[v] : closest;
  if (closest < floor2)
    return hicp__fail(ctx, HICP_EQHULL,
                      "points %.3g apart are below Qhull's resolution at this range (at least "
                      "%.3g)",
                      sqrt(closest), sqrt(floor2));
  return HICP_OK;
}

int hicp__model_options_read(hicp_context *ctx, const hicp_model_options *user,
                             hicp_model_options *o)
{
  hicp_model_options_init(o);
  if (user != NULL && hicp__copy_sized(o, sizeof *o, user,
                                       offsetof(hicp_model_options, flags) + sizeof(unsigned),
                                       "hicp_model_options", ctx) != 0)
    return HICP_EINVAL;
  if (o->flags != 0 || (o->delaunay != 0 && o->delaunay != 1) ||
      (o->validate != 0 && o->validate != 1))
    return hicp__fail(ctx, HICP_EINVAL,
                      "hicp_model_options: delaunay and validate must be 0 or 1, flags 0");
  return HICP_OK;
}

static int model_build(hicp_context *ctx, const float *xyz, size_t n, size_t stride,
                       const hicp_model_options *user, hicp_model **out)
{
  hicp_model_options o;
  if (out == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_model_build: NULL output");
  *out = NULL;
  if (hicp__model_options_read(ctx, user, &o) != HICP_OK)
    return HICP_EINVAL;
  int rc = hicp__point_stride(ctx, "model", stride, 3 * sizeof(float), &stride);
  if (rc == HICP_OK)
    rc = hicp__check_count(ctx, "model", xyz, n);
  if (rc == HICP_OK)
    rc = hicp__check_span(ctx, "model", n, stride, 3 * sizeof(float));
  if (rc != HICP_OK)
    return rc;
  /* The build's peak, a point, measured (stop 43: the process's peak
   * resident memory around hicp_model_build, freed memory returned to the
   * system): with the Delaunay graph, Qhull's working memory beside the
   * model's arrays, 1.6-2.6 KB a point on scanned and CAD models and
   * random points (bunny00 2.3, fandisk_large 2.6, a random cube 2.2, a
   * sphere 1.6); a regular lattice, all cospherical, takes more (5.2 KB:
   * docs/robustness.md).  The kd-tree alone, 55 bytes a point. */
  const uint64_t per_point = o.delaunay ? 2800u : 64u;
  rc = hicp__check_budget(ctx, (uint64_t)n * per_point, "the model");
  if (rc == HICP_OK)
    rc = hicp__team_ready(ctx);
  if (rc != HICP_OK)
    return rc;

  double t0 = hicp__now_ms();
  hicp_model *m = hicp__model_new();
  if (m == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the model");
  rc = dedup(ctx, m, xyz, n, stride);
  if (rc == HICP_OK) {
    far_origin(m);
    geometry(m);
    rc = spatial_order(ctx, m);
  }
  /* the kd-tree first: the graph is checked against it */
  if (rc == HICP_OK)
    rc = hicp__kdtree_build(ctx, m);
  if (rc == HICP_OK) {
    m->has_delaunay = 0;
    if (o.delaunay) {
      double resolution2;
      double(*guards)[3] = malloc(sizeof *guards * HICP_GUARDS_MAX);
      double *near = guards != NULL ? nearest_others(ctx, m) : NULL;
      uint32_t nguards = 0;
      int need = 0;
      if (guards == NULL || near == NULL)
        rc = hicp__fail(ctx, HICP_ENOMEM, "out of memory for the Delaunay triangulation");
      else
        rc = needs_guards(ctx, m, &need);
      if (rc == HICP_OK && need)
        nguards = hicp__model_guards(m, guards);
      if (rc == HICP_OK)
        rc = below_resolution(ctx, m, near, guards, nguards);
      if (rc == HICP_OK)
        rc = hicp__delaunay_graph(ctx, m->vtx, m->nv, guards, nguards, &m->row, &m->nbr,
                                  &m->nedges, &m->qhull_ms, &resolution2);
      free(guards);
      if (rc == HICP_OK)
        rc = check_graph(ctx, m, near, resolution2);
      free(near);
      if (rc != HICP_OK) {
        free(m->row);
        free(m->nbr);
        m->row = NULL;
        m->nbr = NULL;
        m->nedges = 0;
      }
      if (rc == HICP_OK) {
        m->row = hicp__model_own(m, m->row);
        m->nbr = hicp__model_own(m, m->nbr);
        if (m->row == NULL || m->nbr == NULL) {
          rc = hicp__fail(ctx, HICP_ENOMEM, "out of memory for the Delaunay graph");
        } else {
          m->has_delaunay = 1;
          m->guards = nguards;
          rc = sort_rows(ctx, m);
          if (rc == HICP_OK)
            rc = hicp__start_table_build(ctx, m);
        }
      } else if (rc == HICP_EQHULL) {
        /* No 3-D triangulation (collinear, tiny, or flat but for
         * box_plane_guards), or none Qhull could resolve: the
         * kd-tree serves every method exactly.  Keep
         * the reason for hicp model info. */
        const char *why = hicp__fail_message(ctx);
        snprintf(m->fallback, sizeof m->fallback, "%.*s", hicp__utf8_prec(why, 127), why);
        hicp__clear_error(ctx);
        rc = HICP_OK;
      }
    } else {
      snprintf(m->fallback, sizeof m->fallback, "built without a Delaunay graph (by request)");
    }
  }
  if (rc == HICP_OK && o.validate)
    rc = hicp__model_validate(ctx, m);
  if (rc != HICP_OK) {
    hicp_model_destroy(m);
    return rc;
  }
  m->build_ms = hicp__now_ms() - t0;
  *out = m;
  return HICP_OK;
}

int hicp_model_build(hicp_context *ctx, const float *xyz, size_t n, size_t stride,
                     const hicp_model_options *user, hicp_model **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = model_build(ctx, xyz, n, stride, user, out);
  hicp__fpenv_leave(&fe);
  return rc;
}
