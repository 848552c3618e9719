/* pp/nn.h: exact nearest neighbour of one query point, by every method.
 *
 * "Exact" is defined against brute force with the same arithmetic: the answer
 * minimises the squared distance computed in float as
 *     ((dx*dx + dy*dy) + dz*dz),  d = q - x,
 * and among equal distances it is the vertex with the smallest id (the
 * smallest original index of its points).  Vertex indices follow a spatial
 * order (model_build.c), so ties compare ids, looked up only on a tie.
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
 * the flood is almost never entered: no neighbour is that close to a tie.
 *
 * A model whose points have a flat face on their hull has for its graph
 * the Delaunay graph of the vertices and guard points around them,
 * the guards left out (lib/delaunay_qhull.c says why).  Both facts above
 * hold on it wherever no guard is nearer the query than the walk's
 * answer, tie bound included: a vertex that is not the nearest has
 * a strictly nearer Delaunay neighbour, a guard only if that guard is
 * nearer than it.  hicp__guard_safe tests that from the guards' centre and
 * distance; a walk that ends outside it (a query far off the model) is
 * answered by the kd-tree, seeded with the walk's vertex.  A graph without
 * guards holds every Delaunay edge: its view sets the test's radius to
 * infinity (lib/model.c), so the test always holds for finite queries. */
#ifndef HICP_PP_NN_H
#define HICP_PP_NN_H

#include "pp/types.h"

#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

/* |v|^2 in float, in the one order every squared distance here is summed
 * in: the kd-tree's bounds (hicp__nn_kdtree) rely on summing as the
 * distances do. */
HICP_PP float hicp__norm2f(const float v[3])
{
  return (v[0] * v[0] + v[1] * v[1]) + v[2] * v[2];
}

/* Squared distance in float, in the one fixed order used everywhere. */
HICP_PP float hicp__d2(const float q[3], const hicp__vtx *p)
{
  const float d[3] = {q[0] - p->x, q[1] - p->y, q[2] - p->z};
  return hicp__norm2f(d);
}

/* Vertex (d, i) before vertex (bd, bi): smaller distance, then smaller id;
 * anything before HICP_NONE. */
HICP_PP int hicp__nn_better(const hicp__mview *m, float d, uint32_t i, float bd, uint32_t bi)
{
  return bi == HICP_NONE || d < bd || (d == bd && m->vtx[i].id < m->vtx[bi].id);
}

/* Upper bound on the computed distance of any vertex whose exact distance
 * could be at most that of a vertex with computed distance d.  Each computed
 * term carries at most four roundings (relative error gamma_4 ~ 4u, u = 2^-24,
 * all terms non-negative), so D(1+g)/(1-g) ~ D(1 + 8u); 12u (HICP_TIE_REL:
 * 6 FLT_EPS = 12u) also covers the rounding of this product, and the
 * absolute term (HICP_TIE_ABS) covers underflow.  The margins are named so
 * that the vector copy (cpu/ends_simd.h, guards_safe4) uses the same ones:
 * change them here, not there. */
#define HICP_TIE_REL (1.0f + 6.0f * HICP_FLT_EPS)
#define HICP_TIE_ABS (4.0f * HICP_FLT_MIN)
HICP_PP float hicp__tie_bound(float d)
{
  return d * HICP_TIE_REL + HICP_TIE_ABS;
}

typedef struct hicp__nn_res {
  uint32_t v;     /* vertex index */
  float d2;       /* computed squared distance */
  uint32_t steps; /* walk moves (0 when not a walk) */
  uint32_t walked; /* 1 if the graph answered: a walk, or a point kept by its
                      certificate (hicp__track_keep: 0 steps) */
  /* What a certifying walk learnt for hicp__nn_track (the slack is computed
   * only there, as plain queries do not need it): */
  uint32_t ended; /* 0: no certificate; 1: inside the safe ball; 2: full row scanned */
  float rmin;     /* with ended == 2: see hicp__row */
  float l2min;
} hicp__nn_res;

/* An answer without a row certificate (ended 0 or 1). */
HICP_PP void hicp__res_set(hicp__nn_res *r, uint32_t v, float d2, uint32_t steps, uint32_t walked,
                           uint32_t ended)
{
  r->v = v;
  r->d2 = d2;
  r->steps = steps;
  r->walked = walked;
  r->ended = ended;
  r->rmin = 0.0f;
  r->l2min = 0.0f;
}

/* Whether a walk's answer at computed squared distance d2 holds for the
 * query q: no guard can be nearer q than its answer, or than any vertex
 * within the tie bound of it.  Each guard is at least R from the centre
 * c, so one is nearer q than distance r only if |q - c| + r > R; tested
 * in float as |q - c|^2 <= (0.45 R)^2 and hicp__tie_bound(d2) <= (0.45
 * R)^2, whose roundings (below 1e-6 relative) the 10% of R left over
 * covers, with the room hicp__guard_cut takes.  Fails for a query of
 * infinite or NaN coordinates. */
HICP_PP int hicp__guard_safe(const hicp__mview *m, const float q[3], float d2)
{
  const float d[3] = {q[0] - m->guard_c[0], q[1] - m->guard_c[1], q[2] - m->guard_c[2]};
  return hicp__norm2f(d) <= m->guard_r2 && hicp__tie_bound(d2) <= m->guard_r2;
}

/* A row certificate's slack s (hicp__nn_slack) cut to the guards' reach,
 * 0.03 R: its walk ended where hicp__guard_safe held, |q - c| and |q - v|
 * each below 0.45 R (and a hair), so a query q' less than the slack from
 * q has |q' - c| + |q' - v| < 0.9 R + 2 (0.03 R) = 0.96 R, and no guard is
 * nearer q' than v either.  (The cell the row certifies is the vertex's
 * cell among its graph neighbours; the guards bound it too.)  The 0.04 R
 * to spare keeps the vertices that are not graph neighbours of v, whose
 * cells' walls lie beyond the guards' reach, at least 0.01 R beyond the
 * slack, more than its rounding margin needs (stop 52's review: with 0.04
 * R that held only where the margin was below 0.01 R).  A constant, so no
 * square root: the scalar path, the vector back (cpu/ends_simd.h) and the
 * GPU cut alike. */
HICP_PP float hicp__guard_cut(const hicp__mview *m, float s)
{
  return s < m->guard_slack ? s : m->guard_slack;
}

/* Rounds a non-negative double down to a float (0 for anything else).
 * Without branches on the rounding direction: it is a coin toss, and a
 * mispredicted branch at the end of the slack's long chain of square roots
 * and a division cost more than the two instructions. */
HICP_PP float hicp__round_down(double s)
{
  float f = (float)s;
  /* when f rounded up: the next float towards zero, one less in the bit
   * pattern (f > 0 then) */
  const uint32_t up = (double)f > s;
#if defined(__CUDA_ARCH__)
  f = __uint_as_float(__float_as_uint(f) - up);
#else
  uint32_t b;
  memcpy(&b, &f, sizeof b);
  b -= up;
  memcpy(&f, &b, sizeof f);
#endif
  return s > 0.0 ? f : 0.0f;
}

/* A relative margin turning computed float squared distances into bounds on
 * exact distances (rounding is below 5e-7 relative on d^2) with room left
 * for the rounding of the distances at the next query. */
#define HICP_SLACK_HI (1.0 + 2e-6)


/* Brute force over all vertices. */
HICP_PP void hicp__nn_brute(const hicp__mview *m, const float q[3], uint32_t *bv, float *bd)
{
  uint32_t best = HICP_NONE;
  float bestd = HICP_FLT_INF;
  for (uint32_t i = 0; i < m->nv; i++) {
    float d = hicp__d2(q, &m->vtx[i]);
    if (hicp__nn_better(m, d, i, bestd, best)) {
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
 * holds.
 * The bound is a squared distance from q to the subtree's cell: from the
 * offsets of q outside the root cell (the points' box) along each axis,
 * the one on the split's axis replaced by |q[dim] - split|, summed by
 * hicp__norm2f as hicp__d2 sums.  It never exceeds the computed distance
 * of a point in the cell: each offset is at most that point's difference
 * on its axis (subtraction rounds monotonically), and squares and sums in
 * the same order keep the order.  With the split's term alone, a query off a flat
 * model (its points all at one height) had a bound of about 0 at every
 * split and visited every leaf (stop 51: 7.0 s for a 20,000-point scan 2
 * units above 200,000 points in a unit square, 0.12 s now; docs/design.md).
 * The offsets of the splits between the root and the cell would bound it
 * tighter, but carrying them on the stack cost a scan near the model 40%. */
HICP_PP void hicp__nn_kdtree(const hicp__mview *m, const float q[3], uint32_t *bv, float *bd)
{
  uint32_t stack_node[HICP_KD_MAX_DEPTH];
  float stack_bound[HICP_KD_MAX_DEPTH];
  int sp = 0;
  uint32_t best = *bv;
  float bestd = *bd;
  float root[3]; /* q's offsets outside the points' box */
  for (int d = 0; d < 3; d++)
    root[d] = q[d] < m->kd_lo[d]   ? q[d] - m->kd_lo[d]
              : q[d] > m->kd_hi[d] ? q[d] - m->kd_hi[d]
                                   : 0.0f;
  stack_node[sp] = 0;
  stack_bound[sp] = hicp__norm2f(root);
  sp++;
  while (sp > 0) {
    sp--;
    uint32_t n = stack_node[sp];
    if (stack_bound[sp] > bestd)
      continue;
    while (m->kd[n].dim != HICP_KD_LEAF) {
      const hicp__kdnode *nd = &m->kd[n];
      const float diff = q[nd->dim] - nd->split;
      float off[3] = {root[0], root[1], root[2]};
      off[nd->dim] = diff;
      const float b = hicp__norm2f(off);
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
      if (hicp__nn_better(m, d, p->id, bestd, best)) {
        bestd = d;
        best = p->id;
      }
    }
  }
  *bv = best;
  *bd = bestd;
}

/* One level of a descent: the child of node n on q's side, or n itself
 * when it is a leaf. */
HICP_PP uint32_t hicp__kd_child(const hicp__mview *m, const float q[3], uint32_t n)
{
  const hicp__kdnode *nd = &m->kd[n];
  const int inner = nd->dim != HICP_KD_LEAF;
  const uint32_t child = q[inner ? nd->dim : 0] - nd->split < 0.0f ? nd->first : nd->first + 1;
  return inner ? child : n;
}

/* The best vertex of leaf n for q. */
HICP_PP uint32_t hicp__kd_leaf_best(const hicp__mview *m, const float q[3], uint32_t n)
{
  const hicp__kdnode *leaf = &m->kd[n];
  uint32_t best = HICP_NONE;
  float bestd = HICP_FLT_INF;
  for (uint32_t i = leaf->first; i < leaf->first + leaf->count; i++) {
    float d = hicp__d2(q, &m->kd_pts[i]);
    if (hicp__nn_better(m, d, m->kd_pts[i].id, bestd, best)) {
      bestd = d;
      best = m->kd_pts[i].id;
    }
  }
  return best;
}

/* Approximate neighbour: descend to the query's leaf, no backtracking
 * (the "KD-ANN" start of thesis section 3.7.2). */
HICP_PP uint32_t hicp__nn_kd_descend(const hicp__mview *m, const float q[3])
{
  uint32_t n = 0;
  while (m->kd[n].dim != HICP_KD_LEAF)
    n = hicp__kd_child(m, q, n);
  return hicp__kd_leaf_best(m, q, n);
}

/* The start table's cell of coordinate value v along axis d: clamped to
 * the grid, NaN to cell 0.  In float, the same operations everywhere, so a
 * query's start depends only on the query and the model. */
HICP_PP uint32_t hicp__start_axis(const hicp__mview *m, int d, float v)
{
  const float f = (v - m->start_lo[d]) * m->start_inv;
  const uint32_t top = m->start_dim[d] - 1u;
  return !(f > 0.0f) ? 0u : f >= (float)top ? top : (uint32_t)f;
}

/* The start table's vertex for q: the vertex nearest the centre of q's
 * cell (m->start != NULL).  One load in place of a kd descent's dozen
 * (docs/cpu-engine.md, "A start table for the first pass"). */
HICP_PP uint32_t hicp__start_vertex(const hicp__mview *m, const float q[3])
{
  const uint32_t x = hicp__start_axis(m, 0, q[0]), y = hicp__start_axis(m, 1, q[1]);
  const uint32_t z = hicp__start_axis(m, 2, q[2]);
  return m->start[((size_t)z * m->start_dim[1] + y) * m->start_dim[0] + x];
}

/* Rows longer than this are hubs'.  The longest rows of real models have
 * 50-80 neighbours (bunny00 72, boeing 59); a point joined to a large part
 * of the model (the centre of points on a sphere; a lidar map's sensor
 * origin, where a driver wrote (0, 0, 0) for its missing returns) has tens
 * of thousands, and a walk that reaches it outside its safe ball would
 * read them all: on a sphere of 160,000 points and its centre (the vertex
 * nearest the centroid, where zero and pnn walks begin) 70-85 us a query
 * where the others took under 1 (docs/cpu-engine.md, stop 61). */
#define HICP_HUB_ROW 1024u

/* Whether vertex v is a hub (a row longer than HICP_HUB_ROW). */
HICP_PP int hicp__is_hub(const hicp__mview *m, uint32_t v)
{
  return m->row[v + 1] - m->row[v] > HICP_HUB_ROW;
}

#define HICP_FLOOD_CAP 64

/* Resolves near-ties after the descent stopped at (*v, *d): explores every
 * vertex with computed distance <= T(*d) connected to *v through such
 * vertices and keeps the best.  Returns 0, or -1 if more than
 * HICP_FLOOD_CAP vertices qualify (then the caller falls back to brute
 * force, which is exact and, for such pathological ties, rare), or -2
 * with the best so far in (*v, *d) when a hub (HICP_HUB_ROW) is within
 * the tie bound: its row is not read (a query as far from the centre of
 * a sphere as from one of its points), and the caller ends with the
 * kd-tree's search from there. */
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
    if (hicp__is_hub(m, x)) {
      *v = best;
      *d = bestd;
      return -2;
    }
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
      if (hicp__nn_better(m, du, u, bestd, best)) {
        bestd = du;
        best = u;
      }
    }
  }
  *v = best;
  *d = bestd;
  return 0;
}

/* What a row scan reports (hicp__row_scan). */
typedef struct hicp__row {
  uint32_t next; /* the row's smallest (distance, vertex index) neighbour, HICP_NONE if
                    none; a tie here only steers the walk (final ties go by id).
                    Only read when near_tie is set: the vector scans
                    (cpu/walk_simd.c) leave HICP_NONE in rows that end the
                    walk */
  float dnext;   /* its distance */
  int near_tie;  /* a scanned neighbour lies within the tie bound of dcur */
  /* Certifying scans without a near tie only, the rows that end a walk
   * with a certificate (every neighbour u of the row's vertex v): rmin =
   * min over u of hicp__bisector(d_u, d_v, |u - v|^2), and l2min = min
   * |u - v|^2, the squared distance from v to its nearest vertex; both
   * +inf for an empty row, and undefined for other rows (the vector scans
   * skip their reductions).  Minima of the same per-neighbour floats: every
   * variant gets the same bits whatever order it scans in. */
  float rmin;
  float l2min;
} hicp__row;

/* Per neighbour u of v, for the certificate: with du, dv the computed
 * squared distances from the query and l2 = |u - v|^2 computed in float,
 * returns r such that sqrt(r) (1 - 2e-6) / 2 is at most the exact distance
 * from the query to the bisector plane of u and v (0 when the query is not
 * known to be on v's side).  num below is a lower bound on the exact
 * D_u - D_v: the squared distances carry under 1e-6 relative error each,
 * and the roundings of these three operations are far below the 2e-6
 * allowed (HICP_BISECT_REL); l2 carries under 1e-6 too, and num^2 / l2 two
 * roundings.  Underflow (squared distances below FLT_MIN, coordinates
 * below ~1e-19) breaks relative bounds, so: an absolute 4 FLT_MIN off num
 * (HICP_BISECT_ABS, far above the absolute error of denormal arithmetic, a
 * few 2^-150), l2 at least 64 FLT_MIN (HICP_BISECT_L2MIN) and the result a
 * normal float (HICP_BISECT_RMIN), else no certificate.  The vector
 * variants in cpu/walk_simd.c repeat these operations lane by lane, with
 * these named margins: change them here, not there. */
#define HICP_BISECT_REL 2e-6f
#define HICP_BISECT_ABS (4.0f * HICP_FLT_MIN)
#define HICP_BISECT_L2MIN (64.0f * HICP_FLT_MIN)
#define HICP_BISECT_RMIN HICP_FLT_MIN
HICP_PP float hicp__bisector(float du, float dv, float l2)
{
  const float num = ((du - dv) - HICP_BISECT_REL * (du + dv)) - HICP_BISECT_ABS;
  if (!(num > 0.0f && l2 >= HICP_BISECT_L2MIN))
    return 0.0f;
  const float r = (num * num) / l2;
  return r >= HICP_BISECT_RMIN ? r : 0.0f;
}

/* |u - v|^2 in float, in the one fixed order used everywhere. */
HICP_PP float hicp__edge2(const hicp__vtx *u, const hicp__vtx *v)
{
  const float ex = u->x - v->x;
  const float ey = u->y - v->y;
  const float ez = u->z - v->z;
  return (ex * ex + ey * ey) + ez * ez;
}

/* The first length code from which the neighbours of `cur` cannot matter:
 * rows are sorted by edge length, and a neighbour u with |v - u| >=
 * 2 sqrt(T) (1 + 1e-5), T = hicp__tie_bound(dcur) >= |q - v|^2, is at
 * least sqrt(T) (1 + 2e-5) from q, beyond any rounding: neither nearer nor
 * a near-tie, and neither is any later one.  T rather than dcur: its
 * absolute term covers squared distances that underflow (a computed 0 can
 * hide an exact 1e-39, and a neighbour as close then ties in float). */
HICP_PP uint32_t hicp__row_cut(const hicp__mview *m, uint32_t cur, float dcur)
{
  /* In float: its rounding (1e-7) is far inside the 1e-5 margin, doubled
   * here to 2e-5 to cover it twice over. */
  const float reach = 2.0f * HICP_SQRTF(hicp__tie_bound(dcur)) * (1.0f + 2e-5f);
  /* floor + 1 >= ceil: at worst one more edge is scanned */
  const float units = m->eunit[cur] > 0.0f ? reach / m->eunit[cur] : 256.0f;
  return units < 255.0f ? (uint32_t)units + 1u : 256u;
}

/* A certifying scan need not read its whole row either.  Once the minima
 * so far (rmin, l2min) are at most *thr_r and *thr_l, no neighbour from
 * one with length code `code` on can lower them, nor be nearer than `cur`
 * or a near-tie: the scan may stop there and its result is the whole
 * row's, bit for bit.  Returns 0 (no bounds) for edges too short to tell.
 *
 * Why: let s = sqrt(T) >= |q - v| (T = hicp__tie_bound(dcur)) and L >=
 * code * eunit the length of such an edge uv, with L >= 3 s (1 + 2e-4).
 * Then D_u >= (L - s)^2 and D_u - D_v >= L^2 - 2 L s; the margins and
 * roundings of hicp__bisector cost at most 6e-6 (D_u + s^2) <= 1.2e-5 L^2
 * and 1e-6 relative, so its computed r >= (L (1 - 1.2e-5) - 2 s)^2 (1 - 1e-6),
 * above thr_r below; and the computed |u - v|^2 >= L^2 (1 - 1e-6) > thr_l.
 * Such a u is also beyond hicp__row_cut's reach.  The 1e-4 margins also
 * cover the roundings of these few float operations (and contracted ones:
 * a bound that comes out a little different only moves where a scan
 * stops).  L >= 1e-15 keeps the absolute terms (a few FLT_MIN) negligible. */
HICP_PP int hicp__cert_rest(const hicp__mview *m, uint32_t cur, float s, uint32_t code,
                            float *thr_r, float *thr_l)
{
  const float len = (float)code * m->eunit[cur];
  const float len1 = len * (1.0f - 1e-4f), s1 = s * (1.0f + 1e-4f);
  if (!(len1 >= 3.0f * s1 && len >= 1e-15f))
    return 0;
  const float a = len1 - 2.0f * s1;
  *thr_r = (a * a) * (1.0f - 2e-4f);
  *thr_l = (len * len) * (1.0f - 1e-4f);
  return 1;
}

/* One neighbour u (at w) of the row's vertex v (at squared distance dcur
 * from q) into the scan *o; bound = hicp__tie_bound(dcur). */
HICP_PP void hicp__row_add(hicp__row *o, const float q[3], uint32_t u, const hicp__vtx *w,
                           const hicp__vtx *v, float dcur, float bound, int cert)
{
  const float d = hicp__d2(q, w);
  if (d < o->dnext || (d == o->dnext && u < o->next)) {
    o->next = u;
    o->dnext = d;
  }
  o->near_tie |= d <= bound;
  if (cert) {
    const float l2 = hicp__edge2(w, v);
    const float r = hicp__bisector(d, dcur, l2);
    o->rmin = r < o->rmin ? r : o->rmin;
    o->l2min = l2 < o->l2min ? l2 : o->l2min;
  }
}

/* Neighbours e0 .. e1-1 of `cur`'s row, up to the length-code cut, into
 * *o (a hicp__row_scan in progress). */
HICP_PP void hicp__row_part(const hicp__mview *m, const float q[3], uint32_t cur, float dcur,
                            int cert, uint32_t cut, uint32_t e0, uint32_t e1, hicp__row *o)
{
  const float bound = hicp__tie_bound(dcur);
  const hicp__vtx *v = &m->vtx[cur];
  for (uint32_t e = e0; e < e1 && m->ecode[e] < cut; e++)
    hicp__row_add(o, q, m->nbr[e], &m->vtx[m->nbr[e]], v, dcur, bound, cert);
}

/* The GPU's row scan: exactly hicp__row_part's neighbours and result (its
 * minima and its tie rule do not depend on the order of the neighbours),
 * read four at a time: four length codes and four indices, then four
 * vertices, so that a GPU thread waits for two rounds of loads per four
 * neighbours instead of twelve (the scalar loop's exit test needs each
 * code before the next index).  A neighbour counts only if it and every
 * one before it in the row are below the cut, as in the scalar loop; the
 * vertices of the ones past the cut are read and not used. */
HICP_PP void hicp__row_part4(const hicp__mview *m, const float q[3], uint32_t cur, float dcur,
                             int cert, uint32_t cut, uint32_t e0, uint32_t e1, hicp__row *o)
{
  const float bound = hicp__tie_bound(dcur);
  const hicp__vtx v = m->vtx[cur];
  for (uint32_t e = e0; e < e1; e += 4) {
    uint32_t code[4], u[4];
    HICP_UNROLL
    for (int j = 0; j < 4; j++) {
      const int in = e + (uint32_t)j < e1;
      code[j] = in ? m->ecode[e + j] : 255u;
      u[j] = in ? m->nbr[e + j] : cur;
    }
    hicp__vtx w[4];
    HICP_UNROLL
    for (int j = 0; j < 4; j++)
      w[j] = m->vtx[u[j]];
    int live = 1;
    HICP_UNROLL
    for (int j = 0; j < 4; j++) {
      live = live && e + (uint32_t)j < e1 && code[j] < cut;
      if (!live)
        break;
      hicp__row_add(o, q, u[j], &w[j], &v, dcur, bound, cert);
    }
    if (!live)
      break;
  }
}

/* One row of the walk, scalar: the neighbours of `cur` that can matter,
 * or with `cert` all of them that can change the certificate (the first
 * 16, then the rest unless hicp__cert_rest shows they cannot), with the
 * certificate's minima; read one neighbour at a time (hicp__row_part) or,
 * with `by4`, four (hicp__row_part4), with the same result. */
HICP_PP void hicp__row_scan_by(const hicp__mview *m, const float q[3], uint32_t cur, float dcur,
                               int cert, hicp__row *o, int by4)
{
  const uint32_t cut = cert ? 256u : hicp__row_cut(m, cur, dcur);
  const uint32_t b = m->row[cur], end = m->row[cur + 1];
  const uint32_t mid = end - b > 16 ? b + 16 : end;
  o->next = HICP_NONE;
  o->dnext = HICP_FLT_INF;
  o->near_tie = 0;
  o->rmin = HICP_FLT_INF;
  o->l2min = HICP_FLT_INF;
  if (by4)
    hicp__row_part4(m, q, cur, dcur, cert, cut, b, mid, o);
  else
    hicp__row_part(m, q, cur, dcur, cert, cut, b, mid, o);
  float thr_r, thr_l;
  if (mid < end &&
      !(cert && hicp__cert_rest(m, cur, HICP_SQRTF(hicp__tie_bound(dcur)), m->ecode[mid], &thr_r,
                                &thr_l) &&
        o->rmin <= thr_r && o->l2min <= thr_l)) {
    if (by4)
      hicp__row_part4(m, q, cur, dcur, cert, cut, mid, end, o);
    else
      hicp__row_part(m, q, cur, dcur, cert, cut, mid, end, o);
  }
}

/* The reference scan, and the GPU's. */
HICP_PP void hicp__row_scan(const hicp__mview *m, const float q[3], uint32_t cur, float dcur,
                            int cert, hicp__row *o)
{
  hicp__row_scan_by(m, q, cur, dcur, cert, o, 0);
}

HICP_PP void hicp__row_scan4(const hicp__mview *m, const float q[3], uint32_t cur, float dcur,
                             int cert, hicp__row *o)
{
  hicp__row_scan_by(m, q, cur, dcur, cert, o, 1);
}

/* How far the query q may move before its answer v can change: 0 when
 * nothing is certain.
 *
 * Inside the safe ball (ended == 1): every other vertex is at least
 * 2 r - |q - v| away, so r - |q - v| with rounding margins.
 *
 * After a full row scan (ended == 2): q lies in v's Voronoi cell at
 * distance h >= sqrt(rmin) (1 - 2e-6) / 2 from every bisector plane of v
 * and a Delaunay neighbour (hicp__bisector), hence from the cell's boundary
 * and from the bisector plane of v and any vertex w.  A query q' with
 * |q' - q| = m < h has, exactly, D_w - D_v = 2 |w - v| H_w(q') >=
 * 2 L (h - m) for every w, L = |v - nearest vertex| (H_w: the distance to
 * the plane, 1-Lipschitz).  Float brute force returns v as long as D_w >
 * D_v (1 + 4e-6) + 8 FLT_MIN, which holds when h - m >= 2e-6 R^2 / L +
 * 4 FLT_MIN / L with R >= |q' - v|, R = |q - v| + h.  The slack is h minus
 * that margin.
 *
 * Its margins, named so that the vector copy (cpu/ends_simd.h: slacks4 and
 * back's test of rmin and l2min) uses the same ones; change them here, not
 * there:
 *   HICP_SLACK_D2_ABS  added to d2 before its root: |q - v| bounded above
 *                      even if d2 underflowed (see hicp__bisector);
 *   HICP_SLACK_SHRINK  makes h and L from the float rmin and l2min lower
 *                      bounds: it covers hicp__bisector's (1 - 2e-6), l2's
 *                      rounding (under 1e-6) and these double operations';
 *   HICP_SLACK_L2MIN   the least l2min (L above 1e-15) the margin divides by;
 *   HICP_SLACK_REL     the 2e-6 of 2e-6 R^2 / L above (half the 4e-6);
 *   HICP_SLACK_ABS     the absolute term: D_w - D_v must also exceed what
 *                      underflow can hide, 8 FLT_MIN, so h - m >= 4 FLT_MIN
 *                      / L more. */
#define HICP_SLACK_D2_ABS (4.0 * (double)HICP_FLT_MIN)
#define HICP_SLACK_SHRINK (1.0 - 1e-5)
#define HICP_SLACK_L2MIN 1e-30f
#define HICP_SLACK_REL 2e-6
#define HICP_SLACK_ABS (4.0 * (double)HICP_FLT_MIN)
HICP_PP float hicp__nn_slack(const hicp__mview *m, const hicp__nn_res *r)
{
  const double dist = HICP_SQRT((double)r->d2 + HICP_SLACK_D2_ABS) * HICP_SLACK_HI;
  if (r->ended == 1)
    return hicp__round_down(HICP_SQRT((double)m->safe_r2[r->v]) - dist);
  if (r->ended == 2 && r->rmin < HICP_FLT_INF && r->l2min > HICP_SLACK_L2MIN &&
      r->l2min < HICP_FLT_INF) {
    const double h = 0.5 * HICP_SQRT((double)r->rmin) * HICP_SLACK_SHRINK;
    const double len = HICP_SQRT((double)r->l2min) * HICP_SLACK_SHRINK;
    const double rad = dist + h;
    return hicp__guard_cut(
        m, hicp__round_down(h - (HICP_SLACK_REL * (rad * rad) + HICP_SLACK_ABS) / len));
  }
  return 0.0f;
}

/* Per scan point state that lets ICP skip the search: the query the last
 * answer was certified for, and how far the query may move from it before
 * the certificate lapses. */
typedef struct hicp__track {
  float q[3];
  float slack; /* 0: none */
} hicp__track;

/* A walk between row scans (the walk's steps are in HICP_NN_FUNCTIONS). */
typedef struct hicp__walk {
  uint32_t cur;   /* current vertex */
  float dcur;     /* its computed squared distance */
  uint32_t steps; /* moves so far */
  int cert;       /* certifying: scan whole rows, report the certificate */
} hicp__walk;

/* A walk from `start`, whose computed squared distance d2 is known. */
HICP_PP void hicp__walk_begin_at(uint32_t start, float d2, int cert, hicp__walk *w)
{
  w->cur = start;
  w->dcur = d2;
  w->steps = 0;
  w->cert = cert;
}

HICP_PP void hicp__walk_begin(const hicp__mview *m, const float q[3], uint32_t start, int cert,
                              hicp__walk *w)
{
  hicp__walk_begin_at(start, hicp__d2(q, &m->vtx[start]), cert, w);
}

/* Whether the walk is at a hub (a row longer than HICP_HUB_ROW); asked
 * after the safe ball test, in place of the row scan. */
HICP_PP int hicp__walk_at_hub(const hicp__mview *m, const hicp__walk *w)
{
  return hicp__is_hub(m, w->cur);
}

/* A walk at a hub reads none of its row: it moves to the nearer of two
 * start table vertices where that is strictly nearer than the hub
 * (returns 1: a step, which gives up the certificate as any move does),
 * else it ends with the kd-tree's search (returns 0: then
 * hicp__walk_end_hub).  The two: the table's vertex for q, and for the
 * mirror of the hub across q, 2q - h, where the vertices nearer q than
 * the hub lie when q is about as far from the hub as from them (the
 * table's vertex for q itself is then often the hub: on a sphere of
 * 160,000 points and its centre, queries 0.50-0.52 from the centre ended
 * in the kd-tree, 30-550 us each).  Both ways keep the answer exact and
 * its tie rule (the walk goes on from another vertex; the kd-tree is
 * exact), so every method and backend still answers the same vertex.
 * Every move lowers dcur, so a walk meets each hub at most once. */
HICP_PP int hicp__walk_hub_move(const hicp__mview *m, const float q[3], hicp__walk *w)
{
  if (m->start == 0)
    return 0;
  const hicp__vtx *h = &m->vtx[w->cur];
  const float mirror[3] = {2.0f * q[0] - h->x, 2.0f * q[1] - h->y, 2.0f * q[2] - h->z};
  uint32_t s = hicp__start_vertex(m, q);
  float d = hicp__d2(q, &m->vtx[s]);
  const uint32_t s2 = hicp__start_vertex(m, mirror);
  const float d2 = hicp__d2(q, &m->vtx[s2]);
  if (d2 < d) {
    s = s2;
    d = d2;
  }
  if (!(d < w->dcur))
    return 0;
  w->cur = s;
  w->dcur = d;
  w->steps++;
  w->cert = 0;
  return 1;
}

/* The end of a walk at a hub that did not move (hicp__walk_hub_move): the
 * kd-tree's exact search, seeded with the hub; no certificate. */
HICP_PP void hicp__walk_end_hub(const hicp__mview *m, const float q[3], const hicp__walk *w,
                                hicp__nn_res *r)
{
  uint32_t v = w->cur;
  float d = w->dcur;
  hicp__nn_kdtree(m, q, &v, &d);
  hicp__res_set(r, v, d, w->steps, 1, 0);
}

/* The first half of a walk step: 1 when the walk ends in the safe ball
 * of its vertex (then hicp__walk_end_safe), with no row scan. */
HICP_PP int hicp__walk_in_safe_ball(const hicp__mview *m, const hicp__walk *w)
{
  return w->dcur < m->safe_r2[w->cur];
}

/* The answer of a walk that ended in the safe ball. */
HICP_PP void hicp__walk_end_safe(const hicp__walk *w, hicp__nn_res *r)
{
  hicp__res_set(r, w->cur, w->dcur, w->steps, 1, 1);
}

/* The second half, after the row scan `rs`: moves the walk to the nearer
 * neighbour the scan found and returns 1, or returns 0 when there is none
 * (then hicp__walk_end).  Without branches, for the CPU's waves of walks
 * (cpu/chunk.h): whether a walk moves is a coin toss. */
HICP_PP int hicp__walk_move(hicp__walk *w, const hicp__row *rs)
{
  const int moved = rs->dnext < w->dcur;
  w->cur = moved ? rs->next : w->cur;
  w->dcur = moved ? rs->dnext : w->dcur;
  w->steps += (uint32_t)moved;
  w->cert &= !moved; /* a walk that moves gives up its certificate */
  return moved;
}

/* The end of a walk whose last row scan `rs` found no nearer neighbour:
 * near-ties resolved by the flood, else with `cert` a row certificate;
 * where a guard could be nearer (hicp__guard_safe), the kd-tree's answer
 * and no certificate. */
HICP_PP void hicp__walk_end(const hicp__mview *m, const float q[3], const hicp__walk *w,
                            const hicp__row *rs, hicp__nn_res *r)
{
  uint32_t cur = w->cur;
  float dcur = w->dcur;
  r->walked = 1;
  r->ended = 0;
  r->rmin = rs->rmin;
  r->l2min = rs->l2min;
  if (!hicp__guard_safe(m, q, dcur)) {
    hicp__nn_kdtree(m, q, &cur, &dcur);
  } else if (rs->near_tie) {
    const int flood = hicp__walk_flood(m, q, &cur, &dcur);
    if (flood == -2) /* a hub within the tie bound */
      hicp__nn_kdtree(m, q, &cur, &dcur);
    else if (flood != 0)
      hicp__nn_brute(m, q, &cur, &dcur);
  } else if (w->cert) {
    r->ended = 2;
  }
  r->v = cur;
  r->d2 = dcur;
  r->steps = w->steps;
}

/* Whether the start of a walk by `method` is a kd descent (kdann, and
 * pnn-opt without a previous match on a model without a start table). */
HICP_PP int hicp__nn_start_descends(const hicp__mview *m, int method, uint32_t prev)
{
  return method == 4 || (method == 0 && prev == HICP_NONE && m->start == NULL);
}

/* The start vertex of a walk by `method` (hicp_nn_method: zero, kdann, pnn,
 * pnn-opt) with `prev` the query's previous match or HICP_NONE. */
HICP_PP uint32_t hicp__nn_start(const hicp__mview *m, const float q[3], int method, uint32_t prev)
{
  switch (method) {
  case 3: /* HICP_NN_ZERO */
    return m->zero_start;
  case 4: /* HICP_NN_KDANN */
    return hicp__nn_kd_descend(m, q);
  case 5: /* HICP_NN_PNN */
    return prev != HICP_NONE ? prev : m->zero_start;
  default: /* HICP_NN_PNN_OPT */
    return prev != HICP_NONE      ? prev
           : m->start != NULL     ? hicp__start_vertex(m, q)
                                  : hicp__nn_kd_descend(m, q);
  }
}

/* ICP queries by pnn and pnn-opt are certified (hicp__nn_track). */
HICP_PP int hicp__track_cert(int method)
{
  return method == 0 || method == 5;
}

/* hicp__track_keep compares squares: |q - q_c|^2 < slack^2 * this.  slack^2
 * is exact in double, and the margin of 4e-12 covers the roundings of the
 * few double operations on the left (under 1e-15 in all) with room to
 * spare, so no square root is needed either way.  The vector fronts
 * (cpu/ends_simd.h) use the same factor. */
#define HICP_KEEP_SHRINK (1.0 - 4e-12)

/* The first half of hicp__nn_track: a query less than its slack from the
 * query its answer `prev` was certified for keeps that answer with no
 * search (returns 1 with *r); else 0.  The certificate stays as it was:
 * hicp__nn_slack's proof holds for every query within the slack of the
 * certified one, so a kept query neither moves the ball's centre nor
 * shrinks it (re-centring on each kept query with the slack shrunk by the
 * move, as before, was a ball inside this one and kept fewer queries). */
HICP_PP int hicp__track_keep(const hicp__mview *m, const float q[3], int method, uint32_t prev,
                             const hicp__track *t, hicp__nn_res *r)
{
  if (!(prev != HICP_NONE && t->slack > 0.0f && hicp__track_cert(method)))
    return 0;
  const double dx = (double)q[0] - (double)t->q[0];
  const double dy = (double)q[1] - (double)t->q[1];
  const double dz = (double)q[2] - (double)t->q[2];
  const double moved2 = (dx * dx + dy * dy) + dz * dz;
  /* |q - t->q| < slack, squared: see HICP_KEEP_SHRINK */
  const double s = (double)t->slack;
  if (!(moved2 < (s * s) * HICP_KEEP_SHRINK))
    return 0;
  hicp__res_set(r, prev, hicp__d2(q, &m->vtx[prev]), 0, 1, 0);
  return 1;
}

/* The second half: records the query and its new certificate. */
HICP_PP void hicp__track_update(const hicp__mview *m, const float q[3], int cert,
                                const hicp__nn_res *r, hicp__track *t)
{
  t->q[0] = q[0];
  t->q[1] = q[1];
  t->q[2] = q[2];
  t->slack = cert ? hicp__nn_slack(m, r) : 0.0f;
}

/* The walk, the query dispatch and the ICP query, defined for a given row
 * scan: the scalar ones here (hicp__row_scan, the reference; hicp__row_scan4,
 * the GPU's: see the two instances at the end of this file), vector ones in
 * cpu/walk_simd.c.  ATTR carries a target attribute.
 *
 * Walk: greedy descent from `start` to the exact nearest vertex (see the top
 * of this file), one row per hicp__nn_walk_step, which returns 1 with the
 * answer when the walk has ended (the CPU interleaves the steps of several
 * walks: cpu/chunk.h).  Early exit: a query inside the ball of radius r_v =
 * (the distance from v to its nearest other vertex) / 2 around v has v as
 * its unique nearest vertex, by a margin beyond rounding since safe_r2 is
 * r_v^2 shrunk by 4e-5 relative; in ICP the previous match is usually still
 * the answer and this test confirms it without reading its row.  With
 * `cert` (ICP's tracked queries) the start vertex's row is scanned whole
 * and the walk reports what hicp__nn_slack needs, unless the walk moves: a
 * query that left its previous match's cell is most likely still moving
 * (ICP's early iterations), past any slack before the next iteration, so
 * a walk that moves gives up its certificate and scans its further rows
 * with the cut (on bunny00 this took 16% off the registration).  A walk
 * at a hub (HICP_HUB_ROW) reads none of its row: hicp__walk_hub_move.
 *
 * Query: one query by `method` (a hicp_nn_method value) with `prev` the
 * query's previous match or HICP_NONE.  Models without a Delaunay graph
 * (coplanar, collinear or tiny inputs) answer every walk method with the
 * exact kd-tree search, seeded with the start vertex the walk would use.
 *
 * Track: a query of an ICP pass.  For pnn and pnn-opt, a query less than
 * its slack (hicp__nn_slack) from the query its answer was certified for
 * keeps that answer with no search.  All in double with + - * / sqrt: the
 * CPU and the GPU agree to the bit. */
#define HICP_NN_FUNCTIONS(SUFFIX, ROW_SCAN, ATTR)                                              \
  ATTR HICP_PP int hicp__nn_walk_step##SUFFIX(const hicp__mview *m, const float q[3],          \
                                              hicp__walk *w, hicp__nn_res *r)                   \
  {                                                                                              \
    if (hicp__walk_in_safe_ball(m, w)) {                                                         \
      hicp__walk_end_safe(w, r);                                                                 \
      return 1;                                                                                  \
    }                                                                                            \
    if (hicp__walk_at_hub(m, w)) {                                                               \
      if (hicp__walk_hub_move(m, q, w))                                                          \
        return 0;                                                                                \
      hicp__walk_end_hub(m, q, w, r);                                                            \
      return 1;                                                                                  \
    }                                                                                            \
    hicp__row rs;                                                                                \
    ROW_SCAN(m, q, w->cur, w->dcur, w->cert, &rs);                                               \
    if (hicp__walk_move(w, &rs))                                                                 \
      return 0;                                                                                  \
    hicp__walk_end(m, q, w, &rs, r);                                                             \
    return 1;                                                                                    \
  }                                                                                              \
                                                                                                 \
  ATTR HICP_PP hicp__nn_res hicp__nn_walk##SUFFIX(const hicp__mview *m, const float q[3],       \
                                                  uint32_t start, int cert)                     \
  {                                                                                              \
    hicp__walk w;                                                                                \
    hicp__nn_res r;                                                                              \
    hicp__walk_begin(m, q, start, cert, &w);                                                     \
    while (!hicp__nn_walk_step##SUFFIX(m, q, &w, &r)) {                                          \
    }                                                                                            \
    return r;                                                                                    \
  }                                                                                              \
                                                                                                 \
  ATTR HICP_PP hicp__nn_res hicp__nn_search##SUFFIX(const hicp__mview *m, const float q[3],     \
                                                    int method, uint32_t prev, int cert)        \
  {                                                                                              \
    hicp__nn_res r;                                                                              \
    hicp__res_set(&r, HICP_NONE, HICP_FLT_INF, 0, 0, 0);                                         \
    if (method == 1) { /* HICP_NN_BRUTE */                                                       \
      hicp__nn_brute(m, q, &r.v, &r.d2);                                                         \
      return r;                                                                                  \
    }                                                                                            \
    if (method == 2) { /* HICP_NN_KDTREE: from no candidate */                                  \
      hicp__nn_kdtree(m, q, &r.v, &r.d2);                                                        \
      return r;                                                                                  \
    }                                                                                            \
    const uint32_t start = hicp__nn_start(m, q, method, prev);                                   \
    if (m->row == 0) {                                                                           \
      r.v = start;                                                                               \
      r.d2 = hicp__d2(q, &m->vtx[start]);                                                        \
      hicp__nn_kdtree(m, q, &r.v, &r.d2);                                                        \
      return r;                                                                                  \
    }                                                                                            \
    return hicp__nn_walk##SUFFIX(m, q, start, cert);                                             \
  }                                                                                              \
                                                                                                 \
  ATTR HICP_PP hicp__nn_res hicp__nn_query##SUFFIX(const hicp__mview *m, const float q[3],      \
                                                   int method, uint32_t prev)                   \
  {                                                                                              \
    return hicp__nn_search##SUFFIX(m, q, method, prev, 0);                                       \
  }                                                                                              \
                                                                                                 \
  ATTR HICP_PP hicp__nn_res hicp__nn_track##SUFFIX(const hicp__mview *m, const float q[3],      \
                                                   int method, uint32_t prev, hicp__track *t)   \
  {                                                                                              \
    hicp__nn_res r;                                                                              \
    if (hicp__track_keep(m, q, method, prev, t, &r))                                             \
      return r;                                                                                  \
    const int cert = hicp__track_cert(method);                                                   \
    r = hicp__nn_search##SUFFIX(m, q, method, prev, cert);                                       \
    hicp__track_update(m, q, cert, &r, t);                                                       \
    return r;                                                                                    \
  }

/* hicp__nn_walk, hicp__nn_query, hicp__nn_track: the reference versions;
 * hicp__nn_walk4, ...: the GPU's, with hicp__row_scan4 (tests/test_nn.c
 * checks that they agree). */
HICP_NN_FUNCTIONS(, hicp__row_scan, )
HICP_NN_FUNCTIONS(4, hicp__row_scan4, )

#endif /* HICP_PP_NN_H */
