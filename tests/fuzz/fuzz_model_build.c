/* fuzz_model_build.c: libFuzzer harness for model building on arbitrary
 * points, with brute force as the oracle.  The first byte picks how the rest
 * becomes points: small integers (lattices full of duplicates, cospherical
 * and coplanar subsets: the inputs that break naive Delaunay code), the same
 * flattened onto a plane or a line, or raw floats (non-finite values and
 * values beyond HICP_COORD_MAX must be refused; tiny ones, whose squared
 * distances underflow, must still be answered exactly).  A built model
 * must pass the validator and answer every method
 * exactly: the same squared distance as brute force, and the smallest index
 * among ties. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#define MAX_POINTS 256

static void brute(const float *p, size_t n, const float q[3], uint32_t *bi, float *bd)
{
  *bi = 0;
  *bd = INFINITY;
  for (size_t i = 0; i < n; i++) {
    float dx = q[0] - p[3 * i], dy = q[1] - p[3 * i + 1], dz = q[2] - p[3 * i + 2];
    float d = (dx * dx + dy * dy) + dz * dz;
    if (d < *bd || i == 0) {
      *bd = d;
      *bi = (uint32_t)i;
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  hicp_context *ctx = fuzz_context(0);
  if (size < 1)
    return 0;
  const int mode = data[0] % 4;
  data++;
  size--;
  float p[3 * MAX_POINTS];
  size_t n = 0;
  int refusal = 0; /* the code for the first point the library must refuse */
  if (mode == 3) { /* raw floats */
    n = size / 12 < MAX_POINTS ? size / 12 : MAX_POINTS;
    memcpy(p, data, 12 * n);
    for (size_t i = 0; i < n && refusal == 0; i++) {
      const float *v = &p[3 * i];
      if (!isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2]))
        refusal = HICP_ENONFINITE;
      else if (fabsf(v[0]) > HICP_COORD_MAX || fabsf(v[1]) > HICP_COORD_MAX ||
               fabsf(v[2]) > HICP_COORD_MAX)
        refusal = HICP_ERANGE;
    }
  } else {
    n = size / 3 < MAX_POINTS ? size / 3 : MAX_POINTS;
    for (size_t i = 0; i < n; i++)
      for (int d = 0; d < 3; d++) {
        float v = (float)(int8_t)data[3 * i + d] * 0.125f;
        if ((mode == 1 && d == 2) || (mode == 2 && d > 0)) /* plane, line */
          v = (float)(int8_t)data[3 * i] * 0.0625f * (float)d;
        p[3 * i + d] = v;
      }
  }
  hicp_model_options mo;
  hicp_model_options_init(&mo);
  mo.validate = 1;
  hicp_model *m = NULL;
  int rc = hicp_model_build(ctx, p, n, 0, &mo, &m);
  if (n == 0) {
    if (rc != HICP_EEMPTY && rc != HICP_EINVAL)
      abort();
    return 0;
  }
  if (refusal != 0) {
    if (rc != refusal)
      abort();
    return 0;
  }
  if (rc != 0)
    abort(); /* every finite input must build (kd-tree fallback at worst) */
  /* queries: every point, midpoints of consecutive points, far points */
  float q[3 * (2 * MAX_POINTS + 2)];
  size_t nq = 0;
  for (size_t i = 0; i < n; i++, nq++)
    memcpy(&q[3 * nq], &p[3 * i], 12);
  for (size_t i = 0; i + 1 < n; i++, nq++)
    for (int d = 0; d < 3; d++)
      q[3 * nq + d] = 0.5f * (p[3 * i + d] + p[3 * i + 3 + d]);
  for (int d = 0; d < 3; d++) {
    q[3 * nq + d] = 1e4f * (float)(d + 1);
    q[3 * nq + 3 + d] = -3e3f;
  }
  nq += 2;
  /* The oracle works where the library does: a model of float points far
   * from zero next to their extent keeps them less an origin of its own
   * (exactly), and a query less the origin, in double, rounded to float
   * (hicp.h, hicp_nn_query).  For queries within a factor two of the
   * origin that is the absolute computation's bits too; for the far ones
   * below it need not be. */
  hicp_model_info info;
  hicp_model_info_init(&info);
  if (hicp_model_get_info(m, &info) != 0)
    abort();
  float pr[3 * MAX_POINTS], qr[3 * (2 * MAX_POINTS + 2)];
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++)
      pr[3 * i + d] = p[3 * i + d] - (float)info.origin[d];
  for (size_t i = 0; i < nq; i++)
    for (int d = 0; d < 3; d++)
      qr[3 * i + d] = info.origin[d] == 0.0 ? q[3 * i + d]
                                            : (float)((double)q[3 * i + d] - info.origin[d]);
  uint32_t idx[2 * MAX_POINTS + 2];
  float d2[2 * MAX_POINTS + 2];
  for (int method = 0; method <= 5; method++) {
    hicp_nn_options no;
    hicp_nn_options_init(&no);
    no.method = (hicp_nn_method)method;
    if (hicp_nn_query(ctx, m, q, nq, &no, idx, d2, NULL) != 0)
      abort();
    for (size_t i = 0; i < nq; i++) {
      uint32_t bi;
      float bd;
      brute(pr, n, &qr[3 * i], &bi, &bd);
      if (idx[i] != bi || memcmp(&d2[i], &bd, sizeof bd) != 0)
        abort();
    }
  }
  hicp_model_destroy(m);
  return 0;
}
