/* cpu_backend.c: the CPU passes of an ICP iteration.  Pass A hands pieces
 * of points to the threads (cpu/segments.h) and each completed chunk's sum
 * to the thread that completed it; pass B hands out chunks (OpenMP's
 * dynamic schedule).  Whoever does it, each point's answer depends only on
 * the point, and each chunk's partial only on its own points, in the fixed
 * lane shape, so the results are the same bits for every thread count.
 * The per-point work is lib/pp/'s, but not always its code: on x86-64 with
 * AVX2 or AVX-512 (the default there) the fronts, row scans, backs and sums
 * run as vector copies of lib/pp's functions (cpu/ends_simd.h,
 * cpu/walk_simd.c, cpu/sum_simd.c), lane by lane the same operations in
 * the same order.  lib/pp's scalar functions run elsewhere (other
 * machines, HICP_SIMD=scalar), for what the vector code leaves to them
 * (methods without walks, models without a graph, the rare groups at a
 * hub, a near tie or a guard) and as the reference: the CUDA kernels run
 * it, and the tests hold every vector variant to it bit for bit. */
#include "config.h"

#include <string.h>

#include "chunk.h"
#include "fpenv.h"
#include "icp.h"
#include "pp/nn.h"
#include "scheduler.h"
#include "segments.h"

void hicp__chunk_sum(const hicp__mview *view, const hicp__frame *f, const hicp__select *sel,
                     uint32_t c, hicp__partial *out)
{
  hicp__partial lanes[HICP_LANES];
  const uint32_t base = c * f->chunk;
  const uint32_t end = hicp__chunk_end(f, c);
  /* Lane l sums points base + l + 256 j in order of j (pp/reduce.h), in a
   * local accumulator the compiler can keep in registers. */
  for (uint32_t l = 0; l < HICP_LANES; l++) {
    hicp__partial acc;
    hicp__partial_zero(&acc);
    for (uint32_t i = base + l; i < end; i += HICP_LANES)
      hicp__partial_add_pair(&acc, &f->p0[3 * (size_t)i], &view->vtx[f->match[i]], f->e2[i], sel);
    lanes[l] = acc;
  }
  hicp__partial_tree(lanes, HICP_LANES);
  *out = lanes[0];
}

/* Pass A's pieces of work (segments.h): a thread takes up to one wave of
 * its own segment's points at a time (cpu/chunk.h), and a helper pieces
 * of HICP_CPU_HELP points from the back of another's, so that the threads
 * finish within about a microsecond of each other. */
#define HICP_CPU_HELP HICP_CPU_BLOCK
_Static_assert(HICP_CPU_HELP <= HICP_CPU_WAVE, "a piece of pass A is at most one wave");
_Static_assert(HICP_CPU_WAVE % HICP_CPU_BLOCK == 0 && HICP_LANES % HICP_CPU_BLOCK == 0,
               "pieces of pass A are whole blocks (chunk.h; chunks are at least HICP_LANES)");

static void walkpart_add(hicp__walkpart *a, const hicp__walkpart *b)
{
  a->queries += b->queries;
  a->steps += b->steps;
  a->max_steps = b->max_steps > a->max_steps ? b->max_steps : a->max_steps;
  for (int k = 0; k < HICP_WALK_BINS; k++)
    a->hist[k] += b->hist[k];
}

/* One piece of pass A: the correspondences of points i0 .. i1-1 (at most
 * HICP_CPU_WAVE, inside one chunk), their walk statistics, and the chunk's
 * sums when this piece completed the chunk. */
static void pass_a_piece(const hicp__mview *view, hicp__frame *f, const hicp__xf *T, int method,
                         const hicp__select *sel, hicp__chunk_fn correspond, hicp__sum_fn sum,
                         uint32_t i0, uint32_t i1)
{
  const uint32_t c = i0 / f->chunk;
  hicp__walkpart w;
  memset(&w, 0, sizeof w);
  correspond(view, f, T, method, i0, i1, &w);
  hicp__spin_lock(&f->walk_lock);
  walkpart_add(&f->walk[c], &w);
  hicp__spin_unlock(&f->walk_lock);
  /* The thread that completes a chunk sums it at once, while the others go
   * on with later pieces: no barrier between the correspondences and the
   * sums, and on small scans (up to chunk_points points, 1,024 by default,
   * are one chunk) no thread waits for one to sum alone.  The acquire-release count makes every
   * match and distance of the chunk visible to the thread that sums it. */
  const uint32_t in_chunk = hicp__chunk_end(f, c) - c * f->chunk;
  if (__atomic_add_fetch(&f->points_done[c], i1 - i0, __ATOMIC_ACQ_REL) == in_chunk)
    sum(view, f, sel, c, &f->part[c]);
}

/* Whether pass A should take no more pieces: the budget is spent or the
 * registration canceled (hicp__frame.deadline, halt_ctx).  The first thread
 * to see it says so in f->halted, which the others then read instead of
 * the clock.  A clock read costs about 20 ns, against some microseconds
 * for a piece of points. */
static int halt_now(hicp__frame *f)
{
  if (__atomic_load_n(&f->halted, __ATOMIC_RELAXED))
    return 1;
  if ((f->deadline > 0.0 && hicp__now_ms() >= f->deadline) || hicp__canceled(f->halt_ctx)) {
    __atomic_store_n(&f->halted, 1, __ATOMIC_RELAXED);
    return 1;
  }
  return 0;
}

/* Thread `me`'s share of pass A: pieces of its own segment, then of the
 * others', until none is left or the pass is to stop. */
static void pass_a_pieces(const hicp__mview *view, hicp__frame *f, const hicp__xf *T, int method,
                          const hicp__select *sel, hicp__chunk_fn correspond, hicp__sum_fn sum,
                          hicp__segments *segs, uint32_t p0, uint32_t me)
{
  uint32_t at = 0;
  for (uint64_t i0, i1; !halt_now(f) && hicp__segments_take(segs, me, &at, &i0, &i1);)
    pass_a_piece(view, f, T, method, sel, correspond, sum, p0 + (uint32_t)i0, p0 + (uint32_t)i1);
}

void hicp__cpu_pass_a(const hicp__mview *view, hicp__frame *f, const hicp__xf *T, int method,
                      const hicp__select *sel, uint32_t c0, uint32_t c1, int threads)
{
  const hicp__chunk_fn correspond = hicp__cpu_simd_chunk(view);
  const hicp__sum_fn sum = hicp__cpu_simd_sum();
  const uint32_t p0 = c0 * f->chunk, p1 = c1 > c0 ? hicp__chunk_end(f, c1 - 1) : p0;
  for (uint32_t c = c0; c < c1; c++) {
    memset(&f->walk[c], 0, sizeof f->walk[c]);
    f->points_done[c] = 0;
  }
  /* one segment of points per thread, the same in every pass */
  hicp__segments segs;
  hicp__segments_init(&segs, p1 - p0, threads, HICP_CPU_WAVE, HICP_CPU_HELP, f->chunk);
  /* One thread works without a parallel region: a region of one thread
   * still costs libgomp a team's set-up in every pass, 1-2.5% of a small
   * registration on one thread (boeing, docs/cpu-engine.md). */
  if (threads <= 1) {
    pass_a_pieces(view, f, T, method, sel, correspond, sum, &segs, p0, 0);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
    pass_a_pieces(view, f, T, method, sel, correspond, sum, &segs, p0, hicp__segments_me());
    hicp__fpenv_leave(&fe);
  }
}

void hicp__cpu_pass_b(const hicp__mview *view, hicp__frame *f, const hicp__select *sel,
                      uint32_t c0, uint32_t c1, int threads)
{
  const long long first = c0, last = c1;
  const hicp__sum_fn sum = hicp__cpu_simd_sum();
  if (threads <= 1) {
    for (long long c = first; c < last; c++)
      sum(view, f, sel, (uint32_t)c, &f->part[c]);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
#pragma omp for schedule(dynamic, 1)
    for (long long c = first; c < last; c++)
      sum(view, f, sel, (uint32_t)c, &f->part[c]);
    hicp__fpenv_leave(&fe);
  }
}

int hicp__cpu_start_threads(int threads)
{
  int ran = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp atomic
    ran++;
  }
  hicp__team_ended(ran); /* its threads now spin a while (lib/contention.c) */
  return ran;
}

/* The CPU as a scheduler worker (lib/scheduler.h). */
static int cpu_begin(hicp__worker *w, const hicp_model *m, hicp__frame *f)
{
  (void)w;
  (void)m;
  (void)f;
  return HICP_OK;
}

static int cpu_pass_a(hicp__worker *w, const hicp_model *m, hicp__frame *f, const hicp__xf *T,
                      int method, const hicp__select *sel, uint32_t c0, uint32_t c1)
{
  hicp__mview view = hicp__model_view(m);
  hicp__cpu_pass_a(&view, f, T, method, sel, c0, c1, w->threads);
  return HICP_OK;
}

static int cpu_pass_b(hicp__worker *w, const hicp_model *m, hicp__frame *f,
                      const hicp__select *sel, uint32_t c0, uint32_t c1)
{
  hicp__mview view = hicp__model_view(m);
  hicp__cpu_pass_b(&view, f, sel, c0, c1, w->threads);
  return HICP_OK;
}

static void cpu_end(hicp__worker *w)
{
  (void)w;
}

static const hicp__worker_ops cpu_ops = {cpu_begin, cpu_pass_a, cpu_pass_b, cpu_end, cpu_end};

void hicp__cpu_worker_init(hicp__worker *w, hicp_context *ctx, int threads)
{
  memset(w, 0, sizeof *w);
  w->ops = &cpu_ops;
  w->ctx = ctx;
  w->threads = threads > 0 ? threads : 1;
}
