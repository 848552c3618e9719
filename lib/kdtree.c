/* kdtree.c: the model's kd-tree, used for cold starts (the "kdann" start of
 * the walk), for the exact "kdtree" method, and for every method when a model
 * has no Delaunay graph.
 *
 * Balanced: each node splits its points at the median of its widest axis,
 * so depth is at most ceil(log2(nv)) and the searches' fixed stacks
 * (HICP_KD_MAX_DEPTH) never overflow.  Leaves hold at most HICP_KD_LEAF_SIZE points,
 * stored contiguously (kd_pts) so a leaf scan reads consecutive memory. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct builder {
  const hicp__vtx *vtx;
  uint32_t *perm;       /* vertex indices, permuted into leaf order */
  hicp__kdnode *nodes;
  uint32_t nnodes, cap;
} builder;

static float coord(const hicp__vtx *v, uint32_t dim)
{
  return dim == 0 ? v->x : dim == 1 ? v->y : v->z;
}

/* Orders by (coordinate, vertex index): a strict total order, so selection
 * is deterministic and never degrades on repeated coordinates. */
static int before(const builder *b, uint32_t dim, uint32_t i, uint32_t j)
{
  float a = coord(&b->vtx[i], dim), c = coord(&b->vtx[j], dim);
  return a < c || (a == c && i < j);
}

/* Quickselect: afterwards perm[k] is the k-th element of perm[lo..hi) and
 * the elements before it are not after it.  The pivot is the median of three
 * positions chosen by a hash of the range, so no input order is adversarial
 * in practice. */
static void select_kth(builder *b, uint32_t dim, uint32_t lo, uint32_t hi, uint32_t k)
{
  uint32_t *p = b->perm;
  while (hi - lo > 1) {
    uint32_t n = hi - lo;
    uint32_t h = (lo * 2654435761u) ^ (hi * 40503u);
    uint32_t a = lo + h % n, c = lo + (h / n) % n, m = lo + n / 2;
    uint32_t pa = p[a], pc = p[c], pm = p[m], piv;
    if (before(b, dim, pa, pc))
      piv = before(b, dim, pc, pm) ? pc : (before(b, dim, pa, pm) ? pm : pa);
    else
      piv = before(b, dim, pa, pm) ? pa : (before(b, dim, pc, pm) ? pm : pc);
    /* Three-way partition is unnecessary: keys are distinct. */
    uint32_t i = lo, j = hi - 1;
    for (;;) {
      while (before(b, dim, p[i], piv))
        i++;
      while (before(b, dim, piv, p[j]))
        j--;
      if (i >= j)
        break;
      uint32_t t = p[i];
      p[i] = p[j];
      p[j] = t;
      i++;
      j--;
    }
    if (i == j) {
      /* Both scans stopped on the pivot itself: it is in its final place. */
      if (k == j)
        return;
      if (k < j)
        hi = j;
      else
        lo = j + 1;
    } else if (k <= j) { /* [lo, j] <= pivot <= [j + 1, hi) */
      hi = j + 1;
    } else {
      lo = j + 1;
    }
  }
}

static uint32_t new_pair(builder *b)
{
  uint32_t first = b->nnodes;
  b->nnodes += 2;
  return first;
}

static void build_node(builder *b, uint32_t node, uint32_t lo, uint32_t hi)
{
  hicp__kdnode *nd = &b->nodes[node];
  if (hi - lo <= HICP_KD_LEAF_SIZE) {
    nd->dim = HICP_KD_LEAF;
    nd->first = lo;
    nd->count = hi - lo;
    nd->split = 0.0f;
    return;
  }
  float mn[3], mx[3];
  for (int d = 0; d < 3; d++) {
    mn[d] = coord(&b->vtx[b->perm[lo]], (uint32_t)d);
    mx[d] = mn[d];
  }
  for (uint32_t i = lo + 1; i < hi; i++) {
    for (int d = 0; d < 3; d++) {
      float c = coord(&b->vtx[b->perm[i]], (uint32_t)d);
      mn[d] = c < mn[d] ? c : mn[d];
      mx[d] = c > mx[d] ? c : mx[d];
    }
  }
  uint32_t dim = 0;
  for (uint32_t d = 1; d < 3; d++)
    if ((double)mx[d] - mn[d] > (double)mx[dim] - mn[dim])
      dim = d;
  uint32_t mid = lo + (hi - lo) / 2;
  select_kth(b, dim, lo, hi, mid);
  /* Everything before mid is <= perm[mid] in (coord, index) order; the split
   * value is perm[mid]'s coordinate: left points are <= it, right >= it. */
  float split = coord(&b->vtx[b->perm[mid]], dim);
  uint32_t first = new_pair(b);
  nd = &b->nodes[node]; /* stable: nodes never move during the build */
  nd->dim = dim;
  nd->split = split;
  nd->first = first;
  nd->count = hi - lo;
  build_node(b, first, lo, mid);
  build_node(b, first + 1, mid, hi);
}

int hicp__kdtree_build(hicp_context *ctx, hicp_model *m)
{
  uint32_t nv = m->nv;
  /* A balanced tree with leaves of at least HICP_KD_LEAF_SIZE/2 points has fewer
   * than 4 nv / HICP_KD_LEAF_SIZE + 1 leaves; 2 * leaves nodes bound the total. */
  uint32_t cap = (uint32_t)(8u * (uint64_t)nv / HICP_KD_LEAF_SIZE + 3u);
  builder b;
  b.vtx = m->vtx;
  b.perm = malloc(sizeof(uint32_t) * nv);
  b.nodes = calloc(cap, sizeof(hicp__kdnode));
  b.nnodes = 1;
  b.cap = cap;
  hicp__vtx *pts = hicp__aligned_alloc(64, sizeof(hicp__vtx) * nv);
  if (b.perm == NULL || b.nodes == NULL || pts == NULL) {
    free(b.perm);
    free(b.nodes);
    hicp__aligned_free(pts);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory building the kd-tree");
  }
  for (uint32_t i = 0; i < nv; i++)
    b.perm[i] = i;
  build_node(&b, 0, 0, nv);
  for (uint32_t i = 0; i < nv; i++) {
    pts[i] = m->vtx[b.perm[i]];
    pts[i].id = b.perm[i];
  }
  free(b.perm);
  hicp__kdnode *shrunk = realloc(b.nodes, sizeof(hicp__kdnode) * b.nnodes);
  m->kd = hicp__model_own(m, shrunk != NULL ? shrunk : b.nodes);
  m->nkd = b.nnodes;
  m->kd_pts = hicp__model_own(m, pts);
  if (m->kd == NULL || m->kd_pts == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory building the kd-tree");
  hicp__kdtree_box(m);
  return HICP_OK;
}

void hicp__kdtree_box(hicp_model *m)
{
  for (int d = 0; d < 3; d++) {
    m->kd_lo[d] = HICP_FLT_INF;
    m->kd_hi[d] = -HICP_FLT_INF;
  }
  for (uint32_t i = 0; i < m->nv; i++) {
    const float c[3] = {m->kd_pts[i].x, m->kd_pts[i].y, m->kd_pts[i].z};
    for (int d = 0; d < 3; d++) {
      m->kd_lo[d] = c[d] < m->kd_lo[d] ? c[d] : m->kd_lo[d];
      m->kd_hi[d] = c[d] > m->kd_hi[d] ? c[d] : m->kd_hi[d];
    }
  }
}

double hicp__kdtree_nearest_other(const hicp_model *m, uint32_t v)
{
  const hicp__vtx *a = &m->vtx[v];
  const double q[3] = {a->x, a->y, a->z}; /* for the bounds */
  uint32_t stack_node[HICP_KD_MAX_DEPTH];
  double stack_bound[HICP_KD_MAX_DEPTH];
  int sp = 0;
  double best = HUGE_VAL;
  stack_node[sp] = 0;
  stack_bound[sp++] = 0.0;
  while (sp > 0) {
    sp--;
    uint32_t n = stack_node[sp];
    if (stack_bound[sp] > best)
      continue;
    while (m->kd[n].dim != HICP_KD_LEAF) {
      const hicp__kdnode *nd = &m->kd[n];
      const double diff = q[nd->dim] - nd->split;
      if (diff * diff <= best && sp < HICP_KD_MAX_DEPTH) { /* depth: see the top */
        stack_node[sp] = diff < 0.0 ? nd->first + 1 : nd->first;
        stack_bound[sp++] = diff * diff;
      }
      n = diff < 0.0 ? nd->first : nd->first + 1;
    }
    const hicp__kdnode *leaf = &m->kd[n];
    for (uint32_t i = leaf->first; i < leaf->first + leaf->count; i++) {
      const hicp__vtx *p = &m->kd_pts[i];
      if (p->id == v)
        continue;
      const double d = hicp__vtx_dist2(a, p);
      best = d < best ? d : best;
    }
  }
  return best;
}
