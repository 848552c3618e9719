/* segments.h: blocks of work handed to the threads of a parallel region in
 * contiguous segments.
 *
 * The blocks of a pass follow the scan's spatial order, so neighbouring
 * blocks read neighbouring parts of the model.  Handed out one by one in
 * order (a dynamic schedule), every thread would work all over the model
 * and each core's cache would have to hold all of it.  Here the blocks are
 * cut into one segment per thread; a thread takes its own segment's blocks
 * in order, then helps with the others' (from their next block on), so the
 * load still balances and each core mostly sees its own part of the model.
 * Who takes a block never changes a result. */
#ifndef HICP_CPU_SEGMENTS_H
#define HICP_CPU_SEGMENTS_H

#include <stdint.h>

#if defined(_OPENMP)
#include <omp.h>
#endif

#define HICP_SEGMENTS_MAX 256

typedef struct hicp__segments {
  uint64_t next[HICP_SEGMENTS_MAX]; /* the next block of each segment */
  uint64_t end[HICP_SEGMENTS_MAX];
  uint32_t n;
} hicp__segments;

/* Blocks 0 .. nblocks-1 in one segment per thread (at most
 * HICP_SEGMENTS_MAX), or in a single one, taken in order by all threads,
 * when there are fewer than 8 blocks per thread: a small pass's model fits
 * the caches anyway, and its segments, whole blocks each, would end
 * unevenly (a 2,192-point scan is 9 blocks: 5 and 4). */
static inline void hicp__segments_init(hicp__segments *s, uint64_t nblocks, int threads)
{
  s->n = threads < 1 ? 1u : threads > HICP_SEGMENTS_MAX ? HICP_SEGMENTS_MAX : (uint32_t)threads;
  if (nblocks < 8u * (uint64_t)s->n)
    s->n = 1;
  for (uint32_t k = 0; k < s->n; k++) {
    s->next[k] = nblocks / s->n * k + (k < nblocks % s->n ? k : nblocks % s->n);
    s->end[k] = s->next[k] + nblocks / s->n + (k < nblocks % s->n);
  }
}

/* Inside the parallel region: the calling thread's next block, or
 * UINT64_MAX when every block is taken.  *at starts at 0: how many
 * segments this thread has emptied. */
static inline uint64_t hicp__segments_take(hicp__segments *s, uint32_t *at)
{
  uint32_t me = 0;
#if defined(_OPENMP)
  me = (uint32_t)omp_get_thread_num();
#endif
  for (; *at < s->n; (*at)++) {
    const uint32_t k = (me + *at) % s->n;
    if (__atomic_load_n(&s->next[k], __ATOMIC_RELAXED) >= s->end[k])
      continue;
    const uint64_t b = __atomic_fetch_add(&s->next[k], 1u, __ATOMIC_RELAXED);
    if (b < s->end[k])
      return b;
  }
  return UINT64_MAX;
}

#endif /* HICP_CPU_SEGMENTS_H */
