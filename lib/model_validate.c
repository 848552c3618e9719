/* model_validate.c: checks a model's invariants (used by the tests, by
 * hicp_model_options.validate, and after loading a model file).  Each
 * failure names the first violation found. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static int validate_graph(hicp_context *ctx, const hicp_model *m)
{
  if (m->row[0] != 0 || m->row[m->nv] != m->nedges)
    return hicp__fail(ctx, HICP_EINTERNAL, "graph: row offsets do not span the edge list");
  /* Linear in the edges, whatever the degrees: a vertex joined to all
   * others (the centre of points on a sphere) made the repeat and reverse
   * edge checks quadratic in its degree.  stamp[u] = the last row u was
   * seen in; the reverse edges are checked against the transposed graph:
   * rows without repeats are symmetric iff each vertex's in-neighbours are
   * among its out-neighbours (the totals are equal, so then every set is). */
  uint32_t *stamp = malloc(sizeof(uint32_t) * (m->nv ? m->nv : 1));
  uint32_t *trow = calloc((size_t)m->nv + 1, sizeof(uint32_t));
  uint32_t *tnbr = malloc(sizeof(uint32_t) * (m->nedges ? m->nedges : 1));
  int rc = HICP_OK;
  if (stamp == NULL || trow == NULL || tnbr == NULL) {
    rc = hicp__fail(ctx, HICP_ENOMEM, "out of memory validating the graph");
    goto out;
  }
  for (uint32_t v = 0; v < m->nv; v++)
    stamp[v] = HICP_NONE;
  for (uint32_t v = 0; v < m->nv && rc == HICP_OK; v++) {
    if (m->row[v + 1] < m->row[v]) {
      rc = hicp__fail(ctx, HICP_EINTERNAL, "graph: row %u has a negative length", (unsigned)v);
      break;
    }
    if (m->row[v + 1] == m->row[v]) {
      rc = hicp__fail(ctx, HICP_EINTERNAL, "graph: vertex %u has no neighbour", (unsigned)v);
      break;
    }
    for (uint32_t e = m->row[v]; e < m->row[v + 1]; e++) {
      uint32_t u = m->nbr[e];
      if (u >= m->nv) {
        rc = hicp__fail(ctx, HICP_EINTERNAL, "graph: vertex %u has neighbour %u out of range",
                        (unsigned)v, (unsigned)u);
        break;
      }
      if (u == v) {
        rc = hicp__fail(ctx, HICP_EINTERNAL, "graph: vertex %u is its own neighbour",
                        (unsigned)v);
        break;
      }
      if (e > m->row[v] && m->ecode[e - 1] > m->ecode[e]) {
        rc = hicp__fail(ctx, HICP_EINTERNAL, "graph: row %u is not sorted by edge length",
                        (unsigned)v);
        break;
      }
      if (stamp[u] == v) {
        rc = hicp__fail(ctx, HICP_EINTERNAL, "graph: row %u repeats neighbour %u", (unsigned)v,
                        (unsigned)u);
        break;
      }
      stamp[u] = v;
      if ((double)m->ecode[e] * (double)m->eunit[v] >
          sqrt(hicp__vtx_dist2(&m->vtx[v], &m->vtx[u]))) {
        rc = hicp__fail(ctx, HICP_EINTERNAL,
                        "graph: edge %u->%u has a length code above its length", (unsigned)v,
                        (unsigned)u);
        break;
      }
      trow[u + 1]++;
    }
  }
  if (rc == HICP_OK) {
    for (uint32_t v = 0; v < m->nv; v++)
      trow[v + 1] += trow[v];
    for (uint32_t v = 0; v < m->nv; v++)
      for (uint32_t e = m->row[v]; e < m->row[v + 1]; e++)
        tnbr[trow[m->nbr[e]]++] = v; /* trow[u] ends at row u's end */
    for (uint32_t v = 0; v < m->nv; v++)
      stamp[v] = HICP_NONE;
    for (uint32_t v = 0; v < m->nv && rc == HICP_OK; v++) {
      const uint32_t tb = v ? trow[v - 1] : 0, te = trow[v];
      for (uint32_t e = m->row[v]; e < m->row[v + 1]; e++)
        stamp[m->nbr[e]] = v;
      for (uint32_t k = tb; k < te && rc == HICP_OK; k++)
        if (stamp[tnbr[k]] != v)
          rc = hicp__fail(ctx, HICP_EINTERNAL, "graph: edge %u->%u has no reverse edge",
                          (unsigned)tnbr[k], (unsigned)v);
    }
  }
out:
  free(stamp);
  free(trow);
  free(tnbr);
  if (rc != HICP_OK)
    return rc;
  /* Safe radii: never beyond half the distance to the nearest neighbour. */
  for (uint32_t v = 0; v < m->nv; v++) {
    const double best = hicp__shortest_edge2(m, v);
    if (!(m->safe_r2[v] >= 0.0f) || (double)m->safe_r2[v] > 0.25 * best * (1.0 - 2e-5))
      return hicp__fail(ctx, HICP_EINTERNAL, "graph: vertex %u has an unsafe safe radius",
                        (unsigned)v);
  }
  /* Reachability: breadth-first from vertex 0. */
  uint32_t *queue = malloc(sizeof(uint32_t) * m->nv);
  unsigned char *seen = calloc(m->nv, 1);
  if (queue == NULL || seen == NULL) {
    free(queue);
    free(seen);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory validating the graph");
  }
  uint32_t head = 0, tail = 0;
  queue[tail++] = 0;
  seen[0] = 1;
  while (head < tail) {
    uint32_t v = queue[head++];
    for (uint32_t e = m->row[v]; e < m->row[v + 1]; e++)
      if (!seen[m->nbr[e]]) {
        seen[m->nbr[e]] = 1;
        queue[tail++] = m->nbr[e];
      }
  }
  free(queue);
  free(seen);
  if (tail != m->nv)
    return hicp__fail(ctx, HICP_EINTERNAL, "graph: only %u of %u vertices are reachable",
                      (unsigned)tail, (unsigned)m->nv);
  return HICP_OK;
}

static int validate_points(hicp_context *ctx, const hicp_model *m)
{
  if (m->nv == 0 || m->nv > m->npoints)
    return hicp__fail(ctx, HICP_EINTERNAL, "points: %u vertices for %llu points",
                      (unsigned)m->nv, (unsigned long long)m->npoints);
  for (uint32_t v = 0; v < m->nv; v++) {
    uint32_t id = m->vtx[v].id;
    if (id >= m->npoints || m->vertex_of[id] != v)
      return hicp__fail(ctx, HICP_EINTERNAL, "points: vertex %u does not map back to itself",
                        (unsigned)v);
  }
  for (uint64_t i = 0; i < m->npoints; i++) {
    uint32_t v = m->vertex_of[i];
    if (v >= m->nv || m->vtx[v].id > i)
      return hicp__fail(ctx, HICP_EINTERNAL,
                        "points: point %llu maps to a vertex that is not its smallest duplicate",
                        (unsigned long long)i);
  }
  if (m->zero_start >= m->nv)
    return hicp__fail(ctx, HICP_EINTERNAL, "points: the zero-walk start is out of range");
  return HICP_OK;
}

/* The kd-tree, walked from its root: every node reached exactly once (a
 * node reached twice or never would hide vertices from the searches), the
 * leaves covering every vertex once with its own coordinates, each inside
 * the box its ancestors' splits leave it (hicp__nn_kdtree prunes by the
 * splits, so a wrong one would drop the nearest vertex without a trace).
 * A split NaN or outside its own box leaves a box that no point fits. */
static int validate_kdtree(hicp_context *ctx, const hicp_model *m)
{
  unsigned char *seen = calloc(m->nv, 1), *reached = calloc(m->nkd, 1);
  if (seen == NULL || reached == NULL) {
    free(seen);
    free(reached);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory validating the kd-tree");
  }
  /* depth-first, each entry a node and its box: the stack holds at most
   * one entry per level, plus one */
  struct {
    uint32_t node;
    float lo[3], hi[3];
  } stack[HICP_KD_MAX_DEPTH + 1];
  int sp = 0, rc = HICP_OK;
  uint64_t covered = 0;
  if (m->nkd > 0) {
    stack[0].node = 0;
    for (int d = 0; d < 3; d++) {
      stack[0].lo[d] = -HICP_FLT_INF;
      stack[0].hi[d] = HICP_FLT_INF;
    }
    sp = 1;
  }
  while (sp > 0 && rc == HICP_OK) {
    const uint32_t n = stack[--sp].node;
    float lo[3], hi[3];
    memcpy(lo, stack[sp].lo, sizeof lo);
    memcpy(hi, stack[sp].hi, sizeof hi);
    if (n >= m->nkd || reached[n]) {
      rc = hicp__fail(ctx, HICP_EINTERNAL, "kd-tree: node %u is reached twice or out of range",
                      (unsigned)n);
      break;
    }
    reached[n] = 1;
    const hicp__kdnode *nd = &m->kd[n];
    if (nd->dim == HICP_KD_LEAF) {
      if ((uint64_t)nd->first + nd->count > m->nv) {
        rc = hicp__fail(ctx, HICP_EINTERNAL, "kd-tree: leaf %u out of range", (unsigned)n);
        break;
      }
      for (uint32_t i = nd->first; i < nd->first + nd->count; i++) {
        const hicp__vtx *p = &m->kd_pts[i];
        const uint32_t v = p->id;
        if (v >= m->nv || seen[v] || p->x != m->vtx[v].x || p->y != m->vtx[v].y ||
            p->z != m->vtx[v].z) {
          rc = hicp__fail(ctx, HICP_EINTERNAL, "kd-tree: leaf %u holds a wrong or repeated point",
                          (unsigned)n);
          break;
        }
        const float c[3] = {p->x, p->y, p->z};
        for (int d = 0; d < 3 && rc == HICP_OK; d++)
          if (!(lo[d] <= c[d] && c[d] <= hi[d]))
            rc = hicp__fail(ctx, HICP_EINTERNAL,
                            "kd-tree: leaf %u holds a point on the wrong side of a split",
                            (unsigned)n);
        if (rc != HICP_OK)
          break;
        seen[v] = 1;
        covered++;
      }
      continue;
    }
    const uint32_t d = nd->dim;
    if (d > 2 || nd->first <= n || (uint64_t)nd->first + 1 >= m->nkd) {
      rc = hicp__fail(ctx, HICP_EINTERNAL, "kd-tree: node %u is malformed", (unsigned)n);
      break;
    }
    if (sp + 2 > HICP_KD_MAX_DEPTH + 1) {
      rc = hicp__fail(ctx, HICP_EINTERNAL, "kd-tree: deeper than %d levels",
                      HICP_KD_MAX_DEPTH - 1);
      break;
    }
    /* left: coordinates up to the split; right: from it */
    for (int side = 1; side >= 0; side--) {
      stack[sp].node = nd->first + (uint32_t)side;
      memcpy(stack[sp].lo, lo, sizeof lo);
      memcpy(stack[sp].hi, hi, sizeof hi);
      if (side == 0)
        stack[sp].hi[d] = nd->split;
      else
        stack[sp].lo[d] = nd->split;
      sp++;
    }
  }
  for (uint32_t n = 0; n < m->nkd && rc == HICP_OK; n++)
    if (!reached[n])
      rc = hicp__fail(ctx, HICP_EINTERNAL, "kd-tree: node %u is not reached from the root",
                      (unsigned)n);
  if (rc == HICP_OK && covered != m->nv)
    rc = hicp__fail(ctx, HICP_EINTERNAL, "kd-tree: leaves hold %llu of %u vertices",
                    (unsigned long long)covered, (unsigned)m->nv);
  free(seen);
  free(reached);
  return rc;
}

/* The start table: a grid of at least one cell an axis, every entry a
 * vertex. */
static int validate_start(hicp_context *ctx, const hicp_model *m)
{
  if (m->start == NULL || m->start_dim[0] == 0 || m->start_dim[1] == 0 || m->start_dim[2] == 0 ||
      !(m->start_inv > 0.0f))
    return hicp__fail(ctx, HICP_EINTERNAL, "model: no start table, or an empty one");
  const uint64_t cells = (uint64_t)m->start_dim[0] * m->start_dim[1] * m->start_dim[2];
  for (uint64_t c = 0; c < cells; c++)
    if (m->start[c] >= m->nv)
      return hicp__fail(ctx, HICP_EINTERNAL, "model: start table cell %llu holds vertex %u",
                        (unsigned long long)c, m->start[c]);
  return HICP_OK;
}

int hicp__model_validate(hicp_context *ctx, const hicp_model *m)
{
  int rc = validate_points(ctx, m);
  if (rc == HICP_OK && m->has_delaunay)
    rc = validate_graph(ctx, m);
  if (rc == HICP_OK && m->has_delaunay)
    rc = validate_start(ctx, m);
  if (rc == HICP_OK)
    rc = validate_kdtree(ctx, m);
  return rc;
}
