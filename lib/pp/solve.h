/* pp/solve.h: from the combined sums to the next transform, and the stop
 * tests; shared by the host driver and the GPU's on-device loop so both make
 * the same decisions from the same bits.  Only + - * / and sqrt are used
 * (and ceil, which is exact, for the trim's count).
 *
 * Horn's closed form (B. K. P. Horn, "Closed-form solution of absolute
 * orientation using unit quaternions", JOSA A 4(4), 1987), as in Besl &
 * McKay 1992 and thesis Algorithms 4-5: with centroids mp, my and the
 * cross-covariance S = sum(p y^T)/n - mp my^T, the rotation is the unit
 * quaternion maximising q^T Q q, where
 *     Q = [ tr S      D^T               ]     D = (A23, A31, A12), A = S - S^T
 *         [ D    S + S^T - tr(S) I3 ]
 * i.e. the eigenvector of the largest eigenvalue of the symmetric 4x4 Q,
 * found here by Jacobi rotations.  t = my - R mp. */
#ifndef HICP_PP_SOLVE_H
#define HICP_PP_SOLVE_H

#include "pp/reduce.h"

/* The Jacobi rotation that zeroes a[p][q], from app = a[p][p], aqq = a[q][q]
 * and apq = a[p][q]: its cosine, sine and tangent.  Returns 0, and nothing
 * set, when apq is negligible against the diagonal (rotating would not
 * change it).  The tangent is the smaller root of t^2 + 2 theta t - 1 = 0,
 * theta = (aqq - app) / (2 apq), written without theta:
 *     t = sign(d) 2 apq / (|d| + sqrt(d^2 + (2 apq)^2)),   d = aqq - app,
 * one division fewer on the chain than through theta.  The squares cannot
 * overflow (coordinates within HICP_COORD_MAX keep Q's entries below
 * 1e36).  They would underflow for a pair under about 1e-154, so a pair
 * whose three entries are all under 2^-340 is scaled by 2^600 first:
 * exact, and t depends only on the ratio, so its bits are those of the
 * unscaled formula wherever that one does not underflow (test:
 * solve::jacobi_eigenpairs from 1e8 down to 1e-200).  Every pair that
 * could underflow is among them: with |app| + |aqq| at 2^-340 or more, a
 * pair not returned as negligible has |apq| over 2^-400.  The test reads
 * the inputs alone, so it is done while d is computed rather than after
 * (on a GPU's one thread the solve is a chain of dependent operations). */
HICP_PP int hicp__jacobi_angle(double app, double aqq, double apq, double *c, double *s,
                               double *t)
{
  const double scale = (app < 0 ? -app : app) + (aqq < 0 ? -aqq : aqq);
  const double mag = apq < 0 ? -apq : apq;
  if (mag == 0.0 || mag <= scale * 1e-18)
    return 0;
  const int tiny = scale < 0x1p-340 && mag < 0x1p-340;
  double d = aqq - app, twice = 2.0 * apq;
  if (tiny) {
    d *= 0x1p600;
    twice *= 0x1p600;
  }
  const double ad = d < 0 ? -d : d;
  const double tt = (d < 0 ? -twice : twice) / (ad + HICP_SQRT(d * d + twice * twice));
  const double cc = 1.0 / HICP_SQRT(tt * tt + 1.0);
  *c = cc;
  *s = tt * cc;
  *t = tt;
  return 1;
}

/* Applies the rotation (c, s, t) of the pair (p, q) to a and to the
 * eigenvector columns v. */
HICP_PP void hicp__jacobi_rotate(double a[4][4], double v[4][4], int p, int q, double c,
                                 double s, double t)
{
  const double apq = a[p][q];
  a[p][p] = a[p][p] - t * apq;
  a[q][q] = a[q][q] + t * apq;
  a[p][q] = 0.0;
  a[q][p] = 0.0;
  HICP_UNROLL
  for (int r = 0; r < 4; r++) {
    if (r != p && r != q) {
      const double arp = a[r][p], arq = a[r][q];
      a[r][p] = c * arp - s * arq;
      a[p][r] = a[r][p];
      a[r][q] = s * arp + c * arq;
      a[q][r] = a[r][q];
    }
    const double vrp = v[r][p], vrq = v[r][q];
    v[r][p] = c * vrp - s * vrq;
    v[r][q] = s * vrp + c * vrq;
  }
}

/* Symmetric 4x4 eigen-decomposition by Jacobi rotations: on return the
 * diagonal of a holds the eigenvalues and column k of v the eigenvector of
 * a[k][k].  Each sweep takes the six pairs in three rounds of two disjoint
 * ones, (0,1)(2,3), (0,2)(1,3), (0,3)(1,2): a round's two angles both come
 * from the matrix as the round finds it, so their divisions and square
 * roots are two independent chains that a core can overlap.  Against the
 * cyclic order one pair at a time: 410 against 757 ns a solve on a Zen 4
 * core, 18.9 against 21.0 rotations, the same accuracy; on an H200's one
 * thread 9.4 against 11.7 us (docs/gpu.md, "Horn's solve in rounds of two
 * rotations").  Fixed order, so the result is a pure function of the
 * input bits. */
HICP_PP void hicp__jacobi4(double a[4][4], double v[4][4])
{
  HICP_UNROLL
  for (int i = 0; i < 4; i++)
    HICP_UNROLL
    for (int j = 0; j < 4; j++)
      v[i][j] = i == j ? 1.0 : 0.0;
  for (int sweep = 0; sweep < 64; sweep++) {
    int rotated = 0;
    HICP_UNROLL
    for (int round = 0; round < 3; round++) {
      /* the pairs (0, q) and (p2, q2) */
      const int q = round + 1, p2 = round == 0 ? 2 : 1, q2 = round == 2 ? 2 : 3;
      double c1 = 1.0, s1 = 0.0, t1 = 0.0, c2 = 1.0, s2 = 0.0, t2 = 0.0;
      const int first = hicp__jacobi_angle(a[0][0], a[q][q], a[0][q], &c1, &s1, &t1);
      const int second = hicp__jacobi_angle(a[p2][p2], a[q2][q2], a[p2][q2], &c2, &s2, &t2);
      if (first)
        hicp__jacobi_rotate(a, v, 0, q, c1, s1, t1);
      if (second)
        hicp__jacobi_rotate(a, v, p2, q2, c2, s2, t2);
      rotated |= first | second;
    }
    if (!rotated)
      break;
  }
}

/* Rotation matrix (row-major) of a unit quaternion (w, x, y, z). */
HICP_PP void hicp__quat_to_rot(const double q[4], double r[9])
{
  double w = q[0], x = q[1], y = q[2], z = q[3];
  r[0] = ((w * w + x * x) - y * y) - z * z;
  r[1] = 2.0 * (x * y - w * z);
  r[2] = 2.0 * (x * z + w * y);
  r[3] = 2.0 * (x * y + w * z);
  r[4] = ((w * w - x * x) + y * y) - z * z;
  r[5] = 2.0 * (y * z - w * x);
  r[6] = 2.0 * (x * z - w * y);
  r[7] = 2.0 * (y * z + w * x);
  r[8] = ((w * w - x * x) - y * y) + z * z;
}

/* A unit quaternion (w, x, y, z) of the rotation r (row-major), by the
 * largest of 1 + trace and the diagonal's 1 + 2 r_ii - trace (Shepperd),
 * so that no division is by a small number.  The identity gives exactly
 * (1, 0, 0, 0). */
HICP_PP void hicp__rot_to_quat(const double r[9], double q[4])
{
  const double tr = (r[0] + r[4]) + r[8];
  const double d0 = 1.0 + tr, d1 = (1.0 + r[0]) - (r[4] + r[8]),
               d2 = (1.0 + r[4]) - (r[0] + r[8]), d3 = (1.0 + r[8]) - (r[0] + r[4]);
  if (d0 >= d1 && d0 >= d2 && d0 >= d3) {
    const double s = HICP_SQRT(d0) * 2.0; /* 4 w */
    q[0] = 0.25 * s;
    q[1] = (r[7] - r[5]) / s;
    q[2] = (r[2] - r[6]) / s;
    q[3] = (r[3] - r[1]) / s;
  } else if (d1 >= d2 && d1 >= d3) {
    const double s = HICP_SQRT(d1) * 2.0; /* 4 x */
    q[0] = (r[7] - r[5]) / s;
    q[1] = 0.25 * s;
    q[2] = (r[1] + r[3]) / s;
    q[3] = (r[2] + r[6]) / s;
  } else if (d2 >= d3) {
    const double s = HICP_SQRT(d2) * 2.0; /* 4 y */
    q[0] = (r[2] - r[6]) / s;
    q[1] = (r[1] + r[3]) / s;
    q[2] = 0.25 * s;
    q[3] = (r[5] + r[7]) / s;
  } else {
    const double s = HICP_SQRT(d3) * 2.0; /* 4 z */
    q[0] = (r[3] - r[1]) / s;
    q[1] = (r[2] + r[6]) / s;
    q[2] = (r[5] + r[7]) / s;
    q[3] = 0.25 * s;
  }
}

/* Relative eigenvalue gap under which the rotation is taken as undetermined
 * (identical or collinear scan points: the top eigenvalues of Q tie). */
#define HICP_DEGENERATE_GAP 1e-6

/* The most rounding alone can leave in an entry of the cross-covariance S
 * (below) when the true S is zero: all inlier scan points identical, or
 * every pair matched to one model vertex.  S's entries are differences of
 * sums (sum p y^T / n - mp my^T), each sum of terms at most pmax * ymax in
 * size (pmax, ymax: bounds on the scan's and the model's coordinates), and
 * no sum went through more than `adds` additions on its way (the
 * reduction's depth: a lane's points, then the lane and chunk trees).  Each
 * sum is then off by at most about adds * eps/2 of pmax * ymax, and S's
 * entries by (1.5 adds + 3) eps pmax ymax; this is 5 times that and more.
 * Below it, S is noise, whose eigenvectors would pick an arbitrary
 * rotation (stop 42: 40-177 degrees, some not even flagged degenerate). */
HICP_PP double hicp__s_noise(double adds, double pmax, double ymax)
{
  return 8.0 * (adds + 4.0) * 0x1p-52 * pmax * ymax;
}

/* The larger of x and y (y when they are equal). */
HICP_PP double hicp__dmax(double x, double y)
{
  return x > y ? x : y;
}

/* Solves for the transform from the inlier sums.  Returns 0, or -1 when
 * there is no inlier pair.  *degenerate is set when the rotation is not
 * determined by the data; the rotation consistent with it nearest to the
 * current one (cur: the transform these sums were taken at) is then
 * chosen: the projection of cur's quaternion onto the top eigenspace.  A
 * cross-covariance within s_noise (hicp__s_noise) of zero determines no
 * rotation at all: cur's rotation is kept.  (With cur the identity, as in
 * a first iteration from no initial pose, both give what they gave when
 * the identity was projected: the smallest rotation.  From a later
 * iteration, or an initial pose, the identity would throw away what the
 * earlier iterations, or the caller, knew: one pair left by a tight
 * filter turned a 0.4 degree estimate into the identity.) */
HICP_PP int hicp__solve_horn(const hicp__partial *tot, double s_noise, const hicp__xf *cur,
                             hicp__xf *T, int *degenerate)
{
  double n = tot->v[HICP_PF_N_IN];
  *degenerate = 0;
  if (!(n > 0.0))
    return -1;
  double mp[3], my[3], S[3][3];
  for (int i = 0; i < 3; i++) {
    mp[i] = tot->v[HICP_PF_SP + i] / n;
    my[i] = tot->v[HICP_PF_SY + i] / n;
  }
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      S[i][j] = tot->v[HICP_PF_SPY + 3 * i + j] / n - mp[i] * my[j];
  /* S within s_noise of zero: Q = 0, whose eigen-solve gives the identity
   * quaternion, flagged degenerate.  That is set after the solve on S as
   * it is, so that this test (a tree of |S| maxima) is not on the solve's
   * chain; the bits are those of solving Q = 0. */
  double sab[9];
  HICP_UNROLL
  for (int i = 0; i < 9; i++)
    sab[i] = S[i / 3][i % 3] < 0 ? -S[i / 3][i % 3] : S[i / 3][i % 3];
  const double m03 = hicp__dmax(hicp__dmax(sab[0], sab[1]), hicp__dmax(sab[2], sab[3]));
  const double m47 = hicp__dmax(hicp__dmax(sab[4], sab[5]), hicp__dmax(sab[6], sab[7]));
  const int noise = hicp__dmax(hicp__dmax(m03, m47), sab[8]) <= s_noise;
  double tr = (S[0][0] + S[1][1]) + S[2][2];
  double Q[4][4], V[4][4];
  Q[0][0] = tr;
  Q[0][1] = Q[1][0] = S[1][2] - S[2][1];
  Q[0][2] = Q[2][0] = S[2][0] - S[0][2];
  Q[0][3] = Q[3][0] = S[0][1] - S[1][0];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      Q[i + 1][j + 1] = (S[i][j] + S[j][i]) - (i == j ? tr : 0.0);
  hicp__jacobi4(Q, V);

  /* qtop = Q[top][top], and columns of V picked by comparing k with top:
   * no array indexed by a value known only at run time (see HICP_UNROLL) */
  int top = 0;
  double qtop = Q[0][0];
  double amax = 0.0;
  HICP_UNROLL
  for (int k = 0; k < 4; k++) {
    if (Q[k][k] > qtop) {
      top = k;
      qtop = Q[k][k];
    }
    double a = Q[k][k] < 0 ? -Q[k][k] : Q[k][k];
    if (a > amax)
      amax = a;
  }
  double q[4], vtop[4]; /* column top of V */
  HICP_UNROLL
  for (int i = 0; i < 4; i++) {
    vtop[i] = V[i][0];
    HICP_UNROLL
    for (int k = 1; k < 4; k++)
      vtop[i] = k == top ? V[i][k] : vtop[i];
  }
  int ntied = 0;
  HICP_UNROLL
  for (int k = 0; k < 4; k++)
    ntied += qtop - Q[k][k] <= HICP_DEGENERATE_GAP * amax;
  if (ntied > 1) {
    /* Project cur's rotation, q0, onto the span of the tied eigenvectors
     * (q0 only here and below: off the common path, which on the GPU is
     * one thread's chain). */
    double q0[4];
    hicp__rot_to_quat(cur->r, q0);
    *degenerate = 1;
    HICP_UNROLL
    for (int i = 0; i < 4; i++)
      q[i] = 0.0;
    HICP_UNROLL
    for (int k = 0; k < 4; k++) {
      if (qtop - Q[k][k] <= HICP_DEGENERATE_GAP * amax) {
        double c = ((V[0][k] * q0[0] + V[1][k] * q0[1]) + V[2][k] * q0[2]) + V[3][k] * q0[3];
        HICP_UNROLL
        for (int i = 0; i < 4; i++)
          q[i] = q[i] + c * V[i][k];
      }
    }
    double nq = ((q[0] * q[0] + q[1] * q[1]) + q[2] * q[2]) + q[3] * q[3];
    if (!(nq > 1e-24)) {
      HICP_UNROLL
      for (int i = 0; i < 4; i++)
        q[i] = vtop[i];
    }
  } else {
    HICP_UNROLL
    for (int i = 0; i < 4; i++)
      q[i] = vtop[i];
  }
  if (noise) {
    *degenerate = 1;
    hicp__rot_to_quat(cur->r, q);
  }
  /* q and -q are the same rotation: keep the one with q0 >= 0. */
  int flip = q[0] < 0.0;
  if (q[0] == 0.0)
    flip = q[1] < 0.0 || (q[1] == 0.0 && (q[2] < 0.0 || (q[2] == 0.0 && q[3] < 0.0)));
  double norm = HICP_SQRT(((q[0] * q[0] + q[1] * q[1]) + q[2] * q[2]) + q[3] * q[3]);
  for (int i = 0; i < 4; i++)
    q[i] = (flip ? -q[i] : q[i]) / norm;
  hicp__quat_to_rot(q, T->r);
  for (int i = 0; i < 3; i++)
    T->t[i] = my[i] - ((T->r[3 * i] * mp[0] + T->r[3 * i + 1] * mp[1]) + T->r[3 * i + 2] * mp[2]);
  return 0;
}

/* Stop tests, in the order they are checked after iteration k's
 * correspondences (k transform updates so far). */
typedef struct hicp__conv {
  double tol;          /* |mse change| < tol; tol <= 0: off */
  double mse_abs;      /* mse < mse_abs; 0: off */
  double step_t;       /* translation increment < step_t ... */
  double step_c;       /* ... and 1 - cos(rotation increment) < step_c; 0: off */
  int max_iter;
} hicp__conv;

enum { HICP__GO = -1 }; /* otherwise a hicp_stop value */

/* 1 - cos of the angle of R1 R0^T, as |R1 - R0|^2 / 4 (Frobenius; for
 * rotations |R1 - R0|^2 = 6 - 2 tr(R1 R0^T) = 4 (1 - cos)).  The sum of
 * squared differences is exactly 0 for equal matrices and keeps its
 * relative accuracy at small angles; the trace form, (3 - tr) / 2, left
 * an ulp of 3 (2.2e-16) from R's rounding where R had stopped changing,
 * above the threshold of any --min-step under 1.2e-6 degrees, which then
 * never stopped a registration (stop 54's review). */
HICP_PP double hicp__rot_step(const double r1[9], const double r0[9])
{
  double s = 0.0;
  for (int i = 0; i < 9; i++) {
    const double d = r1[i] - r0[i];
    s = s + d * d;
  }
  return s * 0.25;
}

HICP_PP double hicp__trans_step(const double t1[3], const double t0[3])
{
  double d0 = t1[0] - t0[0], d1 = t1[1] - t0[1], d2 = t1[2] - t0[2];
  return HICP_SQRT((d0 * d0 + d1 * d1) + d2 * d2);
}

/* Returns HICP__GO or the hicp_stop reason (values as in hicp.h). */
HICP_PP int hicp__check_stop(const hicp__conv *c, int k, double mse, double mse_prev,
                             const hicp__xf *T, const hicp__xf *T_prev)
{
  if (k >= 1 && c->tol > 0.0) {
    double dm = mse_prev - mse;
    if ((dm < 0 ? -dm : dm) < c->tol)
      return 1; /* HICP_STOP_MSE_CHANGE */
  }
  if (c->mse_abs > 0.0 && mse < c->mse_abs)
    return 2; /* HICP_STOP_MSE_ABS */
  /* A threshold of 0 is off and takes no part: the other one alone decides
   * (a 0 would otherwise need a step of exactly 0, or a rounding below it). */
  if (k >= 1 && (c->step_t > 0.0 || c->step_c > 0.0) &&
      (c->step_t <= 0.0 || hicp__trans_step(T->t, T_prev->t) < c->step_t) &&
      (c->step_c <= 0.0 || hicp__rot_step(T->r, T_prev->r) < c->step_c))
    return 3; /* HICP_STOP_INCREMENT */
  if (k >= c->max_iter)
    return 0; /* HICP_STOP_MAX_ITER */
  return HICP__GO;
}

/* The end of iteration k, on both backends: the inliers' mean squared
 * error (*mse), and whether the sums say to stop: no pairs, else the
 * convergence tests.  Returns HICP__GO or the hicp_stop reason.  Then,
 * only while it says go, hicp__iter_halt. */
HICP_PP int hicp__iter_stop(const hicp__conv *c, const hicp__partial *tot, int k, double mse_prev,
                            const hicp__xf *T, const hicp__xf *T_prev, double *mse)
{
  const double n_in = tot->v[HICP_PF_N_IN];
  *mse = n_in > 0.0 ? tot->v[HICP_PF_E2_IN] / n_in : 0.0;
  if (!(n_in > 0.0))
    return 4; /* HICP_STOP_NO_PAIRS */
  return hicp__check_stop(c, k, *mse, mse_prev, T, T_prev);
}

/* Whether to stop an iteration the sums would go on from: a cancel request
 * first, then the time budget (each backend knows them its own way; the
 * GPU's from a flag in host memory, read only when needed).  Returns
 * HICP__GO or the hicp_stop reason. */
HICP_PP int hicp__iter_halt(int canceled, int out_of_time)
{
  return canceled ? 5 /* HICP_STOP_CANCELED */ : out_of_time ? 6 /* HICP_STOP_TIMEOUT */ : HICP__GO;
}

/* The selection of iteration k before its sums: the distance cut, and
 * from filter_start on (when it is not negative) the sigma filter's window
 * [w_lo, w_hi], the bounds the last filtered iteration set.  The bounds of
 * this iteration and the trim's threshold are added once the sums are
 * known. */
HICP_PP hicp__select hicp__iter_select(double max_d2, int filter_start, int k, double w_lo,
                                       double w_hi)
{
  hicp__select s;
  s.max_d2 = max_d2;
  s.w_lo = w_lo;
  s.w_hi = w_hi;
  s.e_lo = 0.0;
  s.e_hi = 0.0;
  s.trim_e2 = 0.0;
  s.sigma_on = 0;
  s.trim_on = 0;
  s.want_e = filter_start >= 0 && k >= filter_start;
  return s;
}

/* Trimmed ICP keeps the ceil(trim * nc) nearest of nc candidate pairs, at
 * least one and at most all (a count in double, exact below 2^53).  The
 * product is taken a few ulps down first: a decimal fraction is stored a
 * little above or below itself, and 0.55 of 100 pairs, 55.000000000000007
 * in double, kept 56 (stop 54's review).  The shift, 4 ulps of the
 * product, moves only products within that of a whole count, which a
 * fraction written in decimal cannot be told from. */
HICP_PP double hicp__trim_keep(double trim, double nc)
{
  const double keep = ceil(trim * nc * (1.0 - 8.8817841970012523e-16)); /* 4 DBL_EPSILON */
  return keep < 1.0 ? 1.0 : keep > nc ? nc : keep;
}

/* The sigma filter's multiplier k for the user's S (filter_sigma), made
 * once per registration on the host (hicp__make_plan) and used as `sigma`
 * below by both backends.
 *
 * The window's deviation is that of the pairs inside the last bounds: a
 * distribution cut at mean +- k sd, whose deviation is smaller than the
 * whole one's.  Bounds of S times it would shrink at every iteration (for
 * inliers' distances with Gaussian noise, to nothing below S = 1.5, and by
 * a tenth each time at S = 2: docs/design.md).  For a normal distribution
 * cut at +- S of its deviation the cut one's variance is the fraction
 *     v(S) = 1 - 2 S phi(S) / (2 Phi(S) - 1)
 * of the whole one's, so bounds of k = S / sqrt(v(S)) times the window's
 * deviation stand at S of the distribution's own, a window that keeps its
 * width for any S: k(3) = 3.04, k(1) = 1.85, and k tends to sqrt(3) as S
 * goes to 0 (a uniform distribution's cut).
 *
 * The exponential cancels from v:  2 S phi(S) / (2 Phi(S) - 1) = 1 / M(S),
 * M(S) = sum over n >= 0 of S^2n / (2n+1)!!  (1, 3, 15, 105, ...), and
 * with r = (M - 1) / S^2, a sum of positive terms from 1/3,
 * k^2 = S^2 / (1 - 1/M) = S^2 + 1/r: + * / and sqrt alone, so k has the
 * same bits on every machine, which a libm's exp and erf would not
 * promise, and it is never below S.  From S = 16, 1/r is below 1e-50 and
 * k is S. */
HICP_PP double hicp__sigma_k(double S)
{
  if (!(S < 16.0))
    return S;
  const double s2 = S * S;
  double term = 1.0 / 3.0, r = term;
  for (int n = 1; n < 4096; n++) {
    term = term * s2 / (double)(2 * n + 3);
    r += term;
    if (term <= r * 0x1p-60)
      break;
  }
  return HICP_SQRT(s2 + 1.0 / r);
}

/* The sigma filter (thesis section 3.8): keep the pairs whose distance e
 * satisfies |e - mean| <= sigma * std.  The mean and standard deviation are
 * those of the pairs inside the previous iteration's bounds (the window),
 * so the bounds tighten onto the inliers' distribution as outliers drop
 * out, instead of being inflated by the outliers for ever. */
HICP_PP void hicp__sigma_bounds(const hicp__partial *tot, double sigma, hicp__select *s)
{
  double n = tot->v[HICP_PF_N_W];
  s->sigma_on = 1;
  if (!(n > 0.0)) {
    /* The window caught no pair: the pairs moved past it (equal distances
     * give a window of no width).
     * Start it afresh: keep every candidate now, and take the next
     * statistics over them all, rather than stop for want of pairs. */
    s->e_lo = -1.0e308;
    s->e_hi = 1.0e308;
    return;
  }
  double mean = tot->v[HICP_PF_E_W] / n;
  double m2 = tot->v[HICP_PF_E2_W] / n;
  double var = m2 - mean * mean;
  /* var is a difference of two nearly equal numbers, each off by up to a
   * few hundred ulps of m2 (the sums' depth: a lane's points, the lane
   * and chunk trees; at most about 300 additions).  Below 2^-40 of m2
   * (a deviation of 1e-6 of the distances) it is that rounding, not the
   * spread: distances equal to float precision (1e-7 of their size) gave
   * a var of either sign, and a deviation of 0 or of a few ulps, whose
   * bounds kept no pair, and the registration stopped for want of pairs.
   * The window always holds a pair within one deviation of its mean, and
   * the bounds are at least sqrt(3) deviations wide (hicp__sigma_k), so
   * with the deviation taken no smaller than its rounding they keep it. */
  const double var_floor = 0x1p-40 * m2;
  double sd = HICP_SQRT(var > var_floor ? var : var_floor);
  /* The mean of equal distances rounds to a neighbour of their value:
   * widen the window by far more than the sum's rounding, far less than
   * any real spread.  Older than the floor above, which now makes the
   * window wider than this by 1e6 (and distances that are all 0 are kept
   * by the inclusive bounds alone); it stays so that every run above the
   * floor keeps its bits. */
  double slack = 1e-12 * mean;
  s->e_lo = mean - sigma * sd - slack;
  s->e_hi = mean + sigma * sd + slack;
}

#endif /* HICP_PP_SOLVE_H */
