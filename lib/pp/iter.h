/* pp/iter.h: one ICP iteration's sequence and the state it carries to the
 * next, for both loops: the host's (lib/icp.c, hicp__icp_loop) and the
 * GPU's on-device one (gpu/gpu_backend.cu, icp_kernel).  The passes differ
 * (CPU chunks against a grid of blocks); what is decided between them, and
 * in which order, is written here once, so that the two make the same
 * decisions from the same sums (stop 66's review found the sequence written
 * twice, with nothing but a GPU machine to catch a drift):
 *
 *   sel = hicp__iter_begin(&it, ...)       the selection of pass A
 *   pass A, its sums -> tot
 *   if (hicp__iter_after_a(&it, &tot, ...)) the sigma filter's bounds
 *     [the trim's threshold: hicp__iter_trim]
 *     pass B under them, its sums -> tot
 *   stop = hicp__iter_sums(&it, ...)      the stop tests on the sums
 *   [while it is HICP__GO: hicp__iter_halt, the backend's cancel and time]
 *   while it is HICP__GO: hicp__iter_next  Horn's solve: T_{k+1}, k + 1
 *
 * At a stop, it.T is the pose the sums were taken at, and it.degenerate
 * says whether the solve that gave it was degenerate. */
#ifndef HICP_PP_ITER_H
#define HICP_PP_ITER_H

#include "pp/solve.h"

typedef struct hicp__iter {
  hicp__xf T;            /* the pose iteration k's pass A applies */
  hicp__xf T_prev;       /* the pose before it (T at k = 0) */
  double mse_prev;       /* the inliers' MSE at T_prev */
  double win_lo, win_hi; /* the sigma filter's window: the bounds the last
                            filtered iteration set */
  int k;                 /* the iteration */
  int degenerate;        /* the solve that gave T was degenerate */
} hicp__iter;

HICP_PP void hicp__iter_init(hicp__iter *it, const hicp__xf *T0)
{
  it->T = *T0;
  it->T_prev = *T0;
  it->mse_prev = 0.0;
  it->win_lo = -HUGE_VAL;
  it->win_hi = HUGE_VAL;
  it->k = 0;
  it->degenerate = 0;
}

/* The selection of iteration k's pass A (hicp__iter_select). */
HICP_PP hicp__select hicp__iter_begin(const hicp__iter *it, double max_d2, int filter_start)
{
  return hicp__iter_select(max_d2, filter_start, it->k, it->win_lo, it->win_hi);
}

/* After pass A's sums `tot`: where the sigma filter is on this iteration,
 * its bounds, added to *sel and kept as the next iteration's window.
 * Returns 1 when pass B must sum again under the filters (the sigma
 * filter's bounds or the trim, whose threshold the caller then takes from
 * the candidates' distances: hicp__iter_trim). */
HICP_PP int hicp__iter_after_a(hicp__iter *it, const hicp__partial *tot, double sigma,
                               double trim, hicp__select *sel)
{
  if (sel->want_e) {
    hicp__sigma_bounds(tot, sigma, sel);
    it->win_lo = sel->e_lo;
    it->win_hi = sel->e_hi;
  }
  return sel->want_e || trim < 1.0;
}

/* The trim's threshold, once the caller has found it: the keep-th smallest
 * candidate distance (keep = hicp__trim_keep of the candidates' count,
 * which must not be 0). */
HICP_PP void hicp__iter_trim(hicp__select *sel, double kth_e2)
{
  sel->trim_e2 = kth_e2;
  sel->trim_on = 1;
}

/* The end of the iteration on its final sums: HICP__GO or the stop the
 * sums give (hicp__iter_stop), and the inliers' MSE in *mse. */
HICP_PP int hicp__iter_sums(const hicp__iter *it, const hicp__conv *c, const hicp__partial *tot,
                            double *mse)
{
  return hicp__iter_stop(c, tot, it->k, it->mse_prev, &it->T, &it->T_prev, mse);
}

/* Going on: Horn's solve on the sums gives the next pose. */
HICP_PP void hicp__iter_next(hicp__iter *it, const hicp__partial *tot, double s_noise, double mse)
{
  hicp__xf next;
  int degenerate;
  hicp__solve_horn(tot, s_noise, &it->T, &next, &degenerate);
  it->degenerate = degenerate;
  it->T_prev = it->T;
  it->T = next;
  it->mse_prev = mse;
  it->k++;
}

#endif
