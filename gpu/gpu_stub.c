/* gpu_stub.c: the CUDA backend of a build without CUDA.  Every probe answers
 * "no device", so --backend auto runs on the CPU and --backend cuda fails
 * with HICP_ENODEVICE. */
#include "config.h"

#include <stdio.h>

#include "backend.h"

int hicp__gpu_compiled(void)
{
  return 0;
}

int hicp__gpu_count(char *why, size_t why_len)
{
  if (why != NULL && why_len > 0)
    snprintf(why, why_len, "this build of hicp has no CUDA backend (configured --without-cuda)");
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
