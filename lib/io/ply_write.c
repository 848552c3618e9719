/* ply_write.c: hicp_cloud_write_ply: binary little endian or ascii PLY,
 * written atomically (atomic.c).  Coordinates are float when the cloud's
 * origin is zero and the transform leaves the points near the origin,
 * double otherwise (the readers' rule, hicp__far_centre), so absolute
 * coordinates far from the origin keep their detail; text numbers carry
 * enough digits to round-trip. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cloud.h"
#include "fpenv.h"
#include "io/text.h"

typedef struct job {
  const hicp_cloud *c;
  const hicp_transform *T;
  int ascii;
  int dbl;
} job;

static void point(const job *j, size_t i, double out[3])
{
  double p[3];
  for (int d = 0; d < 3; d++) /* origin 0: keep -0.0 as it is */
    p[d] = j->dbl ? j->c->origin[d] + (double)j->c->xyz[3 * i + d] : (double)j->c->xyz[3 * i + d];
  if (j->T == NULL) {
    memcpy(out, p, sizeof p);
    return;
  }
  const double *m = j->T->m;
  for (int d = 0; d < 3; d++)
    out[d] = m[4 * d] * p[0] + m[4 * d + 1] * p[1] + m[4 * d + 2] * p[2] + m[4 * d + 3];
}

static void job_point(const void *arg, size_t i, double out[3])
{
  point(arg, i, out);
}

/* The n-byte value's bits, least significant byte first, by shifts, as
 * the readers take them (io/bytes.h): no byte order to know.  (configure's
 * AC_C_BIGENDIAN said "big" where its test programs failed to compile, and
 * such a build wrote every float byte-swapped under a little-endian header:
 * stop 67's review.) */
static int put_le(FILE *f, uint64_t bits, size_t n)
{
  unsigned char b[8];
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)(bits >> (8 * i));
  return fwrite(b, 1, n, f) == n ? 0 : -1;
}

static int put_double(FILE *f, double v)
{
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return put_le(f, u, 8);
}

static int put_float(FILE *f, float v)
{
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  return put_le(f, u, 4);
}

static int write_ply(hicp_context *ctx, FILE *f, void *arg)
{
  const job *j = arg;
  const hicp_cloud *c = j->c;
  const char *type = j->dbl ? "double" : "float";
  fprintf(f, "ply\nformat %s 1.0\ncomment written by hicp %s\n",
          j->ascii ? "ascii" : "binary_little_endian", HICP_VERSION_STRING);
  fprintf(f, "element vertex %zu\nproperty %s x\nproperty %s y\nproperty %s z\n", c->n, type, type,
          type);
  if (c->ntri > 0)
    fprintf(f, "element face %zu\nproperty list uchar int vertex_indices\n", c->ntri);
  fprintf(f, "end_header\n");
  int bad = 0;
  for (size_t i = 0; i < c->n && !bad; i++) {
    double p[3];
    point(j, i, p);
    /* A moved point beyond HICP_COORD_MAX would make a file hicp refuses
     * to read back: the write fails, and the temporary file goes. */
    const int rc = hicp__check_point(ctx, "moved", i, p[0], p[1], p[2]);
    if (rc != HICP_OK)
      return rc;
    if (j->ascii) {
      if (j->dbl)
        bad = fprintf(f, "%.17g %.17g %.17g\n", p[0], p[1], p[2]) < 0;
      else
        bad = fprintf(f, "%.9g %.9g %.9g\n", (double)(float)p[0], (double)(float)p[1],
                      (double)(float)p[2]) < 0;
    } else {
      for (int d = 0; d < 3 && !bad; d++) {
        bad = (j->dbl ? put_double(f, p[d]) : put_float(f, (float)p[d])) != 0;
      }
    }
  }
  for (size_t t = 0; t < c->ntri && !bad; t++) {
    if (j->ascii) {
      bad = fprintf(f, "3 %u %u %u\n", (unsigned)c->tri[3 * t], (unsigned)c->tri[3 * t + 1],
                    (unsigned)c->tri[3 * t + 2]) < 0;
    } else {
      unsigned char three = 3;
      bad = fwrite(&three, 1, 1, f) != 1;
      for (int k = 0; k < 3 && !bad; k++) /* an int32's bits */
        bad = put_le(f, c->tri[3 * t + k], 4) != 0;
    }
  }
  if (bad || ferror(f))
    return hicp__fail(ctx, HICP_EIO, "write failed");
  return HICP_OK;
}

static int cloud_write_ply(hicp_context *ctx, const hicp_cloud *cloud,
                           const hicp_transform *transform, const char *path,
                           hicp_ply_encoding encoding)
{
  if (cloud == NULL || path == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_cloud_write_ply: NULL argument");
  if (encoding != HICP_PLY_BINARY && encoding != HICP_PLY_ASCII)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_cloud_write_ply: unknown encoding %d", (int)encoding);
  if (transform != NULL && hicp_transform_check(transform) != HICP_OK)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_cloud_write_ply: the transform is not rigid");
  job j;
  j.c = cloud;
  j.T = transform;
  j.ascii = encoding == HICP_PLY_ASCII;
  j.dbl = cloud->origin[0] != 0.0 || cloud->origin[1] != 0.0 || cloud->origin[2] != 0.0;
  if (!j.dbl && transform != NULL && cloud->n > 0) {
    /* A pose that takes a scan from its sensor's frame into a map's (UTM
     * coordinates) moves float points far from the origin, where floats
     * would round them by more than the registration's error: those are
     * written as double, as the readers would keep them. */
    double lo[3], hi[3];
    for (size_t i = 0; i < cloud->n; i++) {
      double p[3];
      point(&j, i, p);
      for (int d = 0; d < 3; d++) {
        lo[d] = i == 0 || p[d] < lo[d] ? p[d] : lo[d];
        hi[d] = i == 0 || p[d] > hi[d] ? p[d] : hi[d];
      }
    }
    double mid[3];
    j.dbl = hicp__far_centre(lo, hi, cloud->n, job_point, &j, mid);
  }
  /* Numbers as PLY holds them, whatever locale the application chose (a
   * GUI's setlocale(LC_ALL, "") wrote "0,5", which no reader takes): the C
   * locale for this thread while it writes, then the caller's again. */
  const locale_t c = hicp__c_locale();
  const locale_t was = c != (locale_t)0 ? uselocale(c) : (locale_t)0;
  const int rc = hicp__atomic_write(ctx, path, write_ply, &j);
  if (was != (locale_t)0)
    uselocale(was);
  return rc;
}

int hicp_cloud_write_ply(hicp_context *ctx, const hicp_cloud *cloud,
                         const hicp_transform *transform, const char *path,
                         hicp_ply_encoding encoding)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = cloud_write_ply(ctx, cloud, transform, path, encoding);
  hicp__fpenv_leave(&fe);
  return rc;
}
