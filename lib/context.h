/* context.h: the context object (C only: it uses C11 atomics). */
#ifndef HICP_CONTEXT_H
#define HICP_CONTEXT_H

#include <stdatomic.h>

#include "internal.h"

struct hicp_context {
  int threads;
  hicp_backend backend;
  int *devices;
  int ndevices;
  uint64_t memory_limit;
  atomic_int cancel;          /* set by hicp_context_cancel() from any thread */
  char err[HICP_ERRMSG_MAX];  /* last error message */
  struct hicp__gpu *gpu;      /* created on first GPU use, NULL otherwise */
  struct hicp_context *parent; /* a batch worker's context: cancelled with it */
};

#endif /* HICP_CONTEXT_H */
