/* pp/reduce.h: per-point contributions to an ICP iteration and the fixed
 * summation shape that makes results independent of who computes them.
 *
 * Shape (docs/design.md, "Bit-identical results"): the scan is cut into
 * chunks of C points (a power of two, 256..65536).  Within chunk c, lane l
 * (0..255) sums the points c*C + l + 256*j for j = 0, 1, ... in order of j;
 * the 256 lane sums are combined by the halving tree
 *     for s = 128, 64, ..., 1:  lane[i] += lane[i + s]   (i < s)
 * and the chunk partials by the same tree over chunk indices, skipping
 * missing partners (hicp__partial_tree).  All sums are in double.  A CPU
 * thread and a GPU block (256 threads, then shared memory and warp shuffles
 * in the same pairing) therefore produce identical bits, whatever the split. */
#ifndef HICP_PP_REDUCE_H
#define HICP_PP_REDUCE_H

#include "pp/types.h"

#define HICP_LANES 256

/* Fields of a partial sum. */
enum {
  HICP_PF_N_ALL,  /* pairs */
  HICP_PF_E2_ALL, /* sum of squared distances, all pairs */
  HICP_PF_N_C,    /* candidates: pairs within max_dist */
  HICP_PF_E2_C,   /* sum of squared distances of candidates */
  HICP_PF_N_W,    /* sigma filter window: candidates within the previous */
  HICP_PF_E_W,    /*   iteration's bounds, whose distances give the next */
  HICP_PF_E2_W,   /*   bounds (sums of e and e^2) */
  HICP_PF_N_IN,   /* inliers: candidates kept by the filters */
  HICP_PF_E2_IN,
  HICP_PF_SP,     /* 3: sum of scan points p0 (inliers) */
  HICP_PF_SY = HICP_PF_SP + 3, /* 3: sum of matched model points */
  HICP_PF_SPY = HICP_PF_SY + 3, /* 9: sum of p0 y^T, row-major */
  HICP_PF_COUNT = HICP_PF_SPY + 9
};

typedef struct hicp__partial {
  double v[HICP_PF_COUNT];
} hicp__partial;

/* Which pairs count.  Candidates: e2 <= max_d2.  Inliers: candidates with
 * e_lo <= e <= e_hi (sigma filter, when sigma_on) and e2 <= trim_e2 (trimmed
 * ICP, when trim_on).  `want_e` asks for the distance e = sqrt(e2) and the
 * window sums over candidates with w_lo <= e <= w_hi, from which the sigma
 * filter's next bounds are computed. */
typedef struct hicp__select {
  double max_d2;
  double w_lo, w_hi;
  double e_lo, e_hi;
  double trim_e2;
  int sigma_on;
  int trim_on;
  int want_e;
} hicp__select;

/* Whether a pair of squared distance e2 is a candidate (within the
 * distance cut): the sums' HICP_PF_N_C, and the pairs the trim ranks. */
HICP_PP int hicp__is_candidate(double e2, const hicp__select *s)
{
  return e2 <= s->max_d2;
}

/* Rigid transform in double: x = r p + t, r row-major. */
typedef struct hicp__xf {
  double r[9];
  double t[3];
} hicp__xf;

HICP_PP void hicp__partial_zero(hicp__partial *a)
{
  for (int i = 0; i < HICP_PF_COUNT; i++)
    a->v[i] = 0.0;
}

HICP_PP void hicp__partial_add(hicp__partial *a, const hicp__partial *b)
{
  for (int i = 0; i < HICP_PF_COUNT; i++)
    a->v[i] = a->v[i] + b->v[i];
}

/* Apply: qd = r p + t in double (p's floats are exact in double).  Written
 * out rather than as a loop, so that qd stays in registers: a loop left it
 * on the stack, and reading it back as one vector stalled store forwarding
 * (13% of an ICP's time on bunny00). */
HICP_PP void hicp__apply(const hicp__xf *T, const float p[3], double qd[3])
{
  const double x = p[0], y = p[1], z = p[2];
  const double *r = T->r;
  qd[0] = ((r[0] * x + r[1] * y) + r[2] * z) + T->t[0];
  qd[1] = ((r[3] * x + r[4] * y) + r[5] * z) + T->t[1];
  qd[2] = ((r[6] * x + r[7] * y) + r[8] * z) + T->t[2];
}

/* Squared distance in double between the transformed point and its match. */
HICP_PP double hicp__pair_e2(const double qd[3], const hicp__vtx *y)
{
  double dx = qd[0] - (double)y->x;
  double dy = qd[1] - (double)y->y;
  double dz = qd[2] - (double)y->z;
  return (dx * dx + dy * dy) + dz * dz;
}

/* Pass A, per point (both backends): the query of scan point p under T, in
 * double for the pair's distance and rounded to float for the search ... */
HICP_PP void hicp__pass_query(const hicp__xf *T, const float p[3], double qd[3], float q[3])
{
  hicp__apply(T, p, qd);
  q[0] = (float)qd[0];
  q[1] = (float)qd[1];
  q[2] = (float)qd[2];
}

/* ... and what the sums read of its answer v: the match and the pair's
 * squared distance in double. */
HICP_PP void hicp__pass_answer(uint32_t *match, double *e2, uint32_t i, const double qd[3],
                               const hicp__vtx *vtx, uint32_t v)
{
  match[i] = v;
  e2[i] = hicp__pair_e2(qd, &vtx[v]);
}

/* Adds one pair (scan point p, match y, squared distance e2) to a lane. */
HICP_PP void hicp__partial_add_pair(hicp__partial *a, const float p[3], const hicp__vtx *y,
                                    double e2, const hicp__select *s)
{
  a->v[HICP_PF_N_ALL] += 1.0;
  a->v[HICP_PF_E2_ALL] += e2;
  if (!hicp__is_candidate(e2, s))
    return;
  a->v[HICP_PF_N_C] += 1.0;
  a->v[HICP_PF_E2_C] += e2;
  double e = 0.0;
  if (s->want_e) {
    e = HICP_SQRT(e2);
    if (e >= s->w_lo && e <= s->w_hi) {
      a->v[HICP_PF_N_W] += 1.0;
      a->v[HICP_PF_E_W] += e;
      a->v[HICP_PF_E2_W] += e2;
    }
  }
  if (s->sigma_on && (e < s->e_lo || e > s->e_hi))
    return;
  if (s->trim_on && e2 > s->trim_e2)
    return;
  const double px = p[0], py = p[1], pz = p[2];
  const double yx = y->x, yy = y->y, yz = y->z;
  double *v = a->v;
  v[HICP_PF_N_IN] += 1.0;
  v[HICP_PF_E2_IN] += e2;
  v[HICP_PF_SP + 0] += px;
  v[HICP_PF_SP + 1] += py;
  v[HICP_PF_SP + 2] += pz;
  v[HICP_PF_SY + 0] += yx;
  v[HICP_PF_SY + 1] += yy;
  v[HICP_PF_SY + 2] += yz;
  /* float * float is exact in double (24 + 24 bits < 53). */
  v[HICP_PF_SPY + 0] += px * yx;
  v[HICP_PF_SPY + 1] += px * yy;
  v[HICP_PF_SPY + 2] += px * yz;
  v[HICP_PF_SPY + 3] += py * yx;
  v[HICP_PF_SPY + 4] += py * yy;
  v[HICP_PF_SPY + 5] += py * yz;
  v[HICP_PF_SPY + 6] += pz * yx;
  v[HICP_PF_SPY + 7] += pz * yy;
  v[HICP_PF_SPY + 8] += pz * yz;
}

/* The halving tree over n partials (n >= 1): the result is left in a[0].
 * For s = the largest power of two below n, then s/2, ..., 1:
 * a[i] += a[i + s] for every i < s with i + s < n. */
HICP_PP void hicp__partial_tree(hicp__partial *a, uint32_t n)
{
  uint32_t s = 1;
  while (s < n)
    s <<= 1;
  for (s >>= 1; s >= 1; s >>= 1)
    for (uint32_t i = 0; i < s; i++)
      if (i + s < n)
        hicp__partial_add(&a[i], &a[i + s]);
}

/* Walk statistics of a chunk: integers, so any order gives the same sums. */
#define HICP_WALK_BINS 16
typedef struct hicp__walkpart {
  uint64_t queries;
  uint64_t steps;
  uint32_t max_steps;
  uint32_t hist[HICP_WALK_BINS];
} hicp__walkpart;

/* The histogram bin of a walk of `steps` steps: the last bin holds every
 * walk that long or longer. */
HICP_PP uint32_t hicp__walk_bin(uint32_t steps)
{
  return steps < HICP_WALK_BINS - 1 ? steps : HICP_WALK_BINS - 1;
}

/* The end (one past the last point) of chunk c of `chunk` points in a scan
 * of n: the scan's end for the last chunk.  (HICP_SCAN_MAX keeps
 * c * chunk + chunk within 32 bits.) */
HICP_PP uint32_t hicp__chunk_end_of(uint32_t c, uint32_t chunk, uint32_t n)
{
  const uint32_t e = c * chunk + chunk;
  return e < n ? e : n;
}

#endif /* HICP_PP_REDUCE_H */
