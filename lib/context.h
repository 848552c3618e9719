/* context.h: the context object (C only: it uses C11 atomics). */
#ifndef HICP_CONTEXT_H
#define HICP_CONTEXT_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"

struct hicp_context {
  int threads;
  hicp_backend backend;
  int *devices;
  int ndevices;
  uint64_t memory_limit;
  int fixed_threads;          /* HICP_CONTEXT_FIXED_THREADS: no fewer under load */
  /* Cancellation counts requests rather than setting a flag, so that a
   * request can be dated: a call is cancelled by the requests made after it
   * began, a stream's frame by those made after it was submitted. */
  atomic_uint cancel;         /* hicp_context_cancel() requests so far, any thread */
  unsigned cancel_seen;       /* requests made before the current call began */
  char err[HICP_ERRMSG_MAX];  /* last error message */
  struct hicp__gpu *gpu;      /* created on first GPU use, NULL otherwise */
  struct hicp_context *parent; /* a batch or stream worker's context: cancelled with it */
  int side_by_side;            /* one of a crew running frames side by side (crew.c) */
  unsigned parent_seen;        /* the parent's requests before this worker's frame */
  /* A registration's working arrays and its copy of the scan, kept for
   * the next registration on this context (hicp__scratch in util.c). */
  void *scratch[HICP_SCRATCH_SLOTS];
  size_t scratch_size[HICP_SCRATCH_SLOTS];
  /* The workers of the last batch, kept for the next (batch.c). */
  struct hicp__crew *batch_crew;
};

/* The checks hicp__team_ready has made (they start and join threads), for
 * the tests to count. */
extern atomic_uint hicp__team_preflights;
/* The batch crews made (batch.c), for the tests to count. */
extern atomic_uint hicp__batch_crews_made;

#endif /* HICP_CONTEXT_H */
