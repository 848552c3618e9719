/* order.h: spatial order along a Morton (Z-order) curve.  The model's
 * vertices are stored in this order (model_build.c), and queries are
 * processed in it (nn.c, icp.c), so that consecutive searches read nearby
 * memory: on large models a search is bound by cache misses, not
 * arithmetic (docs/design.md, "Spatial order"). */
#ifndef HICP_ORDER_H
#define HICP_ORDER_H

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

/* The top 21 bits of hicp__zkey (a 2^7 grid per axis): enough to sort
 * queries by, and cheaper. */
uint32_t hicp__zkey21(const hicp__zgrid *g, double x, double y, double z);

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
