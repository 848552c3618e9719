/* start_table.c: the start table of a model (lib/model.h), where a walk
 * with no previous match begins: a grid of equal cubes over the model's
 * bounding box, each holding the vertex nearest its centre.
 *
 * Why: a registration's first pass has no previous matches, and its walks
 * began at the answers of kd descents, a dozen dependent loads each, one
 * point in eight (the others at the nearer of two such answers).  A tracker's frames
 * converge in a few iterations, so that pass was a third to a half of
 * their time.  A cell's vertex is one load away and lies within a cell
 * of the query: on scans near the surface the first pass took 0.4-1.0
 * steps a walk against 1.2-2.0, and 11-38% less time (docs/cpu-engine.md,
 * "A start table for the first pass").  Any start gives the same answer:
 * the table moves time, never a result. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "context.h"
#include "fpenv.h"
#include "model.h"
#include "pp/nn.h"

/* Cells per vertex, at most: 16 bytes a vertex.  Measured with 1, 4 and
 * 16 (docs/cpu-engine.md): 4 took most of 16's gain, and 1 lost it on
 * boeing, whose box is mostly empty. */
#define HICP_START_CELLS 4.0

/* Cells along an axis of extent e for cubes of side h. */
static double axis_cells(double e, double h)
{
  return floor(e / h) + 1.0;
}

/* Whether cubes of side h give too many cells: more than `want` in all,
 * or more than UINT32_MAX along the longest axis, of extent emax. */
static int grid_too_fine(const double ext[3], double emax, double want, double h)
{
  return axis_cells(ext[0], h) * axis_cells(ext[1], h) * axis_cells(ext[2], h) > want ||
         axis_cells(emax, h) > (double)UINT32_MAX;
}

/* The smallest cube side for a float scale (1/h below FLT_MAX, with room). */
#define HICP_START_MIN_SIDE 1e-37

/* The grid: cubes of the smallest side, on a ladder of 5% steps from the
 * box's volume over HICP_START_CELLS x nv, for which the cells are at most
 * that many, and at most UINT32_MAX along an axis (an axis of zero extent
 * still takes one cell).  A box too small for a float scale, or none, and
 * a ladder that does not reach (neither happens to a real model; a forged
 * file's box can be anything: the loader builds format 2 files' tables),
 * take one cell: every walk then starts at one vertex, and still ends at
 * its answer. */
static void grid_shape(hicp_model *m)
{
  double ext[3], emax = 0.0, vol = 1.0;
  for (int d = 0; d < 3; d++) {
    ext[d] = m->bbox_max[d] - m->bbox_min[d];
    emax = ext[d] > emax ? ext[d] : emax;
  }
  const double want = HICP_START_CELLS * (double)m->nv;
  double h = 0.0;
  if (emax > HICP_START_MIN_SIDE && emax < HUGE_VAL) {
    for (int d = 0; d < 3; d++)
      vol *= ext[d] > emax * 1e-6 ? ext[d] : emax * 1e-6;
    h = cbrt(vol / want);
    /* no smaller than the side that gives the longest axis want cells
     * (this also takes a volume that underflowed) */
    h = h >= emax / want ? h : emax / want;
    h = h >= HICP_START_MIN_SIDE ? h : HICP_START_MIN_SIDE;
    for (int step = 0; step < 2000 && grid_too_fine(ext, emax, want, h); step++)
      h *= 1.05;
    if (grid_too_fine(ext, emax, want, h))
      h = 0.0;
  }
  for (int d = 0; d < 3; d++) {
    m->start_dim[d] = h > 0.0 ? (uint32_t)axis_cells(ext[d], h) : 1u;
    m->start_lo[d] = (float)m->bbox_min[d];
  }
  m->start_inv = h > 0.0 ? (float)(1.0 / h) : 1.0f;
}

/* The centre of cell c along axis d, as hicp__start_axis maps back to it. */
static float cell_centre(const hicp_model *m, int d, uint32_t c)
{
  return m->start_lo[d] + ((float)c + 0.5f) / m->start_inv;
}

/* The exact nearest vertex to q (ties to the smaller id), by a walk on the
 * graph from `prev` (or the vertex nearest the centroid).  A walk that
 * reaches a hub (HICP_HUB_ROW: the centre of points on a sphere is joined
 * to all of them) finishes with the kd-tree's search, the table being
 * still unmade: the cells around a hub each read its whole row before (a
 * sphere of 160,000 points and its centre: 4.7 of its 6.7 s build). */
static uint32_t cell_vertex(const hicp__mview *v, const float q[3], uint32_t prev)
{
  return hicp__nn_walk(v, q, prev != HICP_NONE ? prev : v->zero_start, 0).v;
}

int hicp__start_table_build(hicp_context *ctx, hicp_model *m)
{
  grid_shape(m);
  const uint32_t nx = m->start_dim[0], ny = m->start_dim[1], nz = m->start_dim[2];
  uint32_t *t = hicp__model_own(m, malloc(sizeof *t * (size_t)nx * ny * nz));
  if (t == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the model's start table");
  const hicp__mview v = hicp__model_view(m); /* its start is still NULL */
  const long long rows = (long long)ny * nz;
  /* Each cell's exact nearest vertex (ties to the smaller id), so the
   * table depends only on the model: a walk on the graph (cell_vertex,
   * exact) from the previous cell's answer along the row, a few steps.
   * (The kd-tree's search from that candidate took 80 s on a 1M-point
   * model: a cell far from the surface has a ball of thousands of
   * vertices to rule out.) */
  const int threads = hicp__team_use(hicp__team_threads(ctx));
  (void)threads; /* a build without OpenMP drops the pragma that takes it */
#pragma omp parallel num_threads(threads)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
#pragma omp for schedule(dynamic, 16)
    for (long long r = 0; r < rows; r++) {
      const uint32_t y = (uint32_t)(r % ny), z = (uint32_t)(r / ny);
      uint32_t prev = HICP_NONE;
      for (uint32_t x = 0; x < nx; x++) {
        const float q[3] = {cell_centre(m, 0, x), cell_centre(m, 1, y), cell_centre(m, 2, z)};
        prev = cell_vertex(&v, q, prev);
        t[((size_t)z * ny + y) * nx + x] = prev;
      }
    }
    hicp__fpenv_leave(&fe);
  }
  m->start = t;
  return HICP_OK;
}
