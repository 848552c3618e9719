/* scheduler.h: the scheduler's workers (crew.c, icp.c, cpu/, gpu/).
 *
 * A worker computes chunk ranges of ICP passes for a frame: the CPU worker
 * with OpenMP threads (cpu/), a GPU worker on one logical device (gpu/).
 * Because a chunk's partial sums are the same bits whoever computes them
 * (pp/reduce.h), the scheduler may split each iteration's chunks between
 * workers in any proportion: hicp__icp_loop measures each worker's
 * throughput and moves the split towards equal finishing times. */
#ifndef HICP_SCHED_H
#define HICP_SCHED_H

#include "icp.h"
#include "model.h"

typedef struct hicp__worker hicp__worker;

typedef struct hicp__worker_ops {
  /* Prepares for a frame (a GPU worker uploads the model and the scan). */
  int (*begin)(hicp__worker *w, const hicp_model *m, hicp__frame *f);
  /* Pass A (pp/, icp.h) over chunks [c0, c1): the frame's host arrays
   * (match, track, e2, part, walk) are up to date for those chunks after. */
  int (*pass_a)(hicp__worker *w, const hicp_model *m, hicp__frame *f, const hicp__xf *T,
                int method, const hicp__select *sel, uint32_t c0, uint32_t c1);
  /* Pass B over chunks [c0, c1), after this worker's pass A on them. */
  int (*pass_b)(hicp__worker *w, const hicp_model *m, hicp__frame *f, const hicp__select *sel,
                uint32_t c0, uint32_t c1);
  /* Releases what begin took. */
  void (*end)(hicp__worker *w);
  /* Releases the worker itself (its device state). */
  void (*destroy)(hicp__worker *w);
} hicp__worker_ops;

struct hicp__worker {
  const hicp__worker_ops *ops;
  hicp_context *ctx;   /* the worker's own context: errors, device state */
  int threads;         /* CPU workers: OpenMP threads */
  int is_gpu;
  void *state;         /* the implementation's */
  double rate;         /* chunks per millisecond, measured (0: unknown) */
};

/* The workers a hybrid loop spreads each iteration over. */
#define HICP_TEAM_MAX 16
typedef struct hicp__team {
  hicp__worker *w[HICP_TEAM_MAX];
  int nw;
  double cpu_share; /* < 0: adapt to measured throughput */
} hicp__team;

/* A CPU worker using `threads` OpenMP threads, reporting into ctx. */
void hicp__cpu_worker_init(hicp__worker *w, hicp_context *ctx, int threads);

/* A GPU worker on the context's logical device `logical` (gpu/; the stub
 * answers HICP_ENODEVICE). */
int hicp__gpu_worker_init(hicp__worker *w, hicp_context *ctx, int logical);

/* The iteration loop, each pass split over the team's workers (team NULL:
 * one CPU worker with the context's threads). */
int hicp__icp_loop(hicp_context *ctx, const hicp_model *m, hicp__frame *f, const hicp__plan *p,
                   const hicp__xf *T0, double t_start, hicp__team *team, hicp__icp_out *out);

/* One frame's registration: backend choice, the loop (or the GPU's
 * device-resident loop), the result.  p0 holds 3n packed floats relative
 * to `origin`.  `warm` (may be NULL) gives each point's previous match as
 * a model vertex to start from; `match_out` (may be NULL) receives the
 * final matches (vertex indices).  `team` NULL: the context's own CPU
 * threads or device. */
int hicp__register_frame(hicp_context *ctx, const hicp_model *m, const float *p0, size_t n,
                         const double origin[3], const hicp__plan *plan,
                         const hicp_transform *init, hicp__team *team, const uint32_t *warm,
                         uint32_t *match_out, hicp_result *result, double t_start);

/* A frame's result when it failed (a batch's or stream's frame, or a
 * single registration): zero but for struct_size, with the frame's index,
 * the error and msg as its note where the caller's struct holds them. */
void hicp__result_failed(hicp_result *r, uint64_t frame, int code, const char *msg);

/* The host memory a registration of n points takes at its peak (icp.c):
 * the frame's arrays, the scan's order, trim's buffer, the loop's
 * partials.  hicp__register_frame checks it against the context's limit;
 * a caller that holds memory for the frame beside it (its copy of the
 * scan, a tracked batch's matches: `held` bytes) checks the two together
 * before allocating either, so that one call stays within the limit. */
uint64_t hicp__frame_bytes(const hicp__plan *plan, size_t n);
int hicp__check_frame_budget(hicp_context *ctx, const hicp__plan *plan, size_t n,
                             uint64_t held);
/* Whether the registration of n points and `held` bytes beside it fit the
 * limit, without failing: for memory a frame can do without (a tracked
 * frame's matches, which only speed its searches). */
int hicp__frame_fits(const hicp_context *ctx, const hicp__plan *plan, size_t n, uint64_t held);

/* Options resolved against a model (icp.c). */
int hicp__make_plan(hicp_context *ctx, const hicp_model *m, const hicp_reg_options *user,
                    hicp__plan *plan, size_t *scan_stride);

/* Where a single registration runs (icp.c): cpu, cuda, or (auto/hybrid)
 * cuda when a device is usable. */
int hicp__choose_backend(hicp_context *ctx, hicp_backend *out);

#endif /* HICP_SCHED_H */
