/* chunk.h: pass A's correspondences for a block of points, and nearest
 * neighbours for a block of queries, on the CPU: defined once and
 * instantiated for each walk variant (scalar in cpu_backend.c and
 * walk_simd.c, vector in walk_simd.c). */
#ifndef HICP_CPU_CHUNK_H
#define HICP_CPU_CHUNK_H

#include <string.h>

#include "icp.h"

/* Walks in flight per thread in pass A (see HICP_CPU_CHUNK_CORRESPOND). */
#define HICP_CPU_SLOTS 2

/* One point of pass A: its query, in double for the pair distance and in
 * float for the search. */
static inline void hicp__cpu_point(const hicp__xf *T, const hicp__frame *f, uint32_t i,
                                   double qd[3], float q[3])
{
  hicp__apply(T, &f->p0[3 * (size_t)i], qd);
  q[0] = (float)qd[0];
  q[1] = (float)qd[1];
  q[2] = (float)qd[2];
}

/* Stores point i's answer and counts its walk. */
static inline void hicp__cpu_done(const hicp__mview *view, hicp__frame *f, uint32_t i,
                                  const double qd[3], const hicp__nn_res *r, hicp__walkpart *w)
{
  f->match[i] = r->v;
  f->e2[i] = hicp__pair_e2(qd, &view->vtx[r->v]);
  if (r->walked) {
    w->queries++;
    w->steps += r->steps;
    w->max_steps = r->steps > w->max_steps ? r->steps : w->max_steps;
    w->hist[r->steps < HICP_WALK_BINS - 1 ? r->steps : HICP_WALK_BINS - 1]++;
  }
}

/* A walk in flight: point i (HICP_NONE: the slot is free). */
typedef struct hicp__cpu_slot {
  uint32_t i;
  float q[3];
  double qd[3];
  hicp__walk w;
} hicp__cpu_slot;

/* Defines `static void NAME(view, f, T, method, i0, i1, w)`: for points
 * i0 .. i1-1, apply T, find the nearest vertex with the SUFFIX variant of
 * pp/nn.h (hicp__nn_track: the same answer and certificate), store match
 * and e2, and add the walk statistics to *w.
 *
 * Walks go HICP_CPU_SLOTS at a time, one row scan each in turn: a walk is
 * a chain of dependent loads and compares (vertex, row, neighbours,
 * minimum, next vertex), and independent walks side by side let the core
 * overlap their latencies.  Each walk takes the same steps as it would
 * alone and answers go to their own points, so nothing changes but time.
 * Methods without walks (brute, kdtree) and models without a graph go one
 * point at a time. */
#define HICP_CPU_CHUNK_CORRESPOND(NAME, SUFFIX, ATTR)                                         \
  ATTR static void NAME(const hicp__mview *view, hicp__frame *f, const hicp__xf *T,           \
                        int method, uint32_t i0, uint32_t end, hicp__walkpart *w)             \
  {                                                                                           \
    if (view->row == NULL || method == 1 || method == 2) {                                    \
      for (uint32_t i = i0; i < end; i++) {                                                   \
        double qd[3];                                                                         \
        float q[3];                                                                           \
        hicp__cpu_point(T, f, i, qd, q);                                                      \
        hicp__nn_res r = hicp__nn_track##SUFFIX(view, q, method, f->match[i], &f->track[i]);  \
        hicp__cpu_done(view, f, i, qd, &r, w);                                                \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    const int cert = hicp__track_cert(method);                                                \
    hicp__cpu_slot slot[HICP_CPU_SLOTS];                                                      \
    for (int k = 0; k < HICP_CPU_SLOTS; k++)                                                  \
      slot[k].i = HICP_NONE;                                                                  \
    uint32_t next = i0;                                                                       \
    int live = 0;                                                                             \
    do {                                                                                      \
      for (int k = 0; k < HICP_CPU_SLOTS; k++) {                                              \
        hicp__cpu_slot *s = &slot[k];                                                         \
        hicp__nn_res r;                                                                       \
        /* a free slot takes points until one needs a walk */                                 \
        while (s->i == HICP_NONE && next < end) {                                             \
          const uint32_t i = next++;                                                          \
          hicp__cpu_point(T, f, i, s->qd, s->q);                                              \
          if (hicp__track_keep(view, s->q, method, f->match[i], &f->track[i], &r)) {          \
            hicp__cpu_done(view, f, i, s->qd, &r, w);                                         \
          } else {                                                                            \
            hicp__walk_begin(view, s->q, hicp__nn_start(view, s->q, method, f->match[i]),     \
                             cert, &s->w);                                                    \
            s->i = i;                                                                         \
            live++;                                                                           \
          }                                                                                   \
        }                                                                                     \
        if (s->i != HICP_NONE && hicp__nn_walk_step##SUFFIX(view, s->q, &s->w, &r)) {         \
          hicp__track_update(view, s->q, cert, &r, &f->track[s->i]);                          \
          hicp__cpu_done(view, f, s->i, s->qd, &r, w);                                        \
          s->i = HICP_NONE;                                                                   \
          live--;                                                                             \
        }                                                                                     \
      }                                                                                       \
    } while (live > 0 || next < end);                                                         \
  }

typedef void (*hicp__chunk_fn)(const hicp__mview *view, hicp__frame *f, const hicp__xf *T,
                               int method, uint32_t i0, uint32_t i1, hicp__walkpart *w);

/* Defines `static void NAME(view, method, n, q, prev, res)`: res[i] =
 * hicp__nn_query (SUFFIX variant) of the query at q[3i] with previous match
 * prev[i], the walks HICP_CPU_SLOTS at a time as in pass A. */
#define HICP_CPU_QUERY_BLOCK(NAME, SUFFIX, ATTR)                                              \
  ATTR static void NAME(const hicp__mview *view, int method, uint32_t n, const float *q,      \
                        const uint32_t *prev, hicp__nn_res *res)                              \
  {                                                                                           \
    if (view->row == NULL || method == 1 || method == 2) {                                    \
      for (uint32_t i = 0; i < n; i++)                                                        \
        res[i] = hicp__nn_query##SUFFIX(view, &q[3 * (size_t)i], method, prev[i]);            \
      return;                                                                                 \
    }                                                                                         \
    uint32_t at[HICP_CPU_SLOTS];                                                              \
    hicp__walk w[HICP_CPU_SLOTS];                                                             \
    uint32_t next = 0;                                                                        \
    int live = 0;                                                                             \
    for (int k = 0; k < HICP_CPU_SLOTS; k++)                                                  \
      at[k] = HICP_NONE;                                                                      \
    do {                                                                                      \
      for (int k = 0; k < HICP_CPU_SLOTS; k++) {                                              \
        if (at[k] == HICP_NONE && next < n) {                                                 \
          const float *qi = &q[3 * (size_t)next];                                             \
          hicp__walk_begin(view, qi, hicp__nn_start(view, qi, method, prev[next]), 0, &w[k]); \
          at[k] = next++;                                                                     \
          live++;                                                                             \
        }                                                                                     \
        if (at[k] != HICP_NONE &&                                                             \
            hicp__nn_walk_step##SUFFIX(view, &q[3 * (size_t)at[k]], &w[k], &res[at[k]])) {    \
          at[k] = HICP_NONE;                                                                  \
          live--;                                                                             \
        }                                                                                     \
      }                                                                                       \
    } while (live > 0 || next < n);                                                           \
  }

/* A block of queries (a HICP_CPU_QUERY_BLOCK function). */
typedef void (*hicp__query_fn)(const hicp__mview *view, int method, uint32_t n, const float *q,
                               const uint32_t *prev, hicp__nn_res *res);

/* The fastest query block function this CPU supports (walk_simd.c). */
hicp__query_fn hicp__cpu_simd_query(const hicp__mview *view);

/* The fastest chunk function this CPU supports (walk_simd.c), or NULL for
 * the scalar one (see hicp__cpu_isa). */
hicp__chunk_fn hicp__cpu_simd_chunk(const hicp__mview *view);

/* The vector instructions this CPU has: 0 none we use, 1 AVX2, 2 AVX-512F;
 * HICP_SIMD=scalar|avx2|avx512 in the environment forces a lower level (the
 * tests use it to compare the variants). */
int hicp__cpu_isa(void);

/* One chunk's partial sums (a hicp__chunk_sum variant). */
typedef void (*hicp__sum_fn)(const hicp__mview *view, const hicp__frame *f,
                             const hicp__select *sel, uint32_t c, hicp__partial *out);

/* The fastest chunk sum this CPU supports (sum_simd.c); every variant gives
 * hicp__chunk_sum's bits. */
hicp__sum_fn hicp__cpu_simd_sum(void);

#endif /* HICP_CPU_CHUNK_H */
