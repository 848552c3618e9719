/* pp/nn.h: exact nearest neighbour of one query point, by every method.
 *
 * "Exact" is defined against brute force with the same arithmetic: the answer
 * minimises the squared distance computed in float as
 *     ((dx*dx + dy*dy) + dz*dz),  d = q - x,
 * and among equal distances it is the vertex with the smallest index (vertices
 * keep the original order, so this is also the smallest original index).
 *
 * The Delaunay walk (thesis section 3.6; Delaunay facts in docs/design.md):
 * from a start vertex, move to the neighbour with the smallest distance while
 * it is strictly smaller.  In exact arithmetic this stops only at the nearest
 * vertex.  In float it can stop at a vertex whose computed distance is within
 * rounding of the minimum, so the walk ends with a check: every neighbour
 * whose computed distance is within the rounding bound T of the stopping
 * distance is explored (a small flood fill); the best of those is the answer.
 * This is exact: all vertices whose exact distance is at most T form a
 * connected subgraph of the Delaunay graph (greedy paths towards the query
 * stay inside the ball), so the flood reaches every candidate.  In practice
 * the flood is almost never entered: no neighbour is that close to a tie. */
#ifndef HICP_PP_NN_H
#define HICP_PP_NN_H

#include "pp/types.h"

/* Squared distance in float, in the one fixed order used everywhere. */
HICP_PP float hicp__d2(const float q[3], const hicp__vtx *p)
{
  float dx = q[0] - p->x;
  float dy = q[1] - p->y;
  float dz = q[2] - p->z;
  return (dx * dx + dy * dy) + dz * dz;
}

/* (d, i) before (bd, bi): smaller distance, then smaller index. */
HICP_PP int hicp__nn_better(float d, uint32_t i, float bd, uint32_t bi)
{
  return d < bd || (d == bd && i < bi);
}

/* Upper bound on the computed distance of any vertex whose exact distance
 * could be at most that of a vertex with computed distance d.  Each computed
 * term carries at most four roundings (relative error gamma_4 ~ 4u, u = 2^-24,
 * all terms non-negative), so D(1+g)/(1-g) ~ D(1 + 8u); 12u also covers the
 * rounding of this product, and the absolute term covers underflow. */
HICP_PP float hicp__tie_bound(float d)
{
  return d * (1.0f + 6.0f * HICP_FLT_EPS) + 4.0f * HICP_FLT_MIN;
}

typedef struct hicp__nn_res {
  uint32_t v;     /* vertex index */
  float d2;       /* computed squared distance */
  uint32_t steps; /* walk moves (0 when not a walk) */
  uint32_t walked; /* 1 if a Delaunay walk answered */
} hicp__nn_res;

/* Brute force over all vertices. */
HICP_PP void hicp__nn_brute(const hicp__mview *m, const float q[3], uint32_t *bv, float *bd)
{
  uint32_t best = HICP_NONE;
  float bestd = HICP_FLT_INF;
  for (uint32_t i = 0; i < m->nv; i++) {
    float d = hicp__d2(q, &m->vtx[i]);
    if (d < bestd || best == HICP_NONE) { /* ties keep the smaller index */
      bestd = d;
      best = i;
    }
  }
  *bv = best;
  *bd = bestd;
}

/* Exact kd-tree search with backtracking.  On entry (*bv, *bd) is a known
 * candidate (HICP_NONE, +inf for none): a good one prunes most of the tree.
 * A subtree is skipped only when its bound is strictly greater than the best
 * distance, so equal-distance points are still seen and the index tie-break
 * holds.  The bound (q[dim] - split)^2 computed in float never exceeds the
 * computed distance of a point beyond the plane: rounding is monotonic. */
HICP_PP void hicp__nn_kdtree(const hicp__mview *m, const float q[3], uint32_t *bv, float *bd)
{
  uint32_t stack_node[HICP_KD_MAX_DEPTH];
  float stack_bound[HICP_KD_MAX_DEPTH];
  int sp = 0;
  uint32_t best = *bv;
  float bestd = *bd;
  stack_node[sp] = 0;
  stack_bound[sp] = 0.0f;
  sp++;
  while (sp > 0) {
    sp--;
    uint32_t n = stack_node[sp];
    if (stack_bound[sp] > bestd)
      continue;
    while (m->kd[n].dim != HICP_KD_LEAF) {
      const hicp__kdnode *nd = &m->kd[n];
      float diff = q[nd->dim] - nd->split;
      float b = diff * diff;
      uint32_t near_child = diff < 0.0f ? nd->first : nd->first + 1;
      uint32_t far_child = diff < 0.0f ? nd->first + 1 : nd->first;
      if (b <= bestd && sp < HICP_KD_MAX_DEPTH) {
        stack_node[sp] = far_child;
        stack_bound[sp] = b;
        sp++;
      }
      n = near_child;
    }
    const hicp__kdnode *leaf = &m->kd[n];
    for (uint32_t i = leaf->first; i < leaf->first + leaf->count; i++) {
      const hicp__vtx *p = &m->kd_pts[i];
      float d = hicp__d2(q, p);
      if (best == HICP_NONE || hicp__nn_better(d, p->id, bestd, best)) {
        bestd = d;
        best = p->id;
      }
    }
  }
  *bv = best;
  *bd = bestd;
}

/* Approximate neighbour: descend to the query's leaf, no backtracking
 * (the "KD-ANN" start of thesis section 3.7.2). */
HICP_PP uint32_t hicp__nn_kd_descend(const hicp__mview *m, const float q[3])
{
  uint32_t n = 0;
  while (m->kd[n].dim != HICP_KD_LEAF) {
    const hicp__kdnode *nd = &m->kd[n];
    n = q[nd->dim] - nd->split < 0.0f ? nd->first : nd->first + 1;
  }
  const hicp__kdnode *leaf = &m->kd[n];
  uint32_t best = HICP_NONE;
  float bestd = HICP_FLT_INF;
  for (uint32_t i = leaf->first; i < leaf->first + leaf->count; i++) {
    float d = hicp__d2(q, &m->kd_pts[i]);
    if (best == HICP_NONE || hicp__nn_better(d, m->kd_pts[i].id, bestd, best)) {
      bestd = d;
      best = m->kd_pts[i].id;
    }
  }
  return best;
}

#define HICP_FLOOD_CAP 64

/* Resolves near-ties after the descent stopped at (*v, *d): explores every
 * vertex with computed distance <= T(*d) connected to *v through such
 * vertices and keeps the best.  Returns 0, or -1 if more than
 * HICP_FLOOD_CAP vertices qualify (then the caller falls back to brute
 * force, which is exact and, for such pathological ties, rare). */
HICP_PP int hicp__walk_flood(const hicp__mview *m, const float q[3], uint32_t *v, float *d)
{
  uint32_t seen[HICP_FLOOD_CAP];
  int nseen = 0, head = 0;
  float bound = hicp__tie_bound(*d);
  uint32_t best = *v;
  float bestd = *d;
  seen[nseen++] = *v;
  while (head < nseen) {
    uint32_t x = seen[head++];
    for (uint32_t e = m->row[x]; e < m->row[x + 1]; e++) {
      uint32_t u = m->nbr[e];
      float du = hicp__d2(q, &m->vtx[u]);
      if (du > bound)
        continue;
      int known = 0;
      for (int k = 0; k < nseen; k++)
        known |= seen[k] == u;
      if (known)
        continue;
      if (nseen == HICP_FLOOD_CAP)
        return -1;
      seen[nseen++] = u;
      if (hicp__nn_better(du, u, bestd, best)) {
        bestd = du;
        best = u;
      }
    }
  }
  *v = best;
  *d = bestd;
  return 0;
}

/* Greedy Delaunay walk from vertex `start` to the exact nearest vertex.
 *
 * Early exit: a query inside the ball of radius r_v = (distance from v to
 * its nearest other vertex) / 2 around v has v as its unique nearest vertex
 * (every other vertex u is at least 2 r_v - |q - v| > |q - v| away), and by
 * a margin far beyond float rounding because safe_r2 is r_v^2 shrunk by
 * 4e-5 relative (rounding moves computed squared distances by at most 5e-7
 * relative).  In ICP the previous match is usually still the answer, and
 * this test confirms it without reading its row. */
HICP_PP hicp__nn_res hicp__nn_walk(const hicp__mview *m, const float q[3], uint32_t start)
{
  hicp__nn_res r;
  uint32_t cur = start;
  float dcur = hicp__d2(q, &m->vtx[cur]);
  uint32_t steps = 0;
  int near_tie;
  r.walked = 1;
  for (;;) {
    if (m->safe_r2 != 0 && dcur < m->safe_r2[cur]) {
      r.v = cur;
      r.d2 = dcur;
      r.steps = steps;
      return r;
    }
    uint32_t next = cur;
    float dnext = dcur;
    float bound = hicp__tie_bound(dcur);
    near_tie = 0;
    for (uint32_t e = m->row[cur]; e < m->row[cur + 1]; e++) {
      uint32_t u = m->nbr[e];
      float d = hicp__d2(q, &m->vtx[u]);
      if (d < dnext || (d == dnext && d < dcur && u < next)) {
        next = u;
        dnext = d;
      }
      near_tie |= d <= bound;
    }
    if (next == cur)
      break;
    cur = next;
    dcur = dnext;
    steps++;
  }
  if (near_tie && hicp__walk_flood(m, q, &cur, &dcur) != 0)
    hicp__nn_brute(m, q, &cur, &dcur);
  r.v = cur;
  r.d2 = dcur;
  r.steps = steps;
  return r;
}

/* One query by `method` (a hicp_nn_method value).  `prev` is the query's
 * previous match (vertex index) or HICP_NONE.  Models without a Delaunay
 * graph (coplanar, collinear or tiny inputs) answer every walk method with
 * the exact kd-tree search, seeded with the start vertex the walk would have
 * used. */
HICP_PP hicp__nn_res hicp__nn_query(const hicp__mview *m, const float q[3], int method,
                                    uint32_t prev)
{
  hicp__nn_res r;
  uint32_t start;
  r.steps = 0;
  r.walked = 0;
  switch (method) {
  case 1: /* HICP_NN_BRUTE */
    hicp__nn_brute(m, q, &r.v, &r.d2);
    return r;
  case 2: /* HICP_NN_KDTREE */
    r.v = HICP_NONE;
    r.d2 = HICP_FLT_INF;
    hicp__nn_kdtree(m, q, &r.v, &r.d2);
    return r;
  case 3: /* HICP_NN_ZERO */
    start = m->zero_start;
    break;
  case 4: /* HICP_NN_KDANN */
    start = hicp__nn_kd_descend(m, q);
    break;
  case 5: /* HICP_NN_PNN */
    start = prev != HICP_NONE ? prev : m->zero_start;
    break;
  default: /* HICP_NN_PNN_OPT */
    start = prev != HICP_NONE ? prev : hicp__nn_kd_descend(m, q);
    break;
  }
  if (m->row == 0) {
    r.v = start;
    r.d2 = hicp__d2(q, &m->vtx[start]);
    hicp__nn_kdtree(m, q, &r.v, &r.d2);
    return r;
  }
  return hicp__nn_walk(m, q, start);
}

#endif /* HICP_PP_NN_H */
