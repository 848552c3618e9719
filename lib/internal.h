/* internal.h: declarations shared by the library's own files (not installed).
 *
 * Naming: exported functions are hicp_*, internal non-static functions
 * hicp__*, both listed in the public or in internal headers. */
#ifndef HICP_INTERNAL_H
#define HICP_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "hicp.h"

#if defined(__GNUC__)
#define HICP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define HICP_UNUSED __attribute__((unused))
#else
#define HICP_PRINTF(fmt, args)
#define HICP_UNUSED
#endif

#define HICP_ERRMSG_MAX 512

struct hicp__gpu; /* CUDA backend state (gpu/), opaque to lib/ */

/* The context's device-state slot, for gpu/ (which cannot see the C11
 * struct: nvcc compiles C++). */
struct hicp__gpu **hicp__context_gpu_slot(hicp_context *ctx);
/* The first CUDA device the context was given (0 when none was listed). */
int hicp__context_first_device(const hicp_context *ctx);
/* The device of the context's logical device `logical` (the listed one, or
 * the ordinal itself when none were listed). */
int hicp__context_device(const hicp_context *ctx, int logical);
/* 1 for a worker context of a batch or an untracked stream (one of
 * several running frames side by side), 0 for a context of the user's and
 * for a tracked stream's (its frames run one at a time, each with the
 * workers to itself). */
int hicp__context_is_worker(const hicp_context *ctx);
/* 1 if hicp_context_cancel() was called since the current call began (on a
 * worker's context: or on its parent since the worker's frame began). */
int hicp__canceled(const hicp_context *ctx);
/* A call begins on ctx: earlier cancel requests no longer apply. */
void hicp__cancel_begin(hicp_context *ctx);
/* A worker's frame begins: the parent's requests before `seen` (a value of
 * hicp__cancel_count(parent)) do not apply to it. */
void hicp__cancel_begin_child(hicp_context *child, unsigned seen);
/* Frees the workers a context kept from its last batch (batch.c). */
void hicp__batch_crew_free(hicp_context *ctx);
/* The number of cancel requests made on ctx so far. */
unsigned hicp__cancel_count(const hicp_context *ctx);

/* Records a printf-style message in ctx (when ctx is not NULL) and returns
 * code, so that callers can write `return hicp__fail(ctx, HICP_EINVAL, ...)`. */
int hicp__fail(hicp_context *ctx, int code, const char *fmt, ...) HICP_PRINTF(3, 4);
int hicp__vfail(hicp_context *ctx, int code, const char *fmt, va_list ap) HICP_PRINTF(3, 0);
/* The message of the last hicp__fail on ctx, or with ctx NULL of the last
 * one on this thread with no context. */
const char *hicp__fail_message(const hicp_context *ctx);
/* The precision that prints at most max bytes of s without cutting a
 * UTF-8 character in two ("%.*s"): a path's "é" cut after its lead byte
 * left that byte alone in a message. */
int hicp__utf8_prec(const char *s, int max);
/* Prefixes the context's message with "what: " (keeps the code). */
int hicp__fail_prefix(hicp_context *ctx, int code, const char *what);

/* The distance in bytes between points of `point` bytes, given as `given`
 * (0: packed): *stride, or HICP_EINVAL for a stride shorter than a point;
 * `what` ("scan", "query", "cloud", "model") names the points (cloud.c). */
int hicp__point_stride(hicp_context *ctx, const char *what, size_t given, size_t point,
                       size_t *stride);
/* HICP_EINVAL where n points `stride` bytes apart, each of `point` bytes,
 * would span more than PTRDIFF_MAX bytes: no caller's array does (cloud.c). */
int hicp__check_span(hicp_context *ctx, const char *what, size_t n, size_t stride, size_t point);

/* Refuses n points at xyz when there are none, xyz is NULL or n passes
 * what a uint32_t index holds; `what` ("scan", "model") names them in the
 * message (cloud.c). */
int hicp__check_count(hicp_context *ctx, const char *what, const void *xyz, size_t n);

/* Copies n points, `stride` bytes apart, into a new packed float array,
 * refusing an empty or oversized set, one beyond the memory limit, and
 * points hicp__check_point refuses; `what` ("scan", "cloud") names them in
 * messages (cloud.c).  hicp__copy_points_kept copies into the context's
 * HICP_SCRATCH_SCAN block instead (not to be freed; hicp__scratch_done
 * after use), so that a registration after the first allocates nothing;
 * hicp__copy_points_to into the caller's dst, with room for n points (no
 * memory-limit check: the caller holds it to the limit). */
int hicp__copy_points(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                      size_t stride, float **out);
int hicp__copy_points_kept(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                           size_t stride, float **out);
int hicp__copy_points_to(hicp_context *ctx, const char *what, const float *xyz, size_t n,
                         size_t stride, float *dst);

/* The body of every hicp_*_init_sized(): zeroes `size` bytes of `dst`,
 * copies as much of the defaults as fits (none: NULL, 0) and sets
 * struct_size, every such struct's first member, to `size`.  A NULL `dst`
 * or a size below a size_t is ignored. */
void hicp__init_sized(void *dst, size_t size, const void *defaults, size_t dsize);

/* Whether a point's coordinates are acceptable: 0 if all three are finite
 * and at most HICP_COORD_MAX in magnitude, else HICP_ENONFINITE or
 * HICP_ERANGE with the message "WHAT point I has ..." set on ctx. */
int hicp__check_point(hicp_context *ctx, const char *what, size_t i, double x, double y, double z);
void hicp__clear_error(hicp_context *ctx);
/* Whether points in the box lo .. hi lie far from the origin next to their
 * extent (UTM coordinates): their largest magnitude is over 16 times the
 * box's diagonal.  Floats there lose detail a point held relative to the
 * box keeps: the readers centre such data held in double (cloud.c), a
 * model such float points (model_build.c, far_origin). */
int hicp__far_from_origin(const double lo[3], const double hi[3]);
/* Point i of a cloud, in double, for hicp__far_centre. */
typedef void (*hicp__point_fn)(const void *arg, size_t i, double p[3]);
/* Whether the n points (point(arg, i, p); their box lo .. hi) are to be
 * stored in float about a centre of their own, and where: the box's centre
 * where the box is far from the origin (hicp__far_from_origin), else the
 * points' medians where their bulk is (stray points, fewer than half,
 * such as missed returns at 0, stretch the box to the origin).
 * 1 and centre[] set, or 0. */
int hicp__far_centre(const double lo[3], const double hi[3], size_t n, hicp__point_fn point,
                     const void *arg, double centre[3]);
/* Installs the fork handlers that keep the message lock usable in a child
 * process (error.c); called once, with the first context. */
void hicp__error_watch_forks(void);

/* Memory accounting: returns 0 when `bytes` fits the context's limit, else
 * HICP_ELIMIT with a message naming `what`.  Callers check before allocating
 * anything sized by input, so hostile headers fail before any allocation. */
int hicp__check_budget(hicp_context *ctx, uint64_t bytes, const char *what);

/* out = the inverse of x = A p + t for any invertible A: [A^-1, -A^-1 t].
 * A registration's result carries it (hicp_result.inverse): where no
 * update was made its transform is the caller's initial matrix, which may
 * be 1e-5 from a rotation (HICP_ROTATION_TOL), and its transpose
 * (hicp_transform_invert, which is for rigid transforms) no inverse. */
void hicp__transform_inverse(const hicp_transform *t, hicp_transform *out);

/* A block of at least `bytes` (aligned to 64, contents undefined) that the
 * context keeps from one registration to the next, or NULL when out of
 * memory.  A registration's arrays, freshly allocated, are fresh pages
 * each time: a fault per page, and on two threads a TLB flush on every
 * core when a page was read before it was written (docs/cpu-engine.md,
 * "The AVX2 front begins the walks; pages and latencies"); and a pose loop
 * that allocates nothing per frame has no allocator in its latency
 * (docs/robustness.md, "Real-time use").  One user of each slot at a
 * time, as the context itself; hicp__scratch_done after each use lets go
 * of a block larger than HICP_SCRATCH_KEEP. */
enum {
  HICP_SCRATCH_FRAME, /* the frame's arrays (icp.c, frame_layout) */
  HICP_SCRATCH_SCAN,  /* hicp_register's packed copy of the caller's scan */
  HICP_SCRATCH_SLOTS
};
void *hicp__scratch(hicp_context *ctx, int slot, size_t bytes);
void hicp__scratch_done(hicp_context *ctx, int slot);
/* What hicp__scratch allocates for a block of `bytes` (rounded up to 64):
 * what a memory-limit check counts for it.  hicp__kept_copy_bytes: for
 * hicp__copy_points_kept's copy of n points. */
uint64_t hicp__scratch_bytes(uint64_t bytes);
uint64_t hicp__kept_copy_bytes(size_t n);
#define HICP_SCRATCH_KEEP ((size_t)64 << 20)
/* Overflow-checked size arithmetic: 0 on success, -1 on overflow. */
int hicp__mul_size(size_t a, size_t b, size_t *out);
int hicp__add_size(size_t a, size_t b, size_t *out);

/* Allocation helpers returning NULL on failure (no message). */
void *hicp__malloc(size_t size);
void *hicp__calloc(size_t n, size_t size);
void *hicp__aligned_alloc(size_t alignment, size_t size); /* free with hicp__aligned_free */
void hicp__aligned_free(void *p);

/* Monotonic wall clock in milliseconds. */
double hicp__now_ms(void);

/* Default worker count: the cores the calling thread may run on (hwloc,
 * falling back to the CPUs online), no more than a cgroup's CPU `quota`
 * (0: none). */
int hicp__default_threads(int quota);
/* At the start of a call whose parallel regions run on the calling thread,
 * up to hicp__team_threads(ctx) threads: whether the system gives the
 * threads its OpenMP pool lacks for them (libgomp would exit the process
 * where it does not).  Checked where the team is larger than a check has
 * shown since the pool last shrank (context.c): HICP_OK, or HICP_ENOMEM
 * with the message (hicp__team_preflights in context.h counts the checks
 * made, for the tests). */
int hicp__team_ready(hicp_context *ctx);
/* The same for a team of n threads, where a call takes fewer than ctx's
 * (a registration cut by the adaptation, lib/contention.c). */
int hicp__team_ready_for(hicp_context *ctx, int n);
/* The threads a call's parallel regions on the calling thread run on,
 * wanting k: every region of the call takes this one number, so that the
 * pool is what context.c records (a smaller region ends the pool's other
 * threads).  k where it fits what was checked, or where a check made here
 * finds room; else the threads the pool holds (the bits are the same). */
int hicp__team_use(int k);
/* Whether the system gives `extra` more threads at once, checked as
 * hicp__team_ready checks: 0 or the error.  For a batch's workers, whose
 * teams start on threads of their own (batch.c). */
int hicp__threads_check(int extra);
/* hicp has just let threads end (a batch's or a stream's workers): checks
 * in the next 50 ms retry a refusal, as those threads may still count. */
void hicp__threads_ended(void);
/* The calling thread's team for ctx counted as checked: its threads were
 * part of a larger check just made (hicp__threads_check). */
void hicp__team_assume_ready(const hicp_context *ctx);
/* The threads the calling thread's pool lacks for ctx's team where no
 * check has shown room for it: 0 where one has. */
int hicp__team_missing(const hicp_context *ctx);
/* The threads a parallel region on the calling thread may take for ctx:
 * ctx->threads, or 1 on the thread that forked this process (in the
 * child), inside a parallel region of the caller's, or with no context.
 * libgomp's team of a thread does not survive fork(): a region of more
 * than one thread on the forking thread, in the child, waits for ever on
 * the parent's threads.  Threads started in the child have teams of their
 * own. */
int hicp__team_threads(const hicp_context *ctx);

/* The threads a registration of up to `want` on the calling thread takes
 * now (lib/contention.c): fewer after one of its registrations was held
 * up by busy CPUs, until they look free again; at least 1. */
int hicp__threads_now(int want);
/* A registration's watch on its threads: hicp__threads_watch_begin before
 * it, on `threads` of the `want` asked for, and _end after it, which
 * decides the calling thread's next registrations' threads. */
typedef struct hicp__threads_watch {
  int threads, want;
  double wall_ms, cpu_ms; /* at the start: the clock, the process's CPU time */
} hicp__threads_watch;
void hicp__threads_watch_begin(hicp__threads_watch *w, int threads, int want);
void hicp__threads_watch_end(const hicp__threads_watch *w);
/* The calls in hicp_stream_receive on stream s now (those counted: a
 * destroy waits for them to leave).  For the tests, which must know that a
 * receiver is inside before they destroy the stream under it. */
int hicp__stream_receivers(hicp_stream *s);
/* What the watch's end decides, apart from its clocks: a registration on
 * `threads` of `want` ended at `now` (hicp__now_ms), held up or not.  And
 * hicp__threads_now at the time `now`.  The tests drive the rules with
 * them: a thread off its CPU for a moment, or a sleep that lasts, cannot
 * then change what they see. */
void hicp__threads_record(int threads, int want, int held_up, double now);
int hicp__threads_now_at(int want, double now);
/* A parallel region of `threads` on the calling thread has just ended:
 * its idle threads may spin a while (counted as its own, not as others). */
void hicp__team_ended(int threads);
/* The rules themselves.  The threads `cpus` CPUs leave for `want` where
 * `running` tasks are runnable (the caller and `own` of its team's threads
 * among them), at least 1.  Whether `threads` threads were held up: their
 * process had cpu_ms of CPU time in wall_ms. */
int hicp__threads_left(int want, long running, int cpus, int own);
int hicp__threads_held_up(double wall_ms, double cpu_ms);
/* The fourth field of a /proc/loadavg-like file (running/total): the
 * runnable tasks, or -1. */
long hicp__runnable_tasks(const char *path);
/* How long libgomp's idle threads spin after a region, in ms, for the
 * values of OMP_WAIT_POLICY and GOMP_SPINCOUNT (NULL: unset), read as
 * libgomp reads them (lib/contention.c). */
double hicp__spin_ms(const char *policy, const char *count);

/* Sized option structs: copies the caller's struct (which may come from an
 * older header and be shorter) over library defaults.  Returns 0 or
 * HICP_EINVAL when struct_size is missing or too small, or when a byte
 * beyond this library's struct (one from a later header) is not zero. */
int hicp__copy_sized(void *dst, size_t dst_size, const void *src, size_t min_size,
                     const char *what, hicp_context *ctx);

#endif /* HICP_INTERNAL_H */
