/* segments.h: the items of a parallel region (pass A's scan points, a
 * query call's queries) handed to its threads in pieces, one contiguous
 * segment per thread.
 *
 * The items follow the scan's spatial order, so neighbouring items read
 * neighbouring parts of the model and the frame.  Handed out one block at
 * a time in order (a dynamic schedule), every thread would work all over
 * the model, and in each pass a thread would get other blocks than in the
 * pass before, whose matches and certificates the other core had just
 * written: on a 2,192-point scan a block took 40-60% longer on two threads
 * than on one.  Here each thread owns one segment, the same in every pass
 * of a registration (an equal share of the items), and takes its pieces
 * in order from the front.  A thread that has finished its own helps the
 * others from the back of their segments, in small pieces, so the threads
 * finish within a small piece of each other and each mostly sees its own
 * part of the model.
 *
 * A piece never crosses a multiple of `align` (pass A's chunks), and it is
 * made of whole blocks of `small` items aligned on their index (the last
 * block cut at the end): the segments' bounds are multiples of `small`,
 * and so is every cut, unless it is the end (pass A works in blocks of
 * HICP_CPU_BLOCK points, cpu/chunk.h).  Who takes a piece never changes a
 * result. */
#ifndef HICP_CPU_SEGMENTS_H
#define HICP_CPU_SEGMENTS_H

#include <sched.h>
#include <stdint.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#define HICP_SEGMENTS_MAX 256

/* One thread's segment: items lo .. hi-1 not yet handed out.  The owner
 * takes from lo, helpers from hi, under a spin lock held for a few
 * instructions (lo and hi change together; a lock rather than a
 * double-width compare-and-swap, which not every target has).  A cache
 * line each: the owner's takes then stay in its own cache. */
typedef struct hicp__segment {
  _Alignas(64) int lock; /* hicp__spin_lock */
  uint64_t lo, hi;
} hicp__segment;

typedef struct hicp__segments {
  hicp__segment seg[HICP_SEGMENTS_MAX];
  uint32_t n;      /* segments */
  uint64_t big;    /* the owner's pieces */
  uint64_t small;  /* the helpers' pieces */
  uint64_t align;  /* pieces stay between multiples of this */
} hicp__segments;

/* Items 0 .. nitems-1 in one segment per thread (at most
 * HICP_SEGMENTS_MAX, and none shorter than a helper's piece), the owner
 * taking pieces of `big` items, the helpers pieces of `small` (both >= 1),
 * none crossing a multiple of `align` (>= 1).  Pieces are whole blocks when
 * `big` and `align` are multiples of `small`. */
static inline void hicp__segments_init(hicp__segments *s, uint64_t nitems, int threads,
                                       uint64_t big, uint64_t small, uint64_t align)
{
  uint64_t n = threads < 1 ? 1u : threads > HICP_SEGMENTS_MAX ? HICP_SEGMENTS_MAX : (uint64_t)threads;
  if (nitems / small < n)
    n = nitems / small > 0 ? nitems / small : 1;
  s->n = (uint32_t)n;
  s->big = big;
  s->small = small;
  s->align = align;
  /* Equal shares, each bound rounded down to whole blocks of `small`
   * (n <= nitems / small, so none is empty), or to the nearest multiple
   * of `align` (itself a multiple of `small`) where that is within a
   * quarter of `align` of the share and there are at least as many whole
   * stretches of `align` items as segments (the shares are then at least
   * `align` apart, and the bounds at least `align` / 4 apart).  On a
   * multiple of `align`, the chunk of pass A before it and the one after
   * are each one thread's: its owner completes it, and sums it, as it goes,
   * rather than a chunk cut by the bound being completed, and summed, by
   * whoever ends the pass; further than a quarter chunk, the threads'
   * unequal shares cost more than that saves (docs/cpu-engine.md, "Small
   * tracked frames"). */
  const int whole = align > small && align % small == 0 && align != UINT64_MAX &&
                    nitems / align >= n;
  uint64_t lo = 0;
  for (uint64_t k = 0; k < n; k++) {
    uint64_t hi = nitems;
    if (k + 1 < n) {
      const uint64_t share = nitems * (k + 1) / n;
      const uint64_t near = (share + align / 2) / align * align;
      hi = whole && (near > share ? near - share : share - near) <= align / 4
               ? near
               : share / small * small;
    }
    s->seg[k].lock = 0;
    s->seg[k].lo = lo;
    s->seg[k].hi = hi;
    lo = hi;
  }
}

/* A lock held for a few instructions, so a waiter spins; past a few
 * thousand spins the holder has lost its core (more threads than cores),
 * and the waiter gives its own up.  hicp's own, in the data it guards,
 * rather than an OpenMP critical section: libgomp's named locks are the
 * process's, and one that another thread holds when the process forks
 * stays held in the child for ever (stop 49). */
static inline void hicp__spin_lock(int *lock)
{
  while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
    for (unsigned spins = 0; __atomic_load_n(lock, __ATOMIC_RELAXED); spins++) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (spins >= 4096) {
        sched_yield();
        spins = 0;
      }
    }
}

static inline void hicp__spin_unlock(int *lock)
{
  __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}

static inline void hicp__segment_lock(hicp__segment *g)
{
  hicp__spin_lock(&g->lock);
}

static inline void hicp__segment_unlock(hicp__segment *g)
{
  hicp__spin_unlock(&g->lock);
}

/* The calling thread's number in the team that shares the segments:
 * omp_get_thread_num() inside the parallel region, 0 outside one. */
static inline uint32_t hicp__segments_me(void)
{
#if defined(_OPENMP)
  return (uint32_t)omp_get_thread_num();
#else
  return 0;
#endif
}

/* Thread `me`'s next piece (hicp__segments_me() inside the parallel
 * region; 0 for a caller working alone, without a region, whose own
 * OpenMP thread number may be anything), items *i0 .. *i1-1, and 1; or 0
 * when every item is taken.  *at starts at 0: how many segments this
 * thread has emptied (its own first). */
static inline int hicp__segments_take(hicp__segments *s, uint32_t me, uint32_t *at, uint64_t *i0,
                                      uint64_t *i1)
{
  for (; *at < s->n; (*at)++) {
    hicp__segment *g = &s->seg[(me + *at) % s->n];
    /* a thread beyond the segments only helps */
    const int own = *at == 0 && me < s->n;
    hicp__segment_lock(g);
    const uint64_t lo = g->lo, hi = g->hi;
    if (lo < hi) {
      if (own) {
        const uint64_t edge = (lo / s->align + 1) * s->align;
        uint64_t e = hi - lo > s->big ? lo + s->big : hi;
        e = e < edge ? e : edge;
        g->lo = e;
        *i0 = lo;
        *i1 = e;
      } else {
        /* the last block, whole or cut at the end (lo and edge are block
         * bounds too when `big` and `align` are multiples of `small`) */
        uint64_t b = (hi - 1) / s->small * s->small;
        const uint64_t edge = (hi - 1) / s->align * s->align;
        b = b > edge ? b : edge;
        b = b > lo ? b : lo;
        g->hi = b;
        *i0 = b;
        *i1 = hi;
      }
      hicp__segment_unlock(g);
      return 1;
    }
    hicp__segment_unlock(g);
  }
  return 0;
}

#endif /* HICP_CPU_SEGMENTS_H */
