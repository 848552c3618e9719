/* icp.h: the ICP engine's internal interface: one registration's state (a
 * "frame"), the resolved options (a "plan"), and the passes a backend runs.
 *
 * Data path of one iteration k (docs/design.md has the picture):
 *   hicp_register (icp.c)          checks options, copies the scan (a
 *                                  cloud's points are read in place), runs
 *   hicp__register_frame (icp.c)   sorts it (Morton), picks the device loop
 *                                  (gpu/, design.md) or the host loop:
 *   hicp__icp_loop (icp.c)         the loop: for each k
 *     pass A (cpu/cpu_backend.c)   per chunk: apply T_k, nearest neighbour
 *                                  (pp/nn.h), pair distance, lane sums and
 *                                  the lane tree (pp/reduce.h)
 *     combine (icp.c)              chunk partials by the fixed tree
 *     pass B (optional)            filters: the same sums with the final
 *                                  inlier selection
 *     stop tests, Horn solve       pp/solve.h  -> T_{k+1}
 *   the sequence between the passes, and the state one iteration hands
 *   the next, is pp/iter.h's, which the GPU's loop calls too.
 */
#ifndef HICP_ICP_H
#define HICP_ICP_H

#include "internal.h"
#include "pp/iter.h"
#include "pp/nn.h"
#include "pp/reduce.h"
#include "pp/solve.h"
#include "pp/types.h"

#define HICP_DEFAULT_CHUNK 1024u

/* The most scan points a registration takes: point indices are 32-bit, and
 * a chunk's end (its start + 65536) and a lane's next point (+ 256) must not
 * wrap around. */
#define HICP_SCAN_MAX (UINT32_MAX - 2u * 65536u)

/* Options resolved against the model. */
typedef struct hicp__plan {
  int method;          /* hicp_nn_method */
  hicp__conv conv;
  double max_d2;       /* +inf when off */
  double trim;         /* 1 = off */
  int filter_start;    /* -1 = off */
  double sigma_k;      /* the sigma filter's multiplier (hicp__sigma_k) */
  uint32_t chunk;      /* points per chunk, power of two >= 256 */
  double time_budget_ms;
  int tol_auto;        /* conv.tol left to the library: set by each frame (icp.c, frame_tol) */
} hicp__plan;

/* One registration's working state, in host memory. */
typedef struct hicp__frame {
  /* The per-point arrays (p0, p0s, match, e2, track) are in the scan's
   * Morton order (icp.c, scan_order), not the caller's: point j is the
   * caller's point order[j]; hicp__register_frame maps warm starts in
   * (frame_start) and matches out. */
  const float *p0;      /* 3n scan coordinates (relative to the scan origin) */
  const float *p0s;     /* the same by coordinate, n x then n y then n z: the CPU's
                           vector code loads eight points' x at once */
  uint32_t n;
  uint32_t nchunks;
  uint32_t chunk;
  uint32_t *match;      /* per point: matched vertex, HICP_NONE before the first pass */
  double *e2;           /* per point: squared distance of the pair (double) */
  hicp__track *track;   /* per point: search certificate (pp/nn.h) */
  hicp__partial *part;  /* per chunk */
  hicp__walkpart *walk; /* per chunk */
  uint32_t *points_done; /* per chunk: pass A's points finished (cpu/cpu_backend.c) */
  hicp__partial *sums;  /* per chunk: the iteration loop's copy of part to combine */
  double *trim_e2;      /* per point when trimming: the loop's copy of e2 to select in */
  int walk_lock;        /* pass A's additions to walk (hicp__spin_lock, cpu/segments.h) */
  double s_noise;       /* Horn's solve: the cross-covariance's rounding floor (pp/solve.h) */
  int threads;          /* the CPU threads of the frame's own work (its copies, and its
                           loop where no team is given): the context's, fewer while busy
                           CPUs hold the calling thread up (lib/contention.c); chosen
                           once, so that every part of the frame agrees */
  /* What stops the CPU's pass A between two of its pieces (a few hundred
   * points), rather than at the iteration's end: the time budget's end on
   * hicp__now_ms()'s clock (0: no budget) and the context whose cancel
   * counts (NULL: none).  `halted` (set with __atomic builtins) says that
   * a piece was refused, so the pass is incomplete and its sums unusable. */
  double deadline;
  const struct hicp_context *halt_ctx;
  int halted;
} hicp__frame;

/* What a run of the iteration loop produces (either backend). */
typedef struct hicp__icp_out {
  hicp__xf T;             /* the final transform (internal coordinates) */
  hicp__partial tot;      /* the sums at T */
  int iterations;
  int stop;               /* hicp_stop */
  int degenerate;
  double correspond_ms, reduce_ms, solve_ms;
  hicp_walk_stats walk;
  int threads;            /* the CPU threads that ran it (0: devices alone) */
} hicp__icp_out;

/* The end (one past the last point) of the frame's chunk c. */
static inline uint32_t hicp__chunk_end(const hicp__frame *f, uint32_t c)
{
  return hicp__chunk_end_of(c, f->chunk, f->n);
}

/* Pass A over chunks [c0, c1): for every point apply T, find its nearest
 * vertex (warm-started from match[]), store match and e2, and write each
 * chunk's partial sums under selection `sel` and its walk statistics. */
void hicp__cpu_pass_a(const hicp__mview *view, hicp__frame *f, const hicp__xf *T, int method,
                      const hicp__select *sel, uint32_t c0, uint32_t c1, int threads);

/* Starts the calling thread's OpenMP team of `threads` (an empty parallel
 * region, so that the next pass finds its threads running); returns how
 * many threads the region had (cpu/cpu_backend.c). */
int hicp__cpu_start_threads(int threads);

/* The CPU backend's vector code: 0 scalar, 1 AVX2, 2 AVX-512F, 3 AVX-512F
 * fronts and sums with the AVX2 walks: the rule is hicp__cpu_isa's
 * (cpu/walk_simd.c), hicp_cpu_vector_code only names the level.  The tests set
 * HICP_SIMD to compare the variants bit for bit. */
int hicp__cpu_isa(void);

/* Pass B over chunks [c0, c1): the chunk partials again from the stored
 * matches and distances, under a new selection (filters). */
void hicp__cpu_pass_b(const hicp__mview *view, hicp__frame *f, const hicp__select *sel,
                      uint32_t c0, uint32_t c1, int threads);

/* One chunk's partial from stored matches (the lane shape of pp/reduce.h). */
void hicp__chunk_sum(const hicp__mview *view, const hicp__frame *f, const hicp__select *sel,
                     uint32_t c, hicp__partial *out);

/* The k-th smallest (0-based) of n values; reorders v.  Exact, so the trim
 * threshold is the same whatever computed the values. */
double hicp__select_kth(double *v, size_t n, size_t k);

#endif /* HICP_ICP_H */
