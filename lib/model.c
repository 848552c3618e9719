/* model.c: the model object's life cycle, options, facts and the view the
 * per-point code uses. */
#include "config.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloud.h"
#include "fpenv.h"
#include "model.h"
#include "pp/nn.h"

static atomic_uint_fast64_t next_uid = 1;

hicp_model *hicp__model_new(void)
{
  hicp_model *m = calloc(1, sizeof *m);
  if (m != NULL)
    m->uid = atomic_fetch_add(&next_uid, 1);
  return m;
}

void *hicp__model_own(hicp_model *m, void *block)
{
  if (block == NULL)
    return NULL;
  if (m->nowned == (int)(sizeof m->owned / sizeof m->owned[0])) {
    free(block);
    return NULL;
  }
  m->owned[m->nowned++] = block;
  return block;
}

void hicp_model_destroy(hicp_model *m)
{
  if (m == NULL)
    return;
  for (int i = 0; i < m->nowned; i++)
    free(m->owned[i]);
  free(m);
}

/* The guards' centre c (in float) and their distance R from it, from the
 * kd-tree's box (computed from the points at build and load, never read
 * from a file, so a model's guards are the same wherever it is used): c
 * the box's centre, R = 2 sqrt(3) h, h the box's longest side (the box's
 * corners are at most sqrt(3) h / 2 from c).  docs/design.md, "Guards". */
static double guard_frame(const hicp_model *m, float c[3])
{
  double h = 0.0;
  for (int d = 0; d < 3; d++) {
    c[d] = (float)(0.5 * ((double)m->kd_lo[d] + (double)m->kd_hi[d]));
    const double side = (double)m->kd_hi[d] - (double)m->kd_lo[d];
    h = side > h ? side : h;
  }
  return 2.0 * sqrt(3.0) * h;
}

uint32_t hicp__model_guards(const hicp_model *m, double (*g)[3])
{
  float c[3];
  const double r = guard_frame(m, c);
  /* k x k per face: about one guard for 64 vertices, 96 to 4,056 */
  uint32_t k = 4;
  while (k < HICP_GUARD_GRID_MAX && 6ull * k * k * 64 < m->nv)
    k++;
  uint32_t n = 0;
  for (int face = 0; face < 6; face++)
    for (uint32_t i = 0; i < k; i++)
      for (uint32_t j = 0; j < k; j++) {
        const int axis = face / 2;
        double u[3];
        u[axis] = face % 2 ? 1.0 : -1.0;
        u[(axis + 1) % 3] = (2.0 * i + 1.0) / k - 1.0;
        u[(axis + 2) % 3] = (2.0 * j + 1.0) / k - 1.0;
        const double len = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        for (int d = 0; d < 3; d++)
          g[n][d] = (double)c[d] + r * (u[d] / len);
        n++;
      }
  return n;
}

hicp__mview hicp__model_view(const hicp_model *m)
{
  hicp__mview v;
  v.vtx = m->vtx;
  v.row = m->has_delaunay ? m->row : NULL;
  v.nbr = m->has_delaunay ? m->nbr : NULL;
  v.kd = m->kd;
  v.kd_pts = m->kd_pts;
  for (int d = 0; d < 3; d++) {
    v.kd_lo[d] = m->kd_lo[d];
    v.kd_hi[d] = m->kd_hi[d];
  }
  v.nv = m->nv;
  v.zero_start = m->zero_start;
  v.safe_r2 = m->has_delaunay ? m->safe_r2 : NULL;
  v.ecode = m->has_delaunay ? m->ecode : NULL;
  v.eunit = m->has_delaunay ? m->eunit : NULL;
  v.start = m->has_delaunay ? m->start : NULL;
  for (int d = 0; d < 3; d++) {
    v.start_dim[d] = m->start_dim[d];
    v.start_lo[d] = m->start_lo[d];
  }
  v.start_inv = m->start_inv;
  /* the walk's test (hicp__guard_safe, 0.45 R) and the slack's cut
   * (hicp__guard_cut, 0.03 R) leave 4% of R for rounding; beyond FLT_MAX,
   * FLT_MAX.  A graph without guards has every Delaunay edge, and no
   * limit: the test always holds for finite queries (and the vector back
   * skips it), the cut cuts nothing. */
  const double r = guard_frame(m, v.guard_c);
  const int guarded = m->has_delaunay && m->guards != 0;
  v.guard_r2 = guarded ? hicp__round_down((0.45 * r) * (0.45 * r)) : HICP_FLT_INF;
  v.guard_slack = guarded ? hicp__round_down(0.03 * r) : HICP_FLT_INF;
  return v;
}

void hicp_model_options_init_sized(hicp_model_options *opts, size_t size)
{
  hicp_model_options d;
  memset(&d, 0, sizeof d);
  d.delaunay = 1;
  d.validate = 0;
  hicp__init_sized(opts, size, &d, sizeof d);
}

void hicp_model_info_init_sized(hicp_model_info *info, size_t size)
{
  hicp__init_sized(info, size, NULL, 0);
}

void hicp__model_bytes(const hicp_model *m, hicp_model_info *info)
{
  /* rows, neighbours, edge-length codes and units, safe radii */
  info->bytes_graph = m->has_delaunay ? sizeof(uint32_t) * ((uint64_t)m->nv + 1 + m->nedges) +
                                            m->nedges + 2 * sizeof(float) * (uint64_t)m->nv
                                      : 0;
  info->bytes_points = sizeof(hicp__vtx) * (uint64_t)m->nv + sizeof(uint32_t) * m->npoints;
  info->bytes_kdtree =
      sizeof(hicp__kdnode) * (uint64_t)m->nkd + sizeof(hicp__vtx) * (uint64_t)m->nv;
  const uint64_t start = m->has_delaunay && m->start != NULL
                             ? sizeof(uint32_t) * (uint64_t)m->start_dim[0] * m->start_dim[1] *
                                   m->start_dim[2]
                             : 0;
  info->bytes_start = start;
  info->bytes_total =
      info->bytes_graph + info->bytes_points + info->bytes_kdtree + start + sizeof *m;
}

static int model_get_info(const hicp_model *m, hicp_model_info *out)
{
  if (m == NULL || out == NULL || out->struct_size < offsetof(hicp_model_info, fallback_reason))
    return HICP_EINVAL;
  hicp_model_info info;
  memset(&info, 0, sizeof info);
  info.points = m->npoints;
  info.vertices = m->nv;
  info.duplicates = m->npoints - m->nv;
  info.edges = m->has_delaunay ? m->nedges : 0;
  info.has_delaunay = m->has_delaunay;
  if (m->has_delaunay) {
    for (uint32_t v = 0; v < m->nv; v++) {
      uint32_t d = m->row[v + 1] - m->row[v];
      info.max_degree = d > info.max_degree ? d : info.max_degree;
      info.degree_hist[d < HICP_DEGREE_BINS ? d : HICP_DEGREE_BINS - 1]++;
    }
    info.mean_degree = m->nv ? (double)m->nedges / m->nv : 0.0;
  }
  hicp__model_bytes(m, &info);
  info.build_ms = m->build_ms;
  info.qhull_ms = m->qhull_ms;
  for (int i = 0; i < 3; i++) {
    info.origin[i] = m->origin[i];
    info.bbox_min[i] = m->origin[i] + m->bbox_min[i];
    info.bbox_max[i] = m->origin[i] + m->bbox_max[i];
  }
  memcpy(info.fallback_reason, m->fallback, sizeof info.fallback_reason);
  info.guards = m->has_delaunay ? m->guards : 0;
  info.fallback_reason[sizeof info.fallback_reason - 1] = '\0';
  size_t n = out->struct_size < sizeof info ? out->struct_size : sizeof info;
  info.struct_size = out->struct_size;
  memcpy(out, &info, n);
  return HICP_OK;
}

int hicp_model_get_info(const hicp_model *m, hicp_model_info *out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = model_get_info(m, out);
  hicp__fpenv_leave(&fe);
  return rc;
}

static int model_build_cloud(hicp_context *ctx, const hicp_cloud *cloud,
                             const hicp_model_options *opts, hicp_model **out)
{
  if (out != NULL)
    *out = NULL; /* as every constructor leaves it on failure */
  if (cloud == NULL || out == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_model_build_cloud: NULL argument");
  int rc = hicp_model_build(ctx, cloud->xyz, cloud->n, 0, opts, out);
  /* The model's own origin is 0 but for far float points (model_build.c,
   * far_origin), which a cloud holding an origin does not have */
  for (int d = 0; rc == HICP_OK && d < 3; d++)
    (*out)->origin[d] += cloud->origin[d];
  return rc;
}

int hicp_model_build_cloud(hicp_context *ctx, const hicp_cloud *cloud,
                           const hicp_model_options *opts, hicp_model **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = model_build_cloud(ctx, cloud, opts, out);
  hicp__fpenv_leave(&fe);
  return rc;
}

static int model_open(hicp_context *ctx, const char *path, const hicp_model_options *opts,
                      hicp_model **out)
{
  if (path == NULL || out == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_model_open: NULL argument");
  *out = NULL;
  /* Peek at the magic: model files are loaded whole, at their offsets.  Only
   * a regular file is peeked at (and only one can be loaded): from a pipe the peek
   * consumed what the cloud reader then missed, or waited for a writer. */
  unsigned char head[16] = {0};
  size_t got = 0;
  /* Close-on-exec, as every reader opens.  Should the name have become a
   * FIFO since the stat, O_NONBLOCK keeps the open from waiting and pread
   * fails on it (ESPIPE) without taking a byte. */
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
      ssize_t r = pread(fd, head, sizeof head, 0);
      got = r > 0 ? (size_t)r : 0;
      close(fd);
    }
  }
  /* a model file cut within its magic is a model file too short, which the
   * loader says, not a point cloud of unknown format */
  const int cut = got >= 4 && got < 8 && memcmp(head, "HICPMDL", got) == 0;
  if (hicp__model_is_file(head, got) || cut) {
    /* A saved model carries the graph it was built with: the options can
     * ask for a check, but not for a different build. */
    hicp_model_options o;
    if (hicp__model_options_read(ctx, opts, &o) != HICP_OK)
      return HICP_EINVAL;
    hicp_model *m = NULL;
    int rc = hicp_model_load(ctx, path, &m);
    if (rc == HICP_OK && !o.delaunay && m->has_delaunay)
      rc = hicp__fail(ctx, HICP_EINVAL,
                      "%s: a saved model keeps its Delaunay graph; build from the point cloud "
                      "for a model without one", path);
    if (rc == HICP_OK && o.validate && (rc = hicp__model_validate(ctx, m)) != HICP_OK) {
      /* a violation in a file is a malformed file, not a bug in hicp */
      rc = rc == HICP_EINTERNAL ? HICP_EFORMAT : rc;
      hicp__fail_prefix(ctx, rc, path);
    }
    if (rc != HICP_OK) {
      hicp_model_destroy(m);
      return rc;
    }
    *out = m;
    return HICP_OK;
  }
  hicp_cloud *cloud = NULL;
  int rc = hicp_cloud_read(ctx, path, HICP_FORMAT_AUTO, &cloud);
  if (rc != HICP_OK)
    return rc;
  rc = hicp_model_build_cloud(ctx, cloud, opts, out);
  hicp_cloud_destroy(cloud);
  if (rc != HICP_OK)
    hicp__fail_prefix(ctx, rc, path);
  return rc;
}

int hicp_model_open(hicp_context *ctx, const char *path, const hicp_model_options *opts,
                    hicp_model **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = model_open(ctx, path, opts, out);
  hicp__fpenv_leave(&fe);
  return rc;
}
