/* synth.c: see synth.h. */
#include "config.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "synth.h"

static uint64_t rotl(uint64_t x, int k)
{
  return (x << k) | (x >> (64 - k));
}

void synth_seed(synth_rng *r, uint64_t seed)
{
  for (int i = 0; i < 4; i++) { /* splitmix64 */
    seed += 0x9e3779b97f4a7c15ull;
    uint64_t z = seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    r->s[i] = z ^ (z >> 31);
  }
}

uint64_t synth_next(synth_rng *r)
{ /* xoshiro256** */
  uint64_t *s = r->s;
  uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return out;
}

double synth_uniform(synth_rng *r)
{
  return (double)(synth_next(r) >> 11) * 0x1.0p-53;
}

double synth_normal(synth_rng *r)
{
  double u1 = synth_uniform(r), u2 = synth_uniform(r);
  if (u1 < 1e-300)
    u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

void synth_rotation(double roll, double pitch, double yaw, double r[9])
{
  /* whole turns off first (fmod is exact, and leaves angles within one
   * turn as they are): 1e308 degrees times pi overflowed to inf, and cos
   * of it is NaN */
  roll = fmod(roll, 360.0);
  pitch = fmod(pitch, 360.0);
  yaw = fmod(yaw, 360.0);
  double a = roll * M_PI / 180, b = pitch * M_PI / 180, c = yaw * M_PI / 180;
  double ca = cos(a), sa = sin(a), cb = cos(b), sb = sin(b), cc = cos(c), sc = sin(c);
  r[0] = cc * cb;
  r[1] = cc * sb * sa - sc * ca;
  r[2] = cc * sb * ca + sc * sa;
  r[3] = sc * cb;
  r[4] = sc * sb * sa + cc * ca;
  r[5] = sc * sb * ca - cc * sa;
  r[6] = -sb;
  r[7] = cb * sa;
  r[8] = cb * ca;
}

int synth_sample_mesh(const float *xyz, size_t nv, const double origin[3], const uint32_t *tri,
                      size_t ntri, size_t count, synth_rng *r, double *out)
{
  double *cum = malloc(sizeof(double) * (ntri + 1));
  if (cum == NULL)
    return -2;
  cum[0] = 0.0;
  for (size_t t = 0; t < ntri; t++) {
    const float *a = &xyz[3 * (size_t)tri[3 * t]], *b = &xyz[3 * (size_t)tri[3 * t + 1]],
                *c = &xyz[3 * (size_t)tri[3 * t + 2]];
    double u[3], v[3];
    for (int d = 0; d < 3; d++) {
      u[d] = (double)b[d] - a[d];
      v[d] = (double)c[d] - a[d];
    }
    double x = u[1] * v[2] - u[2] * v[1], y = u[2] * v[0] - u[0] * v[2], z = u[0] * v[1] - u[1] * v[0];
    int ok = tri[3 * t] < nv && tri[3 * t + 1] < nv && tri[3 * t + 2] < nv;
    cum[t + 1] = cum[t] + (ok ? 0.5 * sqrt(x * x + y * y + z * z) : 0.0);
  }
  double total = cum[ntri];
  if (!(total > 0.0)) {
    free(cum);
    return -1;
  }
  /* The samples are written face by face in the mesh's order (in the order
   * drawn within a face), as a scanner writes its points in its scan order:
   * drawn order is random, which no sensor gives, and which slows a kd-tree
   * search several times over through its cache misses (a 200,000-point
   * model and its scan: Open3D 2.7 times, PCL 1.4 times; stop 56's review
   * of bench/run).  The draws are made twice from the same state, first to
   * count each face's samples, then to place them, so the points and the
   * generator's state after them are what one pass in drawn order gave. */
  size_t *at = calloc(ntri + 1, sizeof *at);
  if (at == NULL) {
    free(cum);
    return -2;
  }
  const synth_rng start = *r;
  for (int placing = 0; placing < 2; placing++) {
    *r = start;
    for (size_t i = 0; i < count; i++) {
      double target = synth_uniform(r) * total;
      size_t lo = 0, hi = ntri; /* first t with cum[t + 1] > target */
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cum[mid + 1] > target)
          hi = mid;
        else
          lo = mid + 1;
      }
      size_t t = lo < ntri ? lo : ntri - 1;
      double s1 = sqrt(synth_uniform(r)), s2 = synth_uniform(r);
      if (!placing) {
        at[t + 1]++;
        continue;
      }
      double wa = 1.0 - s1, wb = s1 * (1.0 - s2), wc = s1 * s2;
      const size_t j = at[t]++;
      for (int d = 0; d < 3; d++)
        out[3 * j + d] = origin[d] + wa * xyz[3 * (size_t)tri[3 * t] + d] +
                         wb * xyz[3 * (size_t)tri[3 * t + 1] + d] +
                         wc * xyz[3 * (size_t)tri[3 * t + 2] + d];
    }
    if (!placing) /* face t's samples start at at[t] */
      for (size_t t = 0; t < ntri; t++)
        at[t + 1] += at[t];
  }
  free(at);
  free(cum);
  return 0;
}

size_t synth_visible(const double *p, size_t n, const double toward[3], unsigned char *keep)
{
  /* scaled by the largest component first, so that a direction's length
   * neither underflows nor overflows: (1e-200, 1e-200, 1e-200) is (1, 1, 1) */
  const double big = fmax(fabs(toward[0]), fmax(fabs(toward[1]), fabs(toward[2])));
  double w[3] = {toward[0] / big, toward[1] / big, toward[2] / big};
  double len = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
  if (n == 0 || !(big > 0.0 && big < HUGE_VAL) || !(len > 0.0)) {
    memset(keep, 1, n);
    return n;
  }
  for (int d = 0; d < 3; d++)
    w[d] /= len;
  /* u, v span the image plane. */
  double a[3] = {fabs(w[0]) < 0.9 ? 1.0 : 0.0, fabs(w[0]) < 0.9 ? 0.0 : 1.0, 0.0};
  double u[3] = {a[1] * w[2] - a[2] * w[1], a[2] * w[0] - a[0] * w[2], a[0] * w[1] - a[1] * w[0]};
  double ul = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
  for (int d = 0; d < 3; d++)
    u[d] /= ul;
  double v[3] = {w[1] * u[2] - w[2] * u[1], w[2] * u[0] - w[0] * u[2], w[0] * u[1] - w[1] * u[0]};
  double umin = HUGE_VAL, umax = -HUGE_VAL, vmin = HUGE_VAL, vmax = -HUGE_VAL;
  for (size_t i = 0; i < n; i++) {
    const double *q = &p[3 * i];
    double pu = q[0] * u[0] + q[1] * u[1] + q[2] * u[2], pv = q[0] * v[0] + q[1] * v[1] + q[2] * v[2];
    umin = fmin(umin, pu);
    umax = fmax(umax, pu);
    vmin = fmin(vmin, pv);
    vmax = fmax(vmax, pv);
  }
  /* Front and back surfaces project onto the same cells: about four points
   * per cell leaves roughly two in front.  A projection with (almost) no
   * area, a line seen side-on, takes four points a cell along its length:
   * cells from the area alone would be far too small, and their count
   * beyond any integer (a slanted line seen from +z kept 1 point of
   * 1,000).  All points on one spot: one cell, the front point kept. */
  const double du = umax - umin, dv = vmax - vmin;
  double cell = fmax(sqrt(du * dv * 4.0 / (double)n), fmax(du, dv) * 4.0 / (double)n);
  if (!(cell > 0.0))
    cell = DBL_MIN;
  /* counted in double: no cast of a count beyond size_t */
  const double cells = (floor(du / cell) + 1.0) * (floor(dv / cell) + 1.0);
  if (!(cells <= 64.0 * 1024.0 * 1024.0)) {
    memset(keep, 1, n);
    return n;
  }
  size_t nu = (size_t)(du / cell) + 1, nvv = (size_t)(dv / cell) + 1;
  double *front = malloc(sizeof(double) * nu * nvv);
  size_t *cellof = malloc(sizeof(size_t) * n);
  double *depth = malloc(sizeof(double) * n);
  if (front == NULL || cellof == NULL || depth == NULL) {
    free(front);
    free(cellof);
    free(depth);
    return SIZE_MAX;
  }
  for (size_t c = 0; c < nu * nvv; c++)
    front[c] = -HUGE_VAL;
  for (size_t i = 0; i < n; i++) {
    const double *q = &p[3 * i];
    double pu = q[0] * u[0] + q[1] * u[1] + q[2] * u[2], pv = q[0] * v[0] + q[1] * v[1] + q[2] * v[2];
    size_t cu = (size_t)((pu - umin) / cell), cv = (size_t)((pv - vmin) / cell);
    cu = cu < nu ? cu : nu - 1;
    cv = cv < nvv ? cv : nvv - 1;
    cellof[i] = cv * nu + cu;
    depth[i] = q[0] * w[0] + q[1] * w[1] + q[2] * w[2]; /* larger = nearer the camera */
    if (depth[i] > front[cellof[i]])
      front[cellof[i]] = depth[i];
  }
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) {
    keep[i] = depth[i] >= front[cellof[i]] - cell;
    kept += keep[i];
  }
  free(front);
  free(cellof);
  free(depth);
  return kept;
}
