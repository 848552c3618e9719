/* test_alloc.c: a pose loop's registrations allocate nothing after the
 * first (docs/robustness.md, "Real-time use").  A plain program printing
 * TAP: it counts every call to the C allocator in the process, its own
 * definitions of malloc and its kin standing in front of glibc's (for the
 * library and for libgomp alike), so it runs only where those can be
 * replaced: glibc, no sanitizer and not under valgrind (each has its own
 * allocator).  It also skips where the OpenMP settings keep libgomp from
 * reusing its teams (OMP_DYNAMIC, OMP_THREAD_LIMIT=1,
 * OMP_MAX_ACTIVE_LEVELS=0: a region then gets a new team at every call),
 * as hicp.h says.
 *
 *  1. the count sees the library's allocations: a scan larger than any
 *     before on a context grows the context's blocks;
 *  2. on one thread and on two, with scans below and above the size from
 *     which the frame's copies run in parallel (8,192 points), after one
 *     registration of that size: hicp_register (packed and strided) and
 *     hicp_register_cloud allocate nothing, for every nearest-neighbour
 *     method, with the sigma filter, trimming and a distance cut-off;
 *  3. a stream, tracked (on one thread and on two) or not (one worker),
 *     fed frames of two sizes, one or three outstanding at a time: once it
 *     has seen its largest frame, submitting and receiving allocate
 *     nothing, in the caller's thread or the stream's;
 *  4. a batch, tracked or not, on one thread and on two: after a first
 *     batch, a batch of 10 frames allocates no more than one of 2 (what a
 *     batch allocates is per call, not per frame);
 *  5. a tracked batch, and a tracked stream, hold their frames to the
 *     memory limit as the single call does (the bytes held at their peak,
 *     counted too);
 *  6. a tracked batch, and a tracked stream, whose frames' matches cannot
 *     be allocated run every frame without them, to the same poses;
 *  7. a file write refused for want of memory says HICP_ENOMEM and keeps
 *     the file it would have replaced.
 *
 * Accepts and ignores --tap=- (the test driver passes it to every suite). */
#include "config.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "hicp.h"
#include "tap.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif

static atomic_int counting;    /* count now */
/* malloc refuses requests of exactly this many bytes (0: none), and
 * counts its refusals */
static atomic_size_t refuse_size;
static atomic_long refusals;
static atomic_long allocations; /* the count */
/* the bytes held (the allocator's usable sizes) and their peak since
 * peak_reset(): what a call takes at most, against its memory limit */
static atomic_long live, peak;

#if defined(__GLIBC__) && !defined(SANITIZED)
#define COUNTING 1
/* glibc's allocator under its own names, which every definition below
 * forwards to.  free is not counted and stays glibc's. */
void *memalign(size_t a, size_t n);
size_t malloc_usable_size(void *p);
extern void __libc_free(void *);
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static void count(void)
{
  if (atomic_load_explicit(&counting, memory_order_relaxed))
    atomic_fetch_add(&allocations, 1);
}

/* p, just allocated (or NULL), joins the bytes held */
static void *held(void *p)
{
  if (p != NULL) {
    const long now = atomic_fetch_add(&live, (long)malloc_usable_size(p)) +
                     (long)malloc_usable_size(p);
    long was = atomic_load(&peak);
    while (now > was && !atomic_compare_exchange_weak(&peak, &was, now))
      ;
  }
  return p;
}

static void unheld(void *p)
{
  if (p != NULL)
    atomic_fetch_sub(&live, (long)malloc_usable_size(p));
}

void free(void *p)
{
  unheld(p);
  __libc_free(p);
}

void *malloc(size_t n)
{
  count();
  if (n != 0 && n == atomic_load(&refuse_size)) {
    atomic_fetch_add(&refusals, 1);
    return NULL;
  }
  return held(__libc_malloc(n));
}

void *calloc(size_t k, size_t n)
{
  count();
  return held(__libc_calloc(k, n));
}

void *realloc(void *p, size_t n)
{
  count();
  const long before = p != NULL ? (long)malloc_usable_size(p) : 0;
  void *q = __libc_realloc(p, n);
  if (q == NULL && n > 0)
    return NULL; /* p is as it was */
  atomic_fetch_sub(&live, before);
  return held(q);
}

void *aligned_alloc(size_t a, size_t n)
{
  count();
  return held(__libc_memalign(a, n));
}

void *memalign(size_t a, size_t n)
{
  count();
  return held(__libc_memalign(a, n));
}

int posix_memalign(void **p, size_t a, size_t n)
{
  count();
  *p = held(__libc_memalign(a, n));
  return *p != NULL ? 0 : 12; /* ENOMEM */
}
#else
#define COUNTING 0
#endif

/* n points of the surface turned 6 degrees about y and shifted, each
 * followed by a float the registration must skip (stride 16 bytes). */
static float *strided_scan(size_t n, uint64_t seed)
{
  float *p = tap_surface(n, seed), *s = malloc(sizeof(float) * 4 * n);
  if (s == NULL)
    abort();
  const double a = 6.0 * M_PI / 180.0;
  for (size_t i = 0; i < n; i++) {
    s[4 * i] = (float)(cos(a) * p[3 * i] - sin(a) * p[3 * i + 2] + 0.03);
    s[4 * i + 1] = p[3 * i + 1];
    s[4 * i + 2] = (float)(sin(a) * p[3 * i] + cos(a) * p[3 * i + 2]);
    s[4 * i + 3] = -1.0f;
  }
  free(p);
  return s;
}

/* What one kind of registration is asked. */
typedef struct {
  const char *name;
  hicp_nn_method nn;
  int filters; /* sigma filter from iteration 2, trim 0.9, max_dist */
  int kind;    /* 0 hicp_register packed, 1 strided, 2 hicp_register_cloud */
} reg_kind;

typedef struct {
  hicp_context *ctx;
  const hicp_model *m;
  const float *strided; /* n points, 16 bytes apart */
  float *packed;        /* the same, packed */
  hicp_cloud *cloud;    /* the same, as a cloud */
  size_t n;
} scan_set;

/* The options of every registration here: 6 iterations, no early stop. */
static void six_iterations(hicp_reg_options *o)
{
  hicp_reg_options_init(o);
  o->max_iter = 6;
  o->tol = 0.0;
}

/* One registration of the kind; 0 on success, else prints why. */
static int register_once(const scan_set *s, const reg_kind *k)
{
  hicp_reg_options o;
  six_iterations(&o);
  o.nn = k->nn;
  if (k->filters) {
    o.filter_start = 2;
    o.filter_sigma = 3.0;
    o.trim = 0.9;
    o.max_dist = 0.2;
  }
  hicp_result r;
  hicp_result_init(&r);
  int rc;
  if (k->kind == 2) {
    rc = hicp_register_cloud(s->ctx, s->m, s->cloud, &o, NULL, &r);
  } else {
    o.scan_stride = k->kind == 1 ? 4 * sizeof(float) : 0;
    rc = hicp_register(s->ctx, s->m, k->kind == 1 ? s->strided : s->packed, s->n, &o, NULL, &r);
  }
  if (rc != HICP_OK || r.iterations != 6) {
    printf("# %s: rc %d, %d iterations: %s\n", k->name, rc, r.iterations,
           hicp_context_error(s->ctx));
    return -1;
  }
  return 0;
}

/* A context of `threads` threads and n scan points for it (sizes of the
 * frames: n and n - n / 4); a TAP bail-out when either cannot be made. */
static void open_scan_set(int threads, const hicp_model *m, size_t n, uint64_t seed, scan_set *s)
{
  memset(s, 0, sizeof *s);
  hicp_context_options co;
  hicp_context_options_init(&co);
  co.threads = threads;
  /* The promise is the CPU's (hicp.h).  With a device, "auto" takes the
   * GPU, whose batch and stream workers each set up their device state at
   * their first frame (an H200, stop 55: about 107 allocations a worker;
   * docs/gpu.md) */
  co.backend = HICP_BACKEND_CPU;
  s->m = m;
  s->n = n;
  s->strided = strided_scan(n, seed);
  s->packed = malloc(sizeof(float) * 3 * n);
  if (s->packed == NULL)
    abort();
  for (size_t i = 0; i < n; i++)
    memcpy(&s->packed[3 * i], &s->strided[4 * i], 3 * sizeof(float));
  if (hicp_context_create(&co, &s->ctx) != HICP_OK ||
      hicp_cloud_from_xyz(s->ctx, s->packed, n, 0, &s->cloud) != HICP_OK) {
    printf("Bail out! a context or its scan\n");
    exit(1);
  }
}

static void close_scan_set(scan_set *s)
{
  hicp_cloud_destroy(s->cloud);
  hicp_context_destroy(s->ctx);
  free(s->packed);
  free((void *)s->strided);
}

/* Submits the frames of s in turn (sizes n and n - n / 4 alternating), at
 * most `ahead` outstanding, and receives them all: `frames` frames.  0 on
 * success, else prints why. */
static int stream_frames(hicp_stream *st, const scan_set *s, int frames, int ahead)
{
  int submitted = 0, received = 0;
  while (received < frames) {
    while (submitted < frames && submitted - received < ahead) {
      const size_t n = submitted % 2 ? s->n - s->n / 4 : s->n;
      const int rc = hicp_stream_submit(st, s->packed, n, NULL, NULL);
      if (rc != HICP_OK) {
        printf("# submit: rc %d: %s\n", rc, hicp_context_error(s->ctx));
        return -1;
      }
      submitted++;
    }
    hicp_result r;
    hicp_result_init(&r);
    const int rc = hicp_stream_receive(st, &r, 1);
    if (rc != HICP_OK || r.error != HICP_OK || r.iterations != 6) {
      printf("# receive: rc %d, frame error %d, %d iterations\n", rc, r.error, r.iterations);
      return -1;
    }
    received++;
  }
  return 0;
}

/* The allocations of a batch of `frames` frames of s; -1 when it fails.
 * Tracked, the frames' sizes alternate (n and n - n / 4) on its one
 * worker.  Independent, they are all n: which worker takes which frame is
 * the threads' timing, and a worker meeting its first larger frame grows
 * its blocks once, in whichever batch that happens. */
static long batch_allocations(const scan_set *s, int track, int frames)
{
  const float *fr[10];
  size_t counts[10];
  hicp_result res[10];
  for (int i = 0; i < frames; i++) {
    fr[i] = s->packed;
    counts[i] = track && i % 2 ? s->n - s->n / 4 : s->n;
    hicp_result_init(&res[i]);
  }
  hicp_reg_options o;
  six_iterations(&o);
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = track;
  atomic_store(&allocations, 0);
  atomic_store(&counting, 1);
  const int rc =
      hicp_register_batch(s->ctx, s->m, fr, counts, (size_t)frames, &o, &bo, NULL, res);
  atomic_store(&counting, 0);
  if (rc != HICP_OK) {
    printf("# batch: rc %d: %s\n", rc, hicp_context_error(s->ctx));
    return -1;
  }
  return atomic_load(&allocations);
}

/* Why the allocations cannot be counted or cannot be none here, or NULL. */
static const char *cannot_count(void)
{
  if (!COUNTING)
    return "the allocator cannot be counted here (not glibc, or a sanitizer's)";
  const char *pre = getenv("LD_PRELOAD");
  if (pre != NULL && strstr(pre, "vgpreload") != NULL)
    return "valgrind's allocator replaces the counting one";
#if defined(_OPENMP)
  if (omp_get_dynamic() || omp_get_thread_limit() < 2 || omp_get_max_active_levels() < 1)
    return "the OpenMP settings (OMP_DYNAMIC, OMP_THREAD_LIMIT, OMP_MAX_ACTIVE_LEVELS) make "
           "libgomp allocate a team at every region";
#endif
  return NULL;
}

static const reg_kind kinds[] = {
    {"hicp_register, pnn-opt", HICP_NN_PNN_OPT, 0, 0},
    {"hicp_register, strided scan", HICP_NN_PNN_OPT, 0, 1},
    {"hicp_register_cloud", HICP_NN_PNN_OPT, 0, 2},
    {"sigma filter, trim, max_dist", HICP_NN_PNN_OPT, 1, 0},
    {"brute force", HICP_NN_BRUTE, 0, 0},
    {"kd-tree", HICP_NN_KDTREE, 1, 0},
    {"zero", HICP_NN_ZERO, 0, 0},
    {"kdann", HICP_NN_KDANN, 0, 0},
    {"pnn", HICP_NN_PNN, 0, 0},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* 1: a scan larger than any before makes the context grow its blocks */
static void test_count_sees_growth(const hicp_model *m)
{
  scan_set small, large;
  open_scan_set(1, m, 500, 11, &small);
  open_scan_set(1, m, 4000, 12, &large);
  hicp_context *ctx = large.ctx;
  large.ctx = small.ctx; /* both on one context */
  int ok = register_once(&small, &kinds[0]) == 0;
  atomic_store(&allocations, 0);
  atomic_store(&counting, 1);
  ok = ok && register_once(&large, &kinds[0]) == 0;
  atomic_store(&counting, 0);
  char why[96];
  snprintf(why, sizeof why, "%ld allocations counted", atomic_load(&allocations));
  tap_report(ok && atomic_load(&allocations) > 0,
             "the count sees a registration's allocations (a scan larger than the last)", why);
  large.ctx = ctx;
  close_scan_set(&small);
  close_scan_set(&large);
}

/* 2: after the first registration of a size, none */
static void test_registrations(const hicp_model *m, int threads, size_t n)
{
  scan_set s;
  open_scan_set(threads, m, n, 20 + n, &s);
  for (size_t k = 0; k < NKINDS; k++) {
    int ok = register_once(&s, &kinds[k]) == 0; /* the first of its kind may allocate */
    atomic_store(&allocations, 0);
    atomic_store(&counting, 1);
    for (int rep = 0; ok && rep < 3; rep++)
      ok = register_once(&s, &kinds[k]) == 0;
    atomic_store(&counting, 0);
    const long got = atomic_load(&allocations);
    char name[160], why[96];
    snprintf(name, sizeof name, "%s, %d thread%s, %zu points: no allocation after the first",
             kinds[k].name, threads, threads > 1 ? "s" : "", n);
    snprintf(why, sizeof why, "%ld allocations in 3 registrations", got);
    tap_report(ok && got == 0, name, why);
  }
  close_scan_set(&s);
}

/* 3: a stream, after its first frames (untracked: on one thread, its one
 * worker runs every frame) */
static void test_stream(const hicp_model *m, int track, int threads, int ahead)
{
  scan_set s;
  open_scan_set(threads, m, 3000, 30, &s);
  hicp_reg_options o;
  six_iterations(&o);
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = track;
  hicp_stream *st = NULL;
  if (hicp_stream_create(s.ctx, m, &o, &bo, &st) != HICP_OK) {
    printf("Bail out! a stream: %s\n", hicp_context_error(s.ctx));
    exit(1);
  }
  int ok = stream_frames(st, &s, 8, ahead) == 0;
  atomic_store(&allocations, 0);
  atomic_store(&counting, 1);
  ok = ok && stream_frames(st, &s, 12, ahead) == 0;
  atomic_store(&counting, 0);
  const long got = atomic_load(&allocations);
  char name[160], why[96];
  snprintf(name, sizeof name,
           "%s stream, %d thread%s, %d outstanding: no allocation after the first frames",
           track ? "a tracked" : "an untracked", threads, threads > 1 ? "s" : "", ahead);
  snprintf(why, sizeof why, "%ld allocations in 12 frames", got);
  tap_report(ok && got == 0, name, why);
  hicp_stream_destroy(st);
  close_scan_set(&s);
}

/* 4: a batch allocates per call, not per frame */
static void test_batch(const hicp_model *m, int track, int threads)
{
  scan_set s;
  open_scan_set(threads, m, 3000, 40, &s);
  /* first batches: the crew and its blocks, each worker's at its first
   * frame (five batches of 10, so that every worker has had one) */
  long warm = batch_allocations(&s, track, 2);
  for (int k = 0; k < 5 && warm >= 0; k++)
    warm = batch_allocations(&s, track, 10);
  const long two = batch_allocations(&s, track, 2), ten = batch_allocations(&s, track, 10);
  char name[160], why[96];
  snprintf(name, sizeof name, "%s batch on %d thread%s: 10 frames allocate no more than 2 (%ld)",
           track ? "a tracked" : "an independent", threads, threads > 1 ? "s" : "", two);
  snprintf(why, sizeof why, "2 frames %ld allocations, 10 frames %ld", two, ten);
  tap_report(warm >= 0 && two >= 0 && ten == two, name, why);
  close_scan_set(&s);
}

/* The bytes held at most, above what was held before, while f runs. */
static long peak_of(void (*f)(void *), void *arg)
{
  const long base = atomic_load(&live);
  atomic_store(&peak, base);
  f(arg);
  return atomic_load(&peak) - base;
}

typedef struct {
  const hicp_model *m;
  const float *a, *b; /* frames of na and nb points */
  size_t na, nb;
  uint64_t limit;
  int rc;
} limit_case;

static hicp_context *limited(uint64_t limit)
{
  hicp_context_options co;
  hicp_context_options_init(&co);
  co.threads = 1;
  co.backend = HICP_BACKEND_CPU;
  co.memory_limit = limit;
  hicp_context *ctx = NULL;
  if (hicp_context_create(&co, &ctx) != HICP_OK)
    abort();
  return ctx;
}

static void single_b(void *arg)
{
  limit_case *c = arg;
  hicp_context *ctx = limited(c->limit);
  hicp_result r;
  hicp_result_init(&r);
  c->rc = hicp_register(ctx, c->m, c->b, c->nb, NULL, NULL, &r);
  hicp_context_destroy(ctx);
}

static void tracked_ab(void *arg)
{
  limit_case *c = arg;
  hicp_context *ctx = limited(c->limit);
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = 1;
  const float *frames[2] = {c->a, c->b};
  const size_t counts[2] = {c->na, c->nb};
  hicp_result r[2];
  hicp_result_init(&r[0]);
  hicp_result_init(&r[1]);
  c->rc = hicp_register_batch(ctx, c->m, frames, counts, 2, NULL, &bo, NULL, r);
  hicp_context_destroy(ctx);
}

static void tracked_stream_ab(void *arg)
{
  limit_case *c = arg;
  hicp_context *ctx = limited(c->limit);
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = 1;
  hicp_stream *st = NULL;
  c->rc = hicp_stream_create(ctx, c->m, NULL, &bo, &st);
  const float *frames[2] = {c->a, c->b};
  const size_t counts[2] = {c->na, c->nb};
  for (int i = 0; i < 2 && c->rc == HICP_OK; i++) {
    hicp_result r;
    hicp_result_init(&r);
    c->rc = hicp_stream_submit(st, frames[i], counts[i], NULL, NULL);
    if (c->rc == HICP_OK)
      c->rc = hicp_stream_receive(st, &r, 1);
    if (c->rc == HICP_OK)
      c->rc = r.error;
  }
  hicp_stream_destroy(st);
  hicp_context_destroy(ctx);
}

/* 5. A tracked batch holds its frames to the memory limit as the single
 *    call does: under the least limit at which hicp_register runs frame B,
 *    a tracked batch of a smaller frame A and then B runs both, B without
 *    its matches, and holds no more at its peak than the single call of B
 *    (stop 54's review: B ran beside the matches A had left, 4 bytes a
 *    point of A over the limit). */
static void test_limit_as_single_call(const hicp_model *m)
{
  limit_case c = {m, NULL, NULL, 40000, 50000, 0, 0};
  float *a = tap_surface(c.na, 11), *b = tap_surface(c.nb, 12);
  c.a = a;
  c.b = b;
  uint64_t lo = 1024, hi = UINT64_C(1) << 30; /* refused, and run */
  while (hi - lo > 1) {
    c.limit = lo + (hi - lo) / 2;
    single_b(&c);
    *(c.rc == HICP_OK ? &hi : &lo) = c.limit;
  }
  c.limit = hi;
  const long single = peak_of(single_b, &c);
  const int single_rc = c.rc;
  const long batch = peak_of(tracked_ab, &c);
  char why[256];
  snprintf(why, sizeof why,
           "limit %llu: hicp_register of B %d, peak %ld; tracked batch A, B %d, peak %ld",
           (unsigned long long)hi, single_rc, single, c.rc, batch);
  /* the batch's own few structures (its results' places, its team) beside */
  tap_report(single_rc == HICP_OK && c.rc == HICP_OK && batch <= single + 32768,
             "tracked batch held to the limit as the single call", why);
  /* A tracked stream, one frame at a time: its copy of B takes the place
   * of the single call's (hicp_register copies its scan too), and it keeps
   * A's copy for the frames to come (12 bytes a point, outside what it
   * counts), but not A's matches (4 bytes a point of A: with the
   * batch.c of b035984, before drop_matches, it held them beside B). */
  const long stream = peak_of(tracked_stream_ab, &c);
  const long kept = (long)(12 * c.na);
  snprintf(why, sizeof why,
           "limit %llu: single call's peak %ld + A's copy %ld; tracked stream A, B %d, peak %ld",
           (unsigned long long)hi, single, kept, c.rc, stream);
  tap_report(c.rc == HICP_OK && stream <= single + kept + 32768,
             "tracked stream held to the limit as the single call", why);
  free(a);
  free(b);
}

/* Three tracked frames of MB_N points, in a batch or a stream, into r. */
enum { MB_N = 3001, MB_FRAMES = 3 };

static int tracked_frames(const hicp_model *m, int stream, float *const *f, hicp_result *r)
{
  hicp_context *ctx = limited(0);
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = 1;
  const float *frames[MB_FRAMES];
  size_t counts[MB_FRAMES];
  for (int i = 0; i < MB_FRAMES; i++) {
    frames[i] = f[i];
    counts[i] = MB_N;
    hicp_result_init(&r[i]);
  }
  int rc = HICP_OK;
  if (!stream) {
    rc = hicp_register_batch(ctx, m, frames, counts, MB_FRAMES, NULL, &bo, NULL, r);
  } else {
    hicp_stream *st = NULL;
    rc = hicp_stream_create(ctx, m, NULL, &bo, &st);
    for (int i = 0; i < MB_FRAMES && rc == HICP_OK; i++) {
      rc = hicp_stream_submit(st, frames[i], counts[i], NULL, NULL);
      if (rc == HICP_OK)
        rc = hicp_stream_receive(st, &r[i], 1);
    }
    hicp_stream_destroy(st);
  }
  hicp_context_destroy(ctx);
  return rc;
}

/* 6. A tracked frame whose matches cannot be allocated (4 bytes a point:
 *    every malloc of 4 * MB_N bytes refused) runs without them, to the
 *    pose it reaches with them, as where the memory limit leaves no room
 *    (it failed with HICP_ENOMEM, helper-76), in a batch and a stream. */
static void test_matches_refused(const hicp_model *m)
{
  float *f[MB_FRAMES];
  for (int i = 0; i < MB_FRAMES; i++)
    f[i] = tap_surface(MB_N, 21 + (uint64_t)i);
  for (int stream = 0; stream <= 1; stream++) {
    hicp_result ref[MB_FRAMES], got[MB_FRAMES];
    const int ref_rc = tracked_frames(m, stream, f, ref);
    atomic_store(&refusals, 0);
    atomic_store(&refuse_size, 4 * (size_t)MB_N);
    const int rc = tracked_frames(m, stream, f, got);
    atomic_store(&refuse_size, 0);
    int same = ref_rc == HICP_OK && rc == HICP_OK;
    for (int i = 0; i < MB_FRAMES && same; i++)
      same = ref[i].error == 0 && got[i].error == 0 &&
             memcmp(&got[i].transform, &ref[i].transform, sizeof got[i].transform) == 0 &&
             got[i].iterations == ref[i].iterations;
    char name[128], why[256];
    snprintf(name, sizeof name, "a tracked %s's frames without memory for their matches",
             stream ? "stream" : "batch");
    snprintf(why, sizeof why, "rc %d (reference %d), %ld refused, frame errors %d %d %d", rc,
             ref_rc, atomic_load(&refusals), got[0].error, got[1].error, got[2].error);
    tap_report(same && atomic_load(&refusals) > 0, name, why);
  }
  for (int i = 0; i < MB_FRAMES; i++)
    free(f[i]);
}

/* 7. A file write refused for want of memory says so: HICP_ENOMEM, the
 *    code hicp.h gives for it, not HICP_EIO (stop 67's review), and the
 *    file it would have replaced is as it was.  The refused request is
 *    the copy of the target's name, whose length (200) is the test's. */
static void test_write_refused(void)
{
  char dir[] = "/tmp/hicp-alloc.XXXXXX", path[201];
  int ok = mkdtemp(dir) != NULL;
  if (ok) {
    const int at = snprintf(path, sizeof path, "%s/", dir);
    memset(path + at, 'p', sizeof path - 1 - (size_t)at);
    path[sizeof path - 1] = '\0';
    memcpy(path + sizeof path - 5, ".ply", 4);
  }
  float *pts = tap_surface(100, 5);
  hicp_context *ctx = NULL;
  hicp_cloud *c = NULL;
  ok = ok && hicp_context_create(NULL, &ctx) == HICP_OK &&
       hicp_cloud_from_xyz(ctx, pts, 100, 0, &c) == HICP_OK &&
       hicp_cloud_write_ply(ctx, c, NULL, path, HICP_PLY_ASCII) == HICP_OK;
  char before[8192] = "", after[8192] = "";
  FILE *f = ok ? fopen(path, "rb") : NULL;
  const size_t nb = f != NULL ? fread(before, 1, sizeof before, f) : 0;
  if (f != NULL)
    fclose(f);
  atomic_store(&refusals, 0);
  atomic_store(&refuse_size, strlen(path) + 1);
  const int rc = ok ? hicp_cloud_write_ply(ctx, c, NULL, path, HICP_PLY_BINARY) : HICP_OK;
  atomic_store(&refuse_size, 0);
  f = ok ? fopen(path, "rb") : NULL;
  const size_t na = f != NULL ? fread(after, 1, sizeof after, f) : 0;
  if (f != NULL)
    fclose(f);
  char why[512];
  snprintf(why, sizeof why, "rc %d, %ld refused, file %zu bytes before and %zu after: %s", rc,
           atomic_load(&refusals), nb, na, ctx != NULL ? hicp_context_error(ctx) : "no context");
  tap_report(ok && rc == HICP_ENOMEM && atomic_load(&refusals) > 0 && nb > 0 && nb == na &&
                 memcmp(before, after, nb) == 0,
             "a write refused for want of memory: HICP_ENOMEM, the old file kept", why);
  if (ok)
    remove(path);
  if (ok)
    rmdir(dir);
  hicp_cloud_destroy(c);
  hicp_context_destroy(ctx);
  free(pts);
}

int main(void)
{
  const char *why_not = cannot_count();
  if (why_not != NULL) {
    printf("1..0 # SKIP %s\n", why_not);
    return 0;
  }
  printf("1..%zu\n", 1 + 4 * NKINDS + 6 + 4 + 2 + 2 + 1);
  float *model_pts = tap_surface(6000, 7);
  hicp_context *ctx0 = NULL;
  hicp_model *m = NULL;
  if (hicp_context_create(NULL, &ctx0) != HICP_OK ||
      hicp_model_build(ctx0, model_pts, 6000, 0, NULL, &m) != HICP_OK) {
    printf("Bail out! the model: %s\n", ctx0 != NULL ? hicp_context_error(ctx0) : "no context");
    return 1;
  }
  test_count_sees_growth(m);
  for (int threads = 1; threads <= 2; threads++) {
    test_registrations(m, threads, 2000);
    test_registrations(m, threads, 9000); /* the copies run in parallel from 8,192 */
  }
  for (int ahead = 1; ahead <= 3; ahead += 2) {
    test_stream(m, 0, 1, ahead);
    test_stream(m, 1, 1, ahead);
    test_stream(m, 1, 2, ahead);
  }
  for (int track = 0; track <= 1; track++)
    for (int threads = 1; threads <= 2; threads++)
      test_batch(m, track, threads);
  test_limit_as_single_call(m);
  test_matches_refused(m);
  test_write_refused();
  hicp_model_destroy(m);
  hicp_context_destroy(ctx0);
  free(model_pts);
  return tap_failed() > 0 ? 1 : 0;
}
