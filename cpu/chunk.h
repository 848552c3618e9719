/* chunk.h: pass A of one chunk on the CPU, defined once and instantiated
 * for each walk variant (scalar in cpu_backend.c, vector in walk_simd.c). */
#ifndef HICP_CPU_CHUNK_H
#define HICP_CPU_CHUNK_H

#include <string.h>

#include "icp.h"

/* Defines `static void NAME(view, f, T, method, c)`: for every point of
 * chunk c, apply T, find the nearest vertex with TRACK (a
 * hicp__nn_track variant), store match and e2, and the chunk's walk
 * statistics. */
#define HICP_CPU_CHUNK_CORRESPOND(NAME, TRACK, ATTR)                                          \
  ATTR static void NAME(const hicp__mview *view, hicp__frame *f, const hicp__xf *T,           \
                        int method, uint32_t c)                                               \
  {                                                                                           \
    const uint32_t base = c * f->chunk;                                                       \
    const uint32_t end = base + f->chunk < f->n ? base + f->chunk : f->n;                     \
    hicp__walkpart w;                                                                         \
    memset(&w, 0, sizeof w);                                                                  \
    for (uint32_t i = base; i < end; i++) {                                                   \
      double qd[3];                                                                           \
      hicp__apply(T, &f->p0[3 * (size_t)i], qd);                                              \
      float q[3] = {(float)qd[0], (float)qd[1], (float)qd[2]};                                \
      hicp__nn_res r = TRACK(view, q, method, f->match[i], &f->track[i]);                     \
      f->match[i] = r.v;                                                                      \
      f->e2[i] = hicp__pair_e2(qd, &view->vtx[r.v]);                                          \
      if (r.walked) {                                                                         \
        w.queries++;                                                                          \
        w.steps += r.steps;                                                                   \
        w.max_steps = r.steps > w.max_steps ? r.steps : w.max_steps;                          \
        w.hist[r.steps < HICP_WALK_BINS - 1 ? r.steps : HICP_WALK_BINS - 1]++;                \
      }                                                                                       \
    }                                                                                         \
    f->walk[c] = w;                                                                           \
  }

typedef void (*hicp__chunk_fn)(const hicp__mview *view, hicp__frame *f, const hicp__xf *T,
                               int method, uint32_t c);

/* One nearest-neighbour query (a hicp__nn_query variant). */
typedef hicp__nn_res (*hicp__query_fn)(const hicp__mview *m, const float q[3], int method,
                                       uint32_t prev);

/* The fastest query function this CPU supports (walk_simd.c). */
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
