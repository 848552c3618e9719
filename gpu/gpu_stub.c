/* gpu_stub.c: the CUDA backend of a build without CUDA.  Every probe answers
 * "no device", so --backend auto runs on the CPU and --backend cuda fails
 * with HICP_ENODEVICE. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "scheduler.h"

int hicp__gpu_compiled(void)
{
  return 0;
}

int hicp__gpu_count(char *why, size_t why_len)
{
  if (why != NULL && why_len > 0) {
#if defined(HICP_CUDA_NOT_FOUND)
    /* the default --with-cuda=auto, without a usable toolkit: the summary
     * at the end of configure's output says what was missing */
    snprintf(why, why_len,
             "this build of hicp has no CUDA backend (configure found no usable CUDA toolkit)");
#else
    snprintf(why, why_len, "this build of hicp has no CUDA backend (configured --without-cuda)");
#endif
  }
  return 0;
}

int hicp__gpu_describe(int ordinal, hicp__gpu_info *info)
{
  (void)ordinal;
  (void)info;
  return HICP_ENODEVICE;
}

void hicp__gpu_release(hicp_context *ctx)
{
  (void)ctx;
}

int hicp__gpu_register(hicp_context *ctx, const hicp_model *m, const struct hicp__frame *f,
                       const struct hicp__plan *p, const struct hicp__xf *T0,
                       double t_start, struct hicp__icp_out *out)
{
  (void)t_start;
  (void)m;
  (void)f;
  (void)p;
  (void)T0;
  (void)out;
  return hicp__fail(ctx, HICP_ENODEVICE, "this build of hicp has no CUDA backend");
}

int hicp__gpu_nn(hicp_context *ctx, const hicp_model *m, const float *q, size_t n, int method,
                 uint32_t *vertex, float *d2, hicp_walk_stats *stats)
{
  (void)m;
  (void)q;
  (void)n;
  (void)method;
  (void)vertex;
  (void)d2;
  (void)stats;
  return hicp__fail(ctx, HICP_ENODEVICE, "this build of hicp has no CUDA backend");
}

int hicp__gpu_worker_init(hicp__worker *w, hicp_context *ctx, int logical)
{
  memset(w, 0, sizeof *w);
  (void)logical;
  return hicp__fail(ctx, HICP_ENODEVICE, "this build of hicp has no CUDA backend");
}
