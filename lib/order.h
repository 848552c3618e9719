/* order.h: spatial order along a Morton (Z-order) curve.  The model's
 * vertices are stored in this order (model_build.c), and queries are
 * processed in it (nn.c, icp.c), so that consecutive searches read nearby
 * memory: on large models a search is bound by cache misses, not
 * arithmetic (docs/design.md, "Spatial order"). */
#ifndef HICP_ORDER_H
#define HICP_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* A grid of 2^21 cubic cells per axis over a bounding box. */
typedef struct hicp__zgrid {
  double lo[3];
  double scale; /* cells per unit length */
} hicp__zgrid;

/* The grid over the box [lo, hi] (its largest extent sets the cell size). */
void hicp__zgrid_init(hicp__zgrid *g, const double lo[3], const double hi[3]);

/* The 63-bit Morton key of a point's cell; points outside the box are
 * clamped to its faces. */
uint64_t hicp__zkey(const hicp__zgrid *g, double x, double y, double z);

/* The cell of coordinate value v along axis d, 0 .. 2^21 - 1. */
static inline uint64_t hicp__zcell(const hicp__zgrid *g, int d, double v)
{
  const double cells = (double)((1u << 21) - 1u);
  const double c = (v - g->lo[d]) * g->scale;
  /* !(c > 0) also takes NaN to cell 0 */
  return !(c > 0.0) ? 0u : c >= cells ? (uint64_t)cells : (uint64_t)c;
}

/* Spreads the low 7 bits of v to every third bit. */
static inline uint32_t hicp__spread7(uint32_t v)
{
  v = (v | v << 8) & 0x0f00fu;
  v = (v | v << 4) & 0xc30c3u;
  v = (v | v << 2) & 0x49249u;
  return v;
}

/* The top 21 bits of hicp__zkey (a 2^7 grid per axis): enough to sort
 * queries by, and cheaper.  Inline: cpu/keys_simd.c's scalar loop keys
 * every scan point of every frame with it. */
static inline uint32_t hicp__zkey21(const hicp__zgrid *g, double x, double y, double z)
{
  return hicp__spread7((uint32_t)(hicp__zcell(g, 0, x) >> 14)) |
         hicp__spread7((uint32_t)(hicp__zcell(g, 1, y) >> 14)) << 1 |
         hicp__spread7((uint32_t)(hicp__zcell(g, 2, z) >> 14)) << 2;
}

/* key[i] = hicp__zkey21 of point p[3i .. 3i+2] placed by T (pp/reduce.h's
 * hicp__apply), for i < n, and the points' box (as they are, not placed)
 * folded into lo and hi (cpu/keys_simd.c: vector code where the CPU has
 * it, the same bits). */
struct hicp__xf;
void hicp__keys_placed(const hicp__zgrid *g, const struct hicp__xf *T, const float *p, size_t n,
                       uint32_t *key, float lo[3], float hi[3]);

/* order[0..n): the indices 0..n-1 in increasing order of the top bits of
 * their 21-bit keys, about one bucket per item (a stable counting sort, so
 * the result depends only on the keys); inv, if not NULL, the inverse
 * permutation.  buckets: hicp__zsort_buckets(n) words of the caller's, or
 * NULL to allocate them here.  Returns HICP_OK or HICP_ENOMEM. */
int hicp__zsort(const uint32_t *key21, uint32_t n, uint32_t *order, uint32_t *inv,
                uint32_t *buckets);
size_t hicp__zsort_buckets(uint32_t n);

/* Whether answering n queries on model m in Morton order is likely to be
 * faster than in the given order: at least 4096 queries on a model whose
 * vertex and graph arrays pass 64 MB (about 500k points), far beyond a
 * last-level cache.  Measured on the 2-core EPYC VM (docs/design.md):
 * 1M points 341 -> 188 ns per query, 200k points 102 -> 128 ns.  Only
 * hicp_nn_query uses it: its answers do not depend on the order. */
struct hicp_model;
int hicp__order_pays(const struct hicp_model *m, size_t n);

#endif /* HICP_ORDER_H */
