/* cloud.c: the point-cloud object: float coordinates relative to a double
 * origin, optional triangles. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud.h"
#include "fpenv.h"

void hicp__raw_cloud_free(hicp__raw_cloud *raw)
{
  free(raw->xyz);
  free(raw->tri);
  memset(raw, 0, sizeof *raw);
}

static void raw_point(const void *arg, size_t i, double p[3])
{
  memcpy(p, &((const hicp__raw_cloud *)arg)->xyz[3 * i], 3 * sizeof(double));
}

int hicp__cloud_from_raw(hicp_context *ctx, hicp__raw_cloud *raw, const char *name,
                         const double *origin, hicp_cloud **out)
{
  *out = NULL;
  int rc = HICP_OK;
  if (raw->n == 0)
    rc = hicp__fail(ctx, HICP_EEMPTY, "%s: no points", name);
  else if (raw->n >= UINT32_MAX)
    rc = hicp__fail(ctx, HICP_ELIMIT, "%s: %zu points are more than hicp supports", name, raw->n);
  double lo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  int all_float = 1;
  char what[160];
  snprintf(what, sizeof what, "%.*s:", hicp__utf8_prec(name, 150), name);
  for (size_t i = 0; i < raw->n && rc == HICP_OK; i++) {
    const double *v3 = &raw->xyz[3 * i];
    rc = hicp__check_point(ctx, what, i, v3[0], v3[1], v3[2]);
    for (int d = 0; d < 3 && rc == HICP_OK; d++) {
      double v = v3[d];
      if (origin != NULL && !(fabs(v - origin[d]) <= HICP_COORD_MAX))
        rc = hicp__fail(ctx, HICP_ERANGE,
                        "%s point %zu is more than %g from the origin it is read relative to "
                        "(%.17g, %.17g, %.17g)",
                        what, i, HICP_COORD_MAX, origin[0], origin[1], origin[2]);
      lo[d] = v < lo[d] ? v : lo[d];
      hi[d] = v > hi[d] ? v : hi[d];
      all_float &= (double)(float)v == v;
    }
  }
  hicp_cloud *c = NULL;
  if (rc == HICP_OK) {
    c = calloc(1, sizeof *c);
    float *xyz = malloc(sizeof(float) * 3 * raw->n);
    if (c == NULL || xyz == NULL) {
      free(c);
      free(xyz);
      c = NULL;
      rc = hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory for %zu points", name, raw->n);
    } else {
      c->xyz = xyz;
    }
  }
  if (rc == HICP_OK) {
    /* Origin policy (docs/design.md): keep float-exact data as it is; centre
     * data whose magnitude dwarfs its extent, where floats would lose detail. */
    double mid[3] = {0.0, 0.0, 0.0};
    if (origin == NULL && !all_float)
      (void)hicp__far_centre(lo, hi, raw->n, raw_point, raw, mid);
    for (int d = 0; d < 3; d++)
      c->origin[d] = origin != NULL ? origin[d] : mid[d];
    for (size_t i = 0; i < 3 * raw->n; i++)
      c->xyz[i] = (float)(raw->xyz[i] - c->origin[i % 3]);
    c->n = raw->n;
    c->tri = raw->tri;
    c->ntri = raw->ntri;
    raw->tri = NULL;
    *out = c;
  }
  hicp__raw_cloud_free(raw);
  return rc;
}

static int cloud_from_floats(hicp_context *ctx, const float *xyz, size_t n, size_t stride,
                             hicp_cloud **out)
{
  if (out == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_cloud_from_xyz: NULL output");
  *out = NULL;
  float *p;
  int rc = hicp__point_stride(ctx, "cloud", stride, 3 * sizeof(float), &stride);
  if (rc == HICP_OK)
    rc = hicp__copy_points(ctx, "cloud", xyz, n, stride, &p);
  if (rc != HICP_OK)
    return rc;
  hicp_cloud *c = calloc(1, sizeof *c);
  if (c == NULL) {
    free(p);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for a cloud");
  }
  c->xyz = p;
  c->n = n;
  *out = c;
  return HICP_OK;
}

int hicp_cloud_from_xyz(hicp_context *ctx, const float *xyz, size_t n, size_t stride,
                        hicp_cloud **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = cloud_from_floats(ctx, xyz, n, stride, out);
  hicp__fpenv_leave(&fe);
  return rc;
}

int hicp__null_origin(hicp_context *ctx, const char *fn, hicp_cloud **out)
{
  if (out != NULL)
    *out = NULL;
  return hicp__fail(ctx, HICP_EINVAL, "%s: NULL origin", fn);
}

int hicp__check_origin(hicp_context *ctx, const char *fn, const double origin[3])
{
  for (int d = 0; d < 3; d++)
    if (!(fabs(origin[d]) <= HICP_COORD_MAX))
      return hicp__fail(ctx, HICP_EINVAL, "%s: the origin must be finite and within %g", fn,
                        HICP_COORD_MAX);
  return HICP_OK;
}

/* hicp_cloud_from_xyz_double and, with an origin, its _relative form (fn). */
static int cloud_from_doubles(hicp_context *ctx, const char *fn, const double *xyz, size_t n,
                              size_t stride, const double *origin, hicp_cloud **out)
{
  if (out == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "%s: NULL output", fn);
  *out = NULL;
  if (origin != NULL && hicp__check_origin(ctx, fn, origin) != HICP_OK)
    return HICP_EINVAL;
  int rc = hicp__point_stride(ctx, "cloud", stride, 3 * sizeof(double), &stride);
  if (rc == HICP_OK)
    rc = hicp__check_count(ctx, "cloud", xyz, n);
  if (rc == HICP_OK)
    rc = hicp__check_span(ctx, "cloud", n, stride, 3 * sizeof(double));
  if (rc != HICP_OK)
    return rc;
  /* the double copy and the cloud's floats live together for a moment */
  rc = hicp__check_budget(ctx, (uint64_t)n * 36u, "the cloud");
  if (rc != HICP_OK)
    return rc;
  hicp__raw_cloud raw = {0};
  raw.xyz = malloc(sizeof(double) * 3 * n);
  if (raw.xyz == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory copying %zu cloud points", n);
  const unsigned char *base = (const unsigned char *)xyz;
  for (size_t i = 0; i < n; i++)
    memcpy(&raw.xyz[3 * i], base + i * stride, 3 * sizeof(double));
  raw.n = n;
  /* the readers' origin policy and checks (NaN, Inf, magnitude) */
  return hicp__cloud_from_raw(ctx, &raw, "cloud", origin, out);
}

int hicp_cloud_from_xyz_double(hicp_context *ctx, const double *xyz, size_t n, size_t stride,
                               hicp_cloud **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = cloud_from_doubles(ctx, "hicp_cloud_from_xyz_double", xyz, n, stride, NULL, out);
  hicp__fpenv_leave(&fe);
  return rc;
}

int hicp_cloud_from_xyz_double_relative(hicp_context *ctx, const double *xyz, size_t n,
                                        size_t stride, const double origin[3], hicp_cloud **out)
{
  static const char fn[] = "hicp_cloud_from_xyz_double_relative";
  if (origin == NULL)
    return hicp__null_origin(ctx, fn, out);
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = cloud_from_doubles(ctx, fn, xyz, n, stride, origin, out);
  hicp__fpenv_leave(&fe);
  return rc;
}

int hicp__point_stride(hicp_context *ctx, const char *what, size_t given, size_t point,
                       size_t *stride)
{
  *stride = given != 0 ? given : point;
  if (*stride < point)
    return hicp__fail(ctx, HICP_EINVAL, "%s stride %zu is smaller than a point (%zu bytes)", what,
                      *stride, point);
  return HICP_OK;
}

int hicp__check_span(hicp_context *ctx, const char *what, size_t n, size_t stride, size_t point)
{
  /* base + i * stride for the last point: no array of the caller's can
   * reach past PTRDIFF_MAX bytes, so such a stride (a negative difference
   * of two pointers, kept in a size_t) wrapped round the address space
   * and read bytes outside the caller's points (stop 65's review) */
  if (n > 1 && stride > ((size_t)PTRDIFF_MAX - point) / (n - 1))
    return hicp__fail(ctx, HICP_EINVAL,
                      "%s stride %zu is too large for %zu points: they would span more than "
                      "PTRDIFF_MAX bytes",
                      what, stride, n);
  return HICP_OK;
}

int hicp__check_count(hicp_context *ctx, const char *what, const void *xyz, size_t n)
{
  if (n == 0)
    return hicp__fail(ctx, HICP_EEMPTY, "the %s has no points", what);
  if (xyz == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "NULL %s points", what);
  if (n >= UINT32_MAX)
    return hicp__fail(ctx, HICP_ELIMIT, "%zu %s points: at most %u are supported", n, what,
                      (unsigned)(UINT32_MAX - 1));
  return HICP_OK;
}

/* Copies n points, stride bytes apart, into p, checking each. */
static int pack_points(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                       size_t stride, float *p)
{
  const unsigned char *base = (const unsigned char *)xyz;
  for (size_t i = 0; i < n; i++) {
    memcpy(&p[3 * i], base + i * stride, 3 * sizeof(float));
    int rc = hicp__check_point(ctx, what, i, p[3 * i], p[3 * i + 1], p[3 * i + 2]);
    if (rc != HICP_OK)
      return rc;
  }
  return HICP_OK;
}

static int copy_points(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                       size_t stride, int kept, float **out)
{
  *out = NULL;
  int rc = hicp__check_count(ctx, what, xyz, n);
  if (rc == HICP_OK)
    rc = hicp__check_span(ctx, what, n, stride, 3 * sizeof(float));
  if (rc != HICP_OK)
    return rc;
  char the[32];
  snprintf(the, sizeof the, "the %s", what);
  rc = hicp__check_budget(ctx, kept ? hicp__kept_copy_bytes(n) : (uint64_t)n * 12u, the);
  if (rc != HICP_OK)
    return rc;
  float *p = kept ? hicp__scratch(ctx, HICP_SCRATCH_SCAN, sizeof(float) * 3 * n)
                  : malloc(sizeof(float) * 3 * n);
  if (p == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory copying %zu %s points", n, what);
  rc = pack_points(ctx, what, xyz, n, stride, p);
  if (rc != HICP_OK) {
    if (!kept)
      free(p);
    return rc;
  }
  *out = p;
  return HICP_OK;
}

int hicp__copy_points_to(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                         size_t stride, float *dst)
{
  int rc = hicp__check_count(ctx, what, xyz, n);
  if (rc == HICP_OK)
    rc = hicp__check_span(ctx, what, n, stride, 3 * sizeof(float));
  return rc != HICP_OK ? rc : pack_points(ctx, what, xyz, n, stride, dst);
}

int hicp__copy_points(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                      size_t stride, float **out)
{
  return copy_points(ctx, what, xyz, n, stride, 0, out);
}

int hicp__copy_points_kept(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                           size_t stride, float **out)
{
  return copy_points(ctx, what, xyz, n, stride, 1, out);
}

size_t hicp_cloud_size(const hicp_cloud *c)
{
  return c != NULL ? c->n : 0;
}

const float *hicp_cloud_xyz(const hicp_cloud *c)
{
  return c != NULL ? c->xyz : NULL;
}

void hicp_cloud_origin(const hicp_cloud *c, double origin[3])
{
  if (origin == NULL) /* nothing to write, as hicp_transform_invert's NULL */
    return;
  for (int d = 0; d < 3; d++)
    origin[d] = c != NULL ? c->origin[d] : 0.0;
}

size_t hicp_cloud_triangle_count(const hicp_cloud *c)
{
  return c != NULL ? c->ntri : 0;
}

const uint32_t *hicp_cloud_triangles(const hicp_cloud *c)
{
  return c != NULL && c->ntri > 0 ? c->tri : NULL;
}

void hicp_cloud_destroy(hicp_cloud *c)
{
  if (c == NULL)
    return;
  free(c->xyz);
  free(c->tri);
  free(c);
}
