/* context.c: hicp_context, its options, and cancellation. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "context.h"
#include "icp.h"
#include "topology.h"

void hicp_context_options_init_sized(hicp_context_options *opts, size_t size)
{
  hicp_context_options d;
  memset(&d, 0, sizeof d);
  d.threads = 0;
  d.backend = HICP_BACKEND_AUTO;
  hicp__init_sized(opts, size, &d, sizeof d);
}

static int default_threads_value;
static pthread_once_t default_threads_once = PTHREAD_ONCE_INIT;

/* Cores, not hardware threads: the walk is latency-bound and two hyperthreads
 * of one core share its load ports, so one worker per core is the default.
 * Those the first caller may run on (taskset, a batch system's cpuset):
 * more threads than that would only take turns. */
static void count_cores(void)
{
  int n = hicp__usable_cores();
  if (n <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (int)c : 1;
  }
  default_threads_value = n;
}

int hicp__default_threads(void)
{
  pthread_once(&default_threads_once, count_cores);
  return default_threads_value;
}

int hicp_context_create(const hicp_context_options *user, hicp_context **out)
{
  hicp_context_options o;
  hicp_context_options_init(&o);
  if (out == NULL)
    return HICP_EINVAL;
  *out = NULL;
  if (user != NULL && hicp__copy_sized(&o, sizeof o, user, offsetof(hicp_context_options, flags) + sizeof(unsigned), "hicp_context_options", NULL) != 0)
    return HICP_EINVAL;
  if (o.threads < 0 || o.threads > 4096 || (unsigned)o.backend > HICP_BACKEND_HYBRID ||
      o.flags != 0 || o.ndevices < 0 || o.ndevices > 1024 || (o.ndevices > 0 && o.devices == NULL))
    return HICP_EINVAL;
  for (int i = 0; i < o.ndevices; i++)
    if (o.devices[i] < 0)
      return HICP_EINVAL;

  hicp_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return HICP_ENOMEM;
  ctx->threads = o.threads > 0 ? o.threads : hicp__default_threads();
  ctx->backend = o.backend;
  ctx->memory_limit = o.memory_limit;
  atomic_init(&ctx->cancel, 0);
  if (o.ndevices > 0) {
    ctx->devices = malloc(sizeof(int) * (size_t)o.ndevices);
    if (ctx->devices == NULL) {
      free(ctx);
      return HICP_ENOMEM;
    }
    memcpy(ctx->devices, o.devices, sizeof(int) * (size_t)o.ndevices);
    ctx->ndevices = o.ndevices;
  }
  *out = ctx;
  return HICP_OK;
}

void hicp_context_destroy(hicp_context *ctx)
{
  if (ctx == NULL)
    return;
  hicp__gpu_release(ctx);
  free(ctx->scratch);
  free(ctx->devices);
  free(ctx);
}

int hicp_context_threads(const hicp_context *ctx)
{
  return ctx != NULL ? ctx->threads : 0;
}

int hicp_context_start_threads(hicp_context *ctx)
{
  if (ctx == NULL)
    return HICP_EINVAL;
  /* One thread has nothing to start, nor has a context whose registrations
   * run on CUDA only; more are OpenMP's team of the calling thread, which
   * libgomp keeps between parallel regions. */
  if (ctx->threads <= 1 || ctx->backend == HICP_BACKEND_CUDA)
    return 1;
  return hicp__cpu_start_threads(ctx->threads);
}

void hicp_context_cancel(hicp_context *ctx)
{
  if (ctx != NULL)
    atomic_fetch_add(&ctx->cancel, 1u);
}

struct hicp__gpu **hicp__context_gpu_slot(hicp_context *ctx)
{
  return &ctx->gpu;
}

unsigned hicp__cancel_count(const hicp_context *ctx)
{
  return atomic_load(&((hicp_context *)ctx)->cancel);
}

void hicp__cancel_begin(hicp_context *ctx)
{
  ctx->cancel_seen = hicp__cancel_count(ctx);
}

void hicp__cancel_begin_child(hicp_context *child, unsigned seen)
{
  child->parent_seen = seen;
}

int hicp__canceled(const hicp_context *ctx)
{
  if (ctx == NULL)
    return 0;
  if (hicp__cancel_count(ctx) != ctx->cancel_seen)
    return 1;
  return ctx->parent != NULL && hicp__cancel_count(ctx->parent) != ctx->parent_seen;
}

int hicp__context_is_worker(const hicp_context *ctx)
{
  return ctx != NULL && ctx->side_by_side;
}

int hicp__context_first_device(const hicp_context *ctx)
{
  return ctx != NULL && ctx->ndevices > 0 ? ctx->devices[0] : 0;
}

int hicp__context_device(const hicp_context *ctx, int logical)
{
  if (ctx != NULL && ctx->ndevices > 0)
    return ctx->devices[logical % ctx->ndevices];
  return logical;
}
