/* delaunay_qhull.c: the 3-D Delaunay neighbour graph, from Qhull.  The only
 * file that includes Qhull.
 *
 * Qhull computes the Delaunay triangulation as the lower convex hull of the
 * points lifted to the paraboloid z' = x^2 + y^2 + z^2 (option "d"), with
 *   Qbb  scale the lifted coordinate to the range of the others (precision),
 *   Qz   add a point "at infinity" (cospherical inputs such as grid-sampled
 *        CAD or a sphere would otherwise be degenerate),
 *   Qc   keep points that are not vertices in their facets' coplanar sets,
 *   Qt   triangulated output.
 * Joggle (QJ) is never used: the graph must be that of the points as given.
 *
 * Where the points have a flat face on their hull (the sampled panels of a
 * CAD model, a depth frame's wall: model_build.c, needs_guards), guard
 * points on a sphere surround them (lib/model.c, hicp__model_guards);
 * Qhull triangulates the guards with the vertices, and the graph leaves
 * them out.  Without them, the points of such a face lift into one
 * vertical facet, which Qhull grows by merging each new point's facets
 * into it, in time quadratic in the face's points: 60,000 samples of
 * boeing.off took 56 s in Qhull, 1 s with the guards (docs/design.md,
 * "Guards").  The guards are many, one for about 64 points, because a
 * guard is joined to every point of a face it faces, and Qhull's work on
 * each new point grows with that degree: eight guards at the corners of a
 * box took 66 s for a 640 x 480 depth frame, 4,096 on a sphere 14 s.
 * Inside the guards no vertex is on the hull, and a flat input has a 3-D
 * triangulation.
 * The graph may then lack a Delaunay edge of the vertices alone, one whose
 * every empty sphere holds a guard; a walk can need such an edge only
 * where a guard could be nearer the query than the walk's answer, which
 * the walk checks (pp/nn.h, hicp__guard_safe), answering those queries
 * with the kd-tree.
 *
 * Where Qhull merged nearly cospherical cells for precision, Qt triangulates
 * the merged region arbitrarily; such a triangulation may miss an edge of the
 * exact Delaunay graph of the float points.  The graph therefore makes each
 * merged region a clique (every pair of its vertices adjacent), a superset
 * that keeps the greedy walk exact.  Points Qhull dropped as coplanar (nearly
 * coincident with a vertex or nearly on a circumsphere) are joined to the
 * vertices of their facet and to those vertices' neighbours.
 *
 * Where the points' scales differ too much for Qhull's double arithmetic
 * to resolve the smallest of them (lifted_resolution2), the model build
 * does not use the graph (model_build.c, check_graph).
 *
 * Every Qhull call runs under its setjmp trap (qh_new_qhull sets its own;
 * our facet walk sets one too), Qhull's messages go to a memory stream and
 * become our error message, and Qhull's memory is freed on every path. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libqhull_r/qhull_ra.h>

#include "icp.h"
#include "model.h"
#include "pp/nn.h"

/* Merged regions larger than this are left as Qhull triangulated them
 * rather than made a clique (a clique of a huge cospherical set would be
 * quadratic).  The tie-resolving flood of the walk (pp/nn.h) covers the
 * near-ties inside such regions. */
#define CLIQUE_MAX 48

typedef struct edge_buf {
  uint64_t *e; /* (a << 32) | b */
  size_t n, cap;
} edge_buf;

static int edge_push(edge_buf *b, uint32_t a, uint32_t c)
{
  if (a == c)
    return 0;
  if (b->n + 2 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 1 << 16;
    uint64_t *e = realloc(b->e, cap * sizeof *e);
    if (e == NULL)
      return -1;
    b->e = e;
    b->cap = cap;
  }
  b->e[b->n++] = ((uint64_t)a << 32) | c;
  b->e[b->n++] = ((uint64_t)c << 32) | a;
  return 0;
}

static int cmp_u64(const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Last non-empty line of Qhull's output, trimmed, for our message. */
static void qhull_message(char *buf, size_t len, char *out, size_t outlen)
{
  out[0] = '\0';
  if (buf == NULL || len == 0)
    return;
  /* Qhull's error starts with "QHnnnn"; keep from the first such tag. */
  char *tag = strstr(buf, "QH");
  char *s = tag != NULL ? tag : buf;
  size_t k = 0;
  for (; *s != '\0' && k + 1 < outlen; s++) {
    if (*s == '\n' || *s == '\r') {
      if (k > 0 && out[k - 1] != ' ')
        out[k++] = ' ';
      if (s[1] == '\n' || s[1] == '\0')
        break; /* a blank line ends Qhull's first paragraph */
      continue;
    }
    out[k++] = *s;
  }
  while (k > 0 && out[k - 1] == ' ')
    k--;
  out[k] = '\0';
}

/* Collects the vertices of a facet as vertex indices (< nv). */
static int facet_vertices(qhT *qh, facetT *facet, uint32_t nv, uint32_t *ids, int max)
{
  int k = 0;
  vertexT *vertex, **vertexp;
  FOREACHvertex_(facet->vertices) {
    int id = qh_pointid(qh, vertex->point);
    if (id >= 0 && (uint32_t)id < nv && k < max)
      ids[k++] = (uint32_t)id;
  }
  return k;
}

static int clique(edge_buf *eb, const uint32_t *ids, size_t k)
{
  for (size_t i = 0; i < k; i++)
    for (size_t j = i + 1; j < k; j++)
      if (edge_push(eb, ids[i], ids[j]) != 0)
        return -1;
  return 0;
}

/* Regions Qhull merged: after Qt their pieces are "tricoplanar" facets that
 * share one owner.  The union of the pieces' vertices becomes a clique.
 * pairs: (owner id << 32) | vertex, one for each vertex of each piece
 * (read_facets), sorted here. */
static int merged_cliques(uint64_t *pairs, size_t n, edge_buf *eb)
{
  if (n > 1) /* (qsort must not see the NULL of an empty list) */
    qsort(pairs, n, sizeof *pairs, cmp_u64);
  uint32_t group[CLIQUE_MAX];
  int rc = 0;
  for (size_t i = 0; i < n && rc == 0;) {
    size_t j = i;
    size_t k = 0;
    while (j < n && pairs[j] >> 32 == pairs[i] >> 32) {
      if ((j == i || pairs[j] != pairs[j - 1]) && k < CLIQUE_MAX + 1) {
        if (k < CLIQUE_MAX)
          group[k] = (uint32_t)pairs[j];
        k++;
      }
      j++;
    }
    if (k <= CLIQUE_MAX)
      rc = clique(eb, group, k);
    i = j;
  }
  return rc;
}

/* What one walk over Qhull's facets keeps (read_facets), so that Qhull's
 * memory can go before the graph is built from it: each lower Delaunay
 * cell's vertices (4 slots, HICP_NONE where a guard or the point at
 * infinity was), and the edges the cells do not give directly (merged
 * regions made cliques, points left out of the cells joined to their
 * facet's vertices).  The facet list is a linked list in no memory order,
 * and each facet's vertices are a set of pointers: every walk over it
 * misses the cache at each step.  Three such walks (cliques, coplanar
 * points, then the cells counted and the cells filled in) were 16% of a
 * 200k-point build (perf, one thread), as much as a fifth of Qhull's own
 * time. */
typedef struct cells {
  uint32_t *v; /* 4 a cell */
  size_t n, cap;
} cells;

static int cells_push(cells *c, const uint32_t *ids, int k)
{
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 1 << 16;
    uint32_t *v = realloc(c->v, cap * 4 * sizeof *v);
    if (v == NULL)
      return -1;
    c->v = v;
    c->cap = cap;
  }
  uint32_t *t = &c->v[4 * c->n++];
  for (int i = 0; i < 4; i++)
    t[i] = i < k ? ids[i] : HICP_NONE;
  return 0;
}

/* The one walk over the facets.  coplanar_seen marks the points found in
 * a coplanar set.  0, or -1 out of memory. */
static int read_facets(qhT *qh, uint32_t nv, cells *cl, edge_buf *eb, char *coplanar_seen)
{
  facetT *facet;
  uint32_t ids[8];
  size_t n = 0, cap = 0;
  uint64_t *pairs = NULL; /* merged pieces: (owner id << 32) | vertex */
  int rc = 0;
  FORALLfacets {
    const int k = facet_vertices(qh, facet, nv, ids, 8);
    if (facet->coplanarset != NULL) {
      /* Input points Qhull did not make vertices. */
      pointT *point, **pointp;
      FOREACHpoint_(facet->coplanarset) {
        int id = qh_pointid(qh, point);
        if (id < 0 || (uint32_t)id >= nv)
          continue;
        coplanar_seen[id] = 1;
        for (int i = 0; i < k; i++)
          if (edge_push(eb, (uint32_t)id, ids[i]) != 0)
            rc = -1;
      }
    }
    if (facet->upperdelaunay || rc != 0)
      continue;
    if (facet->tricoplanar && facet->f.triowner != NULL) {
      if (n + (size_t)k > cap) {
        cap = cap ? cap * 2 : 1024;
        uint64_t *p = realloc(pairs, cap * sizeof *p);
        if (p == NULL) {
          rc = -1;
          break;
        }
        pairs = p;
      }
      for (int i = 0; i < k; i++)
        pairs[n++] = ((uint64_t)facet->f.triowner->id << 32) | ids[i];
    }
    /* Qt leaves every facet a simplex; a wider one (never seen) joins
     * its vertices by the extra edges instead */
    if (k <= 4 ? cells_push(cl, ids, k) != 0 : clique(eb, ids, (size_t)k) != 0)
      rc = -1;
    if (rc != 0)
      break;
  }
  if (rc == 0)
    rc = merged_cliques(pairs, n, eb);
  free(pairs);
  return rc;
}

/* Every cell's vertices become neighbours of each other.  Two passes over
 * the cells (count, then fill) build per-vertex lists with repeats (each
 * edge appears once per cell around it), which dedupe_rows compacts: no
 * global sort of the edges. */
static int collect_cells(const cells *cl, uint32_t nv, const edge_buf *extra, uint64_t **off_out,
                         uint32_t **slot_out)
{
  uint64_t *off = calloc((size_t)nv + 1, sizeof *off);
  if (off == NULL)
    return -1;
  for (size_t c = 0; c < cl->n; c++) {
    const uint32_t *t = &cl->v[4 * c];
    const int k = (t[0] != HICP_NONE) + (t[1] != HICP_NONE) + (t[2] != HICP_NONE) +
                  (t[3] != HICP_NONE);
    for (int i = 0; i < k; i++)
      off[t[i] + 1] += (uint64_t)(k - 1);
  }
  for (size_t i = 0; i < extra->n; i++)
    off[(extra->e[i] >> 32) + 1]++;
  for (uint32_t v = 0; v < nv; v++)
    off[v + 1] += off[v];
  uint32_t *slot = malloc(sizeof *slot * (off[nv] ? off[nv] : 1));
  uint64_t *fill = malloc(sizeof *fill * ((size_t)nv + 1));
  if (slot == NULL || fill == NULL) {
    free(off);
    free(slot);
    free(fill);
    return -1;
  }
  memcpy(fill, off, sizeof *fill * ((size_t)nv + 1));
  for (size_t c = 0; c < cl->n; c++) {
    const uint32_t *t = &cl->v[4 * c];
    const int k = (t[0] != HICP_NONE) + (t[1] != HICP_NONE) + (t[2] != HICP_NONE) +
                  (t[3] != HICP_NONE);
    for (int i = 0; i < k; i++)
      for (int j = 0; j < k; j++)
        if (i != j)
          slot[fill[t[i]]++] = t[j];
  }
  for (size_t i = 0; i < extra->n; i++)
    slot[fill[extra->e[i] >> 32]++] = (uint32_t)extra->e[i];
  free(fill);
  *off_out = off;
  *slot_out = slot;
  return 0;
}

/* Per-vertex lists with repeats -> CSR without repeats or self-loops, by
 * stamping each neighbour with the row it was last seen in. */
static int dedupe_rows(uint32_t nv, const uint64_t *off, const uint32_t *slot, uint32_t **row_out,
                       uint32_t **nbr_out, uint64_t *nedges)
{
  uint32_t *stamp = malloc(sizeof *stamp * nv);
  uint32_t *row = malloc(sizeof *row * ((size_t)nv + 1));
  uint32_t *nbr = malloc(sizeof *nbr * (off[nv] ? off[nv] : 1));
  if (stamp == NULL || row == NULL || nbr == NULL) {
    free(stamp);
    free(row);
    free(nbr);
    return -1;
  }
  for (uint32_t v = 0; v < nv; v++)
    stamp[v] = HICP_NONE;
  uint64_t n = 0;
  for (uint32_t v = 0; v < nv; v++) {
    if (n > UINT32_MAX) {
      free(stamp);
      free(row);
      free(nbr);
      return -2;
    }
    row[v] = (uint32_t)n;
    for (uint64_t k = off[v]; k < off[v + 1]; k++) {
      uint32_t u = slot[k];
      if (u == v || stamp[u] == v)
        continue;
      stamp[u] = v;
      nbr[n++] = u;
    }
  }
  if (n > UINT32_MAX) {
    free(stamp);
    free(row);
    free(nbr);
    return -2;
  }
  row[nv] = (uint32_t)n;
  free(stamp);
  uint32_t *shrunk = realloc(nbr, sizeof *nbr * (n ? n : 1));
  *row_out = row;
  *nbr_out = shrunk != NULL ? shrunk : nbr;
  *nedges = n;
  return 0;
}

/* Sorted, deduplicated directed edges -> CSR. */
static int edges_to_csr(edge_buf *eb, uint32_t nv, uint32_t **row_out, uint32_t **nbr_out,
                        uint64_t *nedges)
{
  if (eb->n > 1)
    qsort(eb->e, eb->n, sizeof *eb->e, cmp_u64);
  size_t u = 0;
  for (size_t i = 0; i < eb->n; i++)
    if (i == 0 || eb->e[i] != eb->e[i - 1])
      eb->e[u++] = eb->e[i];
  if (u > UINT32_MAX)
    return -2;
  uint32_t *row = calloc((size_t)nv + 1, sizeof *row);
  uint32_t *nbr = malloc((u ? u : 1) * sizeof *nbr);
  if (row == NULL || nbr == NULL) {
    free(row);
    free(nbr);
    return -1;
  }
  for (size_t i = 0; i < u; i++) {
    row[(eb->e[i] >> 32) + 1]++;
    nbr[i] = (uint32_t)eb->e[i];
  }
  for (uint32_t v = 0; v < nv; v++)
    row[v + 1] += row[v];
  *row_out = row;
  *nbr_out = nbr;
  *nedges = u;
  return 0;
}

/* Joins vertices that Qhull left out to the neighbours of the vertices they
 * were attached to (second ring), so that a walk can both reach them and
 * leave them towards any direction. */
static int add_second_ring(const uint32_t *row, const uint32_t *nbr, uint32_t nv,
                           const char *dropped, edge_buf *eb)
{
  for (uint32_t p = 0; p < nv; p++) {
    if (!dropped[p])
      continue;
    for (uint32_t e = row[p]; e < row[p + 1]; e++) {
      uint32_t v = nbr[e];
      for (uint32_t f = row[v]; f < row[v + 1]; f++)
        if (edge_push(eb, p, nbr[f]) != 0)
          return -1;
    }
  }
  return 0;
}

/* Points that appear in no Delaunay cell and in no coplanar set (Qhull
 * can discard nearly coincident points) are joined to their nearest vertex
 * and marked for the second-ring pass.  Many such points mean the input is
 * degenerate beyond what the graph can serve: fail, and the caller falls back
 * to the kd-tree. */
static int attach_isolated(hicp_context *ctx, const hicp__vtx *vtx, uint32_t nv, edge_buf *eb,
                           char *dropped)
{
  char *has = calloc(nv, 1);
  if (has == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory building the Delaunay graph");
  for (size_t i = 0; i < eb->n; i++)
    has[eb->e[i] >> 32] = 1;
  uint32_t isolated = 0;
  for (uint32_t p = 0; p < nv; p++)
    isolated += !has[p];
  int rc = HICP_OK;
  if (isolated > 64 || (isolated > 0 && isolated * 4 > nv)) {
    rc = hicp__fail(ctx, HICP_EQHULL, "Qhull left %u points outside the triangulation",
                    (unsigned)isolated);
  } else {
    for (uint32_t p = 0; p < nv && rc == HICP_OK; p++) {
      if (has[p])
        continue;
      uint32_t best = HICP_NONE;
      float bd = 0.0f;
      float q[3] = {vtx[p].x, vtx[p].y, vtx[p].z};
      for (uint32_t v = 0; v < nv; v++) {
        if (v == p || !has[v])
          continue;
        float d = hicp__d2(q, &vtx[v]);
        if (best == HICP_NONE || d < bd) {
          best = v;
          bd = d;
        }
      }
      if (best == HICP_NONE || edge_push(eb, p, best) != 0)
        rc = hicp__fail(ctx, HICP_EQHULL, "cannot attach point %u to the triangulation",
                        (unsigned)p);
      dropped[p] = 1;
    }
  }
  free(has);
  return rc;
}

/* Qhull decides the Delaunay cells on the lifted points (x, y, z, s w),
 * w = x^2 + y^2 + z^2 and s the Qbb scale (the largest |coordinate| over
 * the range of w).  Across a distance h the paraboloid leaves its tangent
 * plane by s h^2; where that is below Qhull's distance roundoff
 * (DISTround) the cells at that scale are noise.  Inputs whose scales
 * differ by some 1e7 or more (points 1 apart beside one 1e13 away: the
 * fuzzer's find) come out with Delaunay edges missing, and the walk, which
 * needs every edge, answers wrong.  Returns DISTround / s, widened by
 * what merges added (below): the squared distance below which Qhull could
 * not resolve these points. */
static double lifted_resolution2(qhT *qh, const coordT *pts, uint32_t nv)
{
  /* Qhull's own roundoff, and what its merges added to it: merged cells
   * are as thick as the points' farthest distances above and below them
   * (max_outside, max_vertex, min_vertex; Qhull starts the last two at
   * +-DISTround, merged or not), and two points' lifted heights may err
   * by the excess on either side, taken twice again for margin.  Two
   * lattices 3e6 apart (so guarded, the guards 1e7 out) merged cells 19
   * times DISTround thick across points 1 apart, a region of hundreds
   * left as Qhull triangulated it, and walks answered points 1 away from
   * the nearest: DISTround alone had the pair resolved (stop 54's
   * review).  Unmerged inputs keep DISTround (docs/design.md). */
  double most = qh->max_outside;
  most = qh->max_vertex > most ? qh->max_vertex : most;
  most = -qh->min_vertex > most ? -qh->min_vertex : most;
  const double thick =
      qh->DISTround + (most > qh->DISTround ? 4.0 * (most - qh->DISTround) : 0.0);
  double wlo = HUGE_VAL, whi = -HUGE_VAL, big = 0.0;
  for (uint32_t i = 0; i < nv; i++) {
    const coordT *p = &pts[3 * (size_t)i];
    const double w = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
    wlo = w < wlo ? w : wlo;
    whi = w > whi ? w : whi;
    for (int d = 0; d < 3; d++)
      big = fabs(p[d]) > big ? fabs(p[d]) : big;
  }
  const double s = whi > wlo && big > 0.0 ? big / (whi - wlo) : 1.0;
  return thick / s;
}

/* The points as Qhull gets them, about their median (a float, per axis):
 * the graph is the same for any translation, but Qhull's tests are not.
 * Points a few float ulps apart far from the origin (a lattice at 312
 * spaced 3e-5: any float cloud of UTM coordinates is on such a grid) lost
 * Delaunay edges when lifted as they were (w = x^2 + y^2 + z^2 rounded
 * their differences away), and the walks answered wrong (stop 42).  The
 * median rather than the box's centre, so that one far point does not
 * move the others away from the origin.  The differences are exact in
 * double for points within 2^29 of the median's scale.  pts: 3 nv; the
 * median in mid. */
static void centre_points(const hicp__vtx *vtx, uint32_t nv, coordT *pts, double mid[3])
{
  for (int d = 0; d < 3; d++) {
    for (uint32_t i = 0; i < nv; i++)
      pts[i] = d == 0 ? vtx[i].x : d == 1 ? vtx[i].y : vtx[i].z;
    mid[d] = (float)hicp__select_kth(pts, nv, nv / 2);
  }
  for (uint32_t i = 0; i < nv; i++) {
    pts[3 * (size_t)i] = (double)vtx[i].x - mid[0];
    pts[3 * (size_t)i + 1] = (double)vtx[i].y - mid[1];
    pts[3 * (size_t)i + 2] = (double)vtx[i].z - mid[2];
  }
}

/* The points Qhull gets: the vertices about their median (centre_points),
 * then the guards about the same median. */
static void qhull_points(const hicp__vtx *vtx, uint32_t nv, const double (*guards)[3],
                         uint32_t nguards, coordT *pts)
{
  double mid[3];
  centre_points(vtx, nv, pts, mid);
  for (uint32_t k = 0; k < nguards; k++)
    for (int d = 0; d < 3; d++)
      pts[3 * ((size_t)nv + k) + d] = guards[k][d] - mid[d];
}

/* A floor under lifted_resolution2, known before Qhull runs.  Qhull's
 * DISTround is at least REALepsilon times the largest lifted coordinate
 * (qh_distround: REALepsilon (d maxdist 1.01 + maxabs)), which Qbb makes
 * the largest |coordinate|, big; divided by s = big / (whi - wlo), that is
 * REALepsilon (whi - wlo).  A closest pair below it fails check_graph
 * whatever Qhull does, so the build can skip Qhull: four unit shells 1e4
 * apart ran Qhull for 27.6 s (40k points) to 318 s (100k) before the
 * check refused the graph (stop 51's review of slow inputs).  -1 when out
 * of memory. */
double hicp__delaunay_resolution_floor(const hicp__vtx *vtx, uint32_t nv,
                                       const double (*guards)[3], uint32_t nguards)
{
  size_t bytes;
  const uint32_t np = nv + nguards;
  if (nv == 0 || np < nv || hicp__mul_size((size_t)np, 3 * sizeof(coordT), &bytes) != 0)
    return 0.0;
  coordT *pts = malloc(bytes);
  if (pts == NULL)
    return -1.0;
  qhull_points(vtx, nv, guards, nguards, pts);
  double wlo = HUGE_VAL, whi = -HUGE_VAL;
  for (uint32_t i = 0; i < np; i++) {
    const coordT *p = &pts[3 * (size_t)i];
    const double w = p[0] * p[0] + p[1] * p[1] + p[2] * p[2];
    wlo = w < wlo ? w : wlo;
    whi = w > whi ? w : whi;
  }
  free(pts);
  return REALepsilon * (whi - wlo);
}

/* One run of Qhull: its state, and the stream its messages go to, kept
 * for an error's text (qhull_message).  qrun_open: 0, or -1 out of
 * memory (nothing then to close). */
typedef struct qrun {
  qhT *qh;
  FILE *err;
  char *msg;
  size_t msglen;
} qrun;

static void qrun_close(qrun *r, int ran)
{
  if (ran) { /* what qh_new_qhull built, and Qhull's short-memory pool */
    qh_freeqhull(r->qh, !qh_ALL);
    /* qh_memfreeshort frees the pool's tables only where its set-up was
     * complete (LASTsize set), and then clears them all: one of them
     * refused inside qh_meminitbuffers left the other to leak, 72 or 144
     * bytes a refused build (stop 67's review) */
    if (r->qh->qhmem.LASTsize == 0) {
      qh_free(r->qh->qhmem.indextable);
      qh_free(r->qh->qhmem.freelists);
      qh_free(r->qh->qhmem.sizetable);
      r->qh->qhmem.indextable = NULL;
      r->qh->qhmem.freelists = NULL;
      r->qh->qhmem.sizetable = NULL;
    }
    int curlong, totlong;
    qh_memfreeshort(r->qh, &curlong, &totlong);
  }
  if (r->err != NULL)
    fclose(r->err);
  free(r->msg);
  free(r->qh);
}

static int qrun_open(qrun *r)
{
  r->msg = NULL;
  r->msglen = 0;
  r->qh = malloc(sizeof *r->qh);
  r->err = open_memstream(&r->msg, &r->msglen);
  if (r->qh == NULL || r->err == NULL) {
    qrun_close(r, 0);
    return -1;
  }
  qh_zero(r->qh, r->err);
  return 0;
}

int hicp__flat_hull_face(const hicp__vtx *vtx, uint32_t nv, uint32_t *most)
{
  *most = 0;
  size_t bytes;
  if (nv < 4 || hicp__mul_size((size_t)nv, 3 * sizeof(coordT), &bytes) != 0 || nv > INT32_MAX)
    return 1;
  coordT *pts = malloc(bytes);
  qrun q;
  if (pts == NULL || qrun_open(&q) != 0) {
    free(pts);
    return -1;
  }
  double mid[3];
  centre_points(vtx, nv, pts, mid);
  char options[] = "qhull Qc";
  const int exitcode = qh_new_qhull(q.qh, 3, (int)nv, pts, False, options, NULL, q.err);
  int rc = exitcode == qh_ERRmem ? -1 : 1;
  if (exitcode == 0) {
    qhT *qh = q.qh; /* FORALLfacets names it */
    facetT *facet;
    FORALLfacets {
      const int k = qh_setsize(qh, facet->vertices) +
                    (facet->coplanarset != NULL ? qh_setsize(qh, facet->coplanarset) : 0);
      *most = (uint32_t)k > *most ? (uint32_t)k : *most;
    }
    rc = 0;
  }
  qrun_close(&q, 1);
  free(pts);
  return rc;
}

int hicp__delaunay_graph(hicp_context *ctx, const hicp__vtx *vtx, uint32_t nv,
                         const double (*guards)[3], uint32_t nguards, uint32_t **row,
                         uint32_t **nbr, uint64_t *nedges, double *qhull_ms,
                         double *resolution2)
{
  *row = NULL;
  *nbr = NULL;
  *nedges = 0;
  *qhull_ms = 0.0;
  *resolution2 = 0.0;
  if (nv < 5)
    return hicp__fail(ctx, HICP_EQHULL, "%u distinct points are too few for a 3-D triangulation",
                      (unsigned)nv);
  size_t bytes;
  const uint32_t np = nv + nguards; /* Qhull's points: the guards after the vertices */
  if (np < nv || np > INT32_MAX || hicp__mul_size((size_t)np, 3 * sizeof(coordT), &bytes) != 0)
    return hicp__fail(ctx, HICP_ELIMIT, "too many points for Qhull");
  /* Qhull's memory is part of the build's, checked by hicp_model_build
   * before it starts (model_build.c). */
  coordT *pts = malloc(bytes);
  edge_buf eb = {NULL, 0, 0};
  cells cl = {NULL, 0, 0};
  char *dropped = calloc(nv, 1);
  uint64_t *off = NULL;
  uint32_t *slot = NULL;
  qrun q;
  if (pts == NULL || dropped == NULL || qrun_open(&q) != 0) {
    free(pts);
    free(dropped);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the Delaunay triangulation");
  }
  qhT *qh = q.qh;
  qhull_points(vtx, nv, guards, nguards, pts);

  double t0 = hicp__now_ms();
  char options[] = "qhull d Qbb Qc Qi Qz Qt";
  int exitcode = qh_new_qhull(qh, 3, (int)np, pts, False, options, NULL, q.err);
  *qhull_ms = hicp__now_ms() - t0;
  int result = HICP_OK;
  if (exitcode != 0) {
    char why[300];
    fflush(q.err);
    qhull_message(q.msg, q.msglen, why, sizeof why);
    /* Out of memory is the system's failure, not the input's: the caller
     * falls back to a kd-tree only on HICP_EQHULL, and a model saved so
     * would stay 4.6 times slower (stop 48's static-analysis review) */
    result = hicp__fail(ctx, exitcode == qh_ERRmem ? HICP_ENOMEM : HICP_EQHULL, "Qhull: %s",
                        why[0] ? why : "failed");
  } else {
    *resolution2 = lifted_resolution2(qh, pts, np);
    /* Our facet walk calls Qhull macros that can raise errors in theory:
     * keep them under a trap too. */
    qh->NOerrexit = False;
    int jmp = setjmp(qh->errexit);
    if (jmp == 0) {
      if (read_facets(qh, nv, &cl, &eb, dropped) != 0)
        result = hicp__fail(ctx, HICP_ENOMEM, "out of memory collecting Delaunay edges");
    } else {
      result = hicp__fail(ctx, HICP_EQHULL, "Qhull failed while reading its triangulation");
    }
    qh->NOerrexit = True;
  }
  qrun_close(&q, 1);
  free(pts);

  if (result == HICP_OK && collect_cells(&cl, nv, &eb, &off, &slot) != 0)
    result = hicp__fail(ctx, HICP_ENOMEM, "out of memory collecting Delaunay edges");
  free(cl.v);
  cl.v = NULL;
  if (result == HICP_OK) {
    int c = dedupe_rows(nv, off, slot, row, nbr, nedges);
    if (c == -1)
      result = hicp__fail(ctx, HICP_ENOMEM, "out of memory building the Delaunay graph");
    else if (c == -2)
      result = hicp__fail(ctx, HICP_ELIMIT, "the Delaunay graph has more than 2^32 edges");
  }
  free(off);
  free(slot);
  free(eb.e);
  eb.e = NULL;
  eb.n = eb.cap = 0;
  /* Rare: vertices in no cell at all.  Back to an edge list for them. */
  int isolated = 0;
  for (uint32_t v = 0; result == HICP_OK && v < nv && !isolated; v++)
    isolated = (*row)[v + 1] == (*row)[v];
  if (result == HICP_OK && isolated) {
    for (uint32_t v = 0; v < nv && result == HICP_OK; v++)
      for (uint32_t e = (*row)[v]; e < (*row)[v + 1]; e++)
        if (v < (*nbr)[e] && edge_push(&eb, v, (*nbr)[e]) != 0)
          result = hicp__fail(ctx, HICP_ENOMEM, "out of memory building the Delaunay graph");
    free(*row);
    free(*nbr);
    *row = NULL;
    *nbr = NULL;
    if (result == HICP_OK)
      result = attach_isolated(ctx, vtx, nv, &eb, dropped);
    if (result == HICP_OK) {
      int c = edges_to_csr(&eb, nv, row, nbr, nedges);
      if (c == -1)
        result = hicp__fail(ctx, HICP_ENOMEM, "out of memory building the Delaunay graph");
      else if (c == -2)
        result = hicp__fail(ctx, HICP_ELIMIT, "the Delaunay graph has more than 2^32 edges");
    }
  }
  if (result == HICP_OK) {
    int any_dropped = 0;
    for (uint32_t i = 0; i < nv && !any_dropped; i++)
      any_dropped = dropped[i];
    int c = 0;
    if (any_dropped) {
      /* Second pass: widen the dropped points' neighbourhoods. */
      edge_buf more = {NULL, 0, 0};
      for (uint32_t v = 0; v < nv && c == 0; v++)
        for (uint32_t e = (*row)[v]; e < (*row)[v + 1] && c == 0; e++)
          if (v < (*nbr)[e] && edge_push(&more, v, (*nbr)[e]) != 0)
            c = -1;
      if (c == 0 && add_second_ring(*row, *nbr, nv, dropped, &more) != 0)
        c = -1;
      free(*row);
      free(*nbr);
      *row = NULL;
      *nbr = NULL;
      if (c == 0)
        c = edges_to_csr(&more, nv, row, nbr, nedges);
      free(more.e);
    }
    if (c == -1)
      result = hicp__fail(ctx, HICP_ENOMEM, "out of memory building the Delaunay graph");
    else if (c == -2)
      result = hicp__fail(ctx, HICP_ELIMIT, "the Delaunay graph has more than 2^32 edges");
  }
  free(eb.e);
  free(dropped);
  return result;
}
