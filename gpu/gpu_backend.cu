/* gpu_backend.cu: the CUDA backend.
 *
 * One registration is one persistent, cooperative kernel: every iteration
 * (apply + walk + chunk sums, the combine, the filters, the stop test and
 * Horn's solve) runs on the device, separated by grid-wide barriers, so the
 * host launches once and waits once.  The per-point and per-iteration
 * arithmetic and decisions are the shared code of lib/pp/ (the same
 * functions the CPU runs); the sums are the same additions in parallel
 * form (chunk_sums, block_tree and combine against hicp__chunk_sum and
 * hicp__partial_tree), in the documented shape: a block of 256 threads is a
 * chunk's 256 lanes; thread l sums points l, l + 256, ... in order; the lanes
 * meet in the halving tree (shared memory for s = 128..32, warp shuffles for
 * s = 16..1); chunk partials meet in the same tree over chunk indices.  The
 * results are therefore the CPU's bits (docs/design.md).
 *
 * Every CUDA call is checked; its error becomes HICP_EDEVICE (or
 * HICP_ENOMEM for device memory, HICP_ENODEVICE) with CUDA's message, and
 * device memory is released on every path. */
#include "config.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

extern "C" {
#include "backend.h"
#include "icp.h"
#include "model.h"
#include "scheduler.h"
}
#include "pp/nn.h"

namespace cg = cooperative_groups;

#define THREADS HICP_LANES /* one thread per lane */

/* ------------------------------------------------------------------------ */
/* Errors */

static int cuda_fail(hicp_context *ctx, cudaError_t e, const char *what)
{
  int code = HICP_EDEVICE;
  if (e == cudaErrorMemoryAllocation)
    code = HICP_ENOMEM;
  else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice)
    code = HICP_ENODEVICE;
  const char *msg = cudaGetErrorString(e);
  if (code == HICP_ENOMEM)
    return hicp__fail(ctx, code, "CUDA: out of device memory (%s)", what);
  return hicp__fail(ctx, code, "CUDA error in %s: %s", what, msg);
}

/* Fault injection for the tests (tests/test_gpu.c, docs/robustness.md):
 * HICP_GPU_FAULT=alloc makes device allocations fail as if the device were
 * out of memory, =kernel makes kernel launches fail, =lost makes every call
 * fail as if the device had been lost.  Unset in normal use. */
static int fault(const char *kind)
{
  const char *f = getenv("HICP_GPU_FAULT");
  return f != NULL && (strcmp(f, kind) == 0 || strcmp(f, "lost") == 0);
}

/* rc-chaining: run `call` only while everything has succeeded. */
#define TRY(call)                                  \
  do {                                             \
    if (rc == HICP_OK) {                           \
      cudaError_t e_ = (call);                     \
      if (e_ != cudaSuccess)                       \
        rc = cuda_fail(ctx, e_, #call);            \
    }                                              \
  } while (0)

/* The caller's CUDA state, as it was, at every way out of the library: its
 * thread's current device (hicp sets its own device for its calls), and
 * its last error (cudaGetLastError), which hicp's failed calls leave to be
 * cleared only when the caller had none pending: a pending error stays the
 * caller's to read, and is never taken for hicp's own (hicp's launches
 * report through cudaLaunchKernel's return, not the last error).  Stop
 * 55's review: an application on device 1 found itself on device 0 after a
 * registration, and a tracked hybrid frame failed on the caller's own
 * pending error.  One per entry point, and per worker operation (a hybrid
 * team runs its first worker on the caller's thread). */
struct caller_cuda_state {
  int device;
  bool have_device;
  bool error_pending;
  caller_cuda_state()
  {
    error_pending = cudaPeekAtLastError() != cudaSuccess;
    have_device = cudaGetDevice(&device) == cudaSuccess;
  }
  ~caller_cuda_state()
  {
    int now;
    if (have_device && cudaGetDevice(&now) == cudaSuccess && now != device)
      cudaSetDevice(device);
    if (!error_pending)
      cudaGetLastError();
  }
  caller_cuda_state(const caller_cuda_state &) = delete;
  caller_cuda_state &operator=(const caller_cuda_state &) = delete;
};

/* ------------------------------------------------------------------------ */
/* Per-context device state: the device, a stream, uploaded models. */

struct dev_model {
  uint64_t uid;
  hicp__mview view; /* device pointers */
  void *blocks[9];  /* one per array of the view (device_model) */
  int nblocks;
};

#define MODEL_CACHE 4

struct reg_buffers;
static void reg_buffers_release(struct reg_buffers *r);

struct hicp__gpu {
  int device;
  cudaStream_t stream;
  dev_model models[MODEL_CACHE];
  int nmodels;
  int next_evict;
  struct reg_buffers *reg; /* hicp__gpu_register's buffers, kept */
};

static void free_model(dev_model *d)
{
  for (int i = 0; i < d->nblocks; i++)
    cudaFree(d->blocks[i]);
  memset(d, 0, sizeof *d);
}

extern "C" int hicp__gpu_compiled(void)
{
  return 1;
}

extern "C" int hicp__gpu_count(char *why, size_t why_len)
{
  caller_cuda_state keep;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    /* With no driver at all the runtime says "insufficient driver": the
     * driver's version, 0, tells the two apart (stop 55's review) */
    int driver = 0;
    const int no_driver = e == cudaErrorInsufficientDriver &&
                          cudaDriverGetVersion(&driver) == cudaSuccess && driver == 0;
    if (why != NULL && why_len > 0)
      snprintf(why, why_len, "no usable CUDA device (%s)",
               no_driver ? "no NVIDIA driver is installed" : cudaGetErrorString(e));
    return 0;
  }
  if (n == 0 && why != NULL && why_len > 0)
    snprintf(why, why_len, "no CUDA device found");
  return n;
}

extern "C" int hicp__gpu_describe(int ordinal, hicp__gpu_info *info)
{
  caller_cuda_state keep;
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess)
    return HICP_ENODEVICE;
  memset(info, 0, sizeof *info);
  info->ordinal = ordinal;
  /* the driver's name field is 256 bytes; ours keeps the first 127 */
  snprintf(info->name, sizeof info->name, "%.*s", (int)sizeof info->name - 1, p.name);
  info->cc_major = p.major;
  info->cc_minor = p.minor;
  info->sm_count = p.multiProcessorCount;
  info->memory_bytes = p.totalGlobalMem;
  snprintf(info->pci_bus_id, sizeof info->pci_bus_id, "%04x:%02x:%02x.0", p.pciDomainID,
           p.pciBusID, p.pciDeviceID);
  return HICP_OK;
}

static void gpu_destroy(struct hicp__gpu *g)
{
  if (g == NULL)
    return;
  cudaSetDevice(g->device);
  for (int i = 0; i < g->nmodels; i++)
    free_model(&g->models[i]);
  reg_buffers_release(g->reg);
  if (g->stream != NULL)
    cudaStreamDestroy(g->stream);
  free(g);
}

extern "C" void hicp__gpu_release(hicp_context *ctx)
{
  caller_cuda_state keep;
  struct hicp__gpu **slot = hicp__context_gpu_slot(ctx);
  gpu_destroy(*slot);
  *slot = NULL;
}

/* Device state for one logical device: a stream and a model cache. */
static int gpu_create(hicp_context *ctx, int device, struct hicp__gpu **out)
{
  char why[256];
  int n = hicp__gpu_count(why, sizeof why);
  if (n == 0)
    return hicp__fail(ctx, HICP_ENODEVICE, "%s", why);
  if (device < 0 || device >= n)
    return hicp__fail(ctx, HICP_ENODEVICE, "no CUDA device %d (this host has %d)", device, n);
  struct hicp__gpu *g = (struct hicp__gpu *)calloc(1, sizeof *g);
  if (g == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for CUDA device %d's state", device);
  g->device = device;
  int rc = HICP_OK;
  TRY(cudaSetDevice(device));
  TRY(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  if (rc != HICP_OK) {
    free(g);
    return rc;
  }
  *out = g;
  return HICP_OK;
}

/* The context's device state, created on first use. */
static int gpu_state(hicp_context *ctx, struct hicp__gpu **out)
{
  struct hicp__gpu **slot = hicp__context_gpu_slot(ctx);
  if (*slot != NULL) {
    *out = *slot;
    cudaError_t e = cudaSetDevice((*slot)->device);
    return e == cudaSuccess ? HICP_OK : cuda_fail(ctx, e, "cudaSetDevice");
  }
  int rc = gpu_create(ctx, hicp__context_first_device(ctx), slot);
  *out = *slot;
  return rc;
}

/* Copies `bytes` from host to a new device block owned by `d`. */
static int upload(hicp_context *ctx, struct hicp__gpu *g, dev_model *d, const void *src,
                  size_t bytes, void **dst)
{
  int rc = HICP_OK;
  *dst = NULL;
  if (src == NULL || bytes == 0)
    return HICP_OK;
  /* Under the fault the model's upload fails too, at its second block,
   * so that the clean-up of a part-uploaded model (its blocks freed, the
   * cache kept dense) is tested. */
  if (d->nblocks > 0 && fault("alloc"))
    return cuda_fail(ctx, fault("lost") ? cudaErrorDevicesUnavailable : cudaErrorMemoryAllocation,
                     "cudaMalloc");
  TRY(cudaMalloc(dst, bytes));
  if (rc == HICP_OK)
    d->blocks[d->nblocks++] = *dst;
  TRY(cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, g->stream));
  return rc;
}

/* The model on the device (uploaded once per context, cached by uid). */
static int device_model(hicp_context *ctx, struct hicp__gpu *g, const hicp_model *m,
                        hicp__mview *view)
{
  for (int i = 0; i < g->nmodels; i++)
    if (g->models[i].uid == m->uid) {
      *view = g->models[i].view;
      return HICP_OK;
    }
  int slot;
  if (g->nmodels < MODEL_CACHE) {
    slot = g->nmodels++;
  } else {
    slot = g->next_evict;
    g->next_evict = (g->next_evict + 1) % MODEL_CACHE;
    free_model(&g->models[slot]);
  }
  dev_model *d = &g->models[slot];
  memset(d, 0, sizeof *d);
  hicp__mview host = hicp__model_view(m);
  hicp__mview v = host;
  int rc = HICP_OK;
  /* Every array the per-point code reads (hicp__mview), in one device block
   * each; arrays a model lacks (no Delaunay graph, so no start table) stay
   * NULL.  The start table's size is the one hicp_model_get_info reports. */
  hicp_model_info info;
  hicp__model_bytes(m, &info);
  const void *src[9] = {host.vtx,   host.row,     host.nbr, host.safe_r2, host.ecode,
                        host.eunit, host.kd,      host.kd_pts, host.start};
  const size_t bytes[9] = {sizeof(hicp__vtx) * m->nv,  sizeof(uint32_t) * ((size_t)m->nv + 1),
                           sizeof(uint32_t) * m->nedges, sizeof(float) * m->nv,
                           (size_t)m->nedges,            sizeof(float) * m->nv,
                           sizeof(hicp__kdnode) * m->nkd, sizeof(hicp__vtx) * m->nv,
                           (size_t)info.bytes_start};
  void *dev[9] = {NULL};
  for (int i = 0; i < 9 && rc == HICP_OK; i++)
    rc = upload(ctx, g, d, src[i], bytes[i], &dev[i]);
  v.vtx = (const hicp__vtx *)dev[0];
  v.row = (const uint32_t *)dev[1];
  v.nbr = (const uint32_t *)dev[2];
  v.safe_r2 = (const float *)dev[3];
  v.ecode = (const uint8_t *)dev[4];
  v.eunit = (const float *)dev[5];
  v.kd = (const hicp__kdnode *)dev[6];
  v.kd_pts = (const hicp__vtx *)dev[7];
  /* Walks with no previous match (the first pass) start at the start
   * table's vertex, as on the CPU: one load in place of a kd descent's
   * dozen, and the same start on both backends. */
  v.start = (const uint32_t *)dev[8];
  TRY(cudaStreamSynchronize(g->stream));
  if (rc != HICP_OK) {
    free_model(d);
    g->nmodels--;
    if (slot != g->nmodels) /* keep the cache dense */
      g->models[slot] = g->models[g->nmodels];
    return rc;
  }
  d->uid = m->uid;
  d->view = v;
  *view = v;
  return HICP_OK;
}

/* ------------------------------------------------------------------------ */
/* Device side */

/* Iteration state, in device memory, read by every block after a barrier. */
struct dev_walk {
  unsigned long long queries, steps, max_steps;
  unsigned long long hist[HICP_WALK_BINS];
};

struct dev_state {
  hicp__iter it;           /* the pose, the window, k (pp/iter.h) */
  int stop;                /* HICP__GO while running */
  int filtering;           /* pass B needed this iteration */
  unsigned arrived;        /* blocks done with this iteration's chunk sums */
  hicp__partial tot;
  hicp__select sel;        /* selection of the current iteration */
  dev_walk walk;
  unsigned long long radix_prefix, radix_rank;
  unsigned long long ns_correspond, ns_reduce, ns_solve;
  unsigned long long t_start, t_iter;
};

struct kparams {
  hicp__mview m;
  const float *p0;
  uint32_t n, nchunks, chunk;
  uint32_t *match;
  hicp__track *track;
  double *e2;
  hicp__partial *part;
  hicp__partial *tree;     /* scratch for the combine when shared memory is too small */
  hicp__walkpart *walk;    /* per chunk (the scheduler's range passes) */
  unsigned long long *hist; /* 256 counters for the trim's radix select */
  int method;
  hicp__conv conv;
  double s_noise; /* hicp__frame's */
  double max_d2, trim, sigma;
  int filter_start;
  hicp__xf T0;                    /* the initial transform */
  unsigned long long budget_ns;   /* time budget left at launch, 0: none */
  volatile int *halt;             /* mapped host flag: 0, HALT_CANCEL, HALT_TIME */
  dev_state *st;
  dev_state *fin;                 /* mapped host copy of the final state */
};

/* What the host asks of a running kernel through the mapped flag, read
 * once an iteration: stop as canceled (hicp_context_cancel()), or stop as
 * out of time.  The kernel counts its budget from its own start, but a
 * kernel can wait behind other work on the device (another context's
 * registration that fills it): the host, which counts from the call, says
 * when the whole budget is spent. */
enum { HALT_CANCEL = 1, HALT_TIME = 2 };

__device__ __forceinline__ unsigned long long global_ns()
{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Fields summed side by side by block_tree: 12 x 256 doubles of shared
 * memory, the 24 fields in two rounds. */
#define TREE_FIELDS 12
typedef double tree_sh[TREE_FIELDS][THREADS];

/* The 256 lanes of a block into one partial, by the halving tree: at each
 * level s = 128, 64, 32, lane i < s of every field becomes a[i] + a[i + s]
 * (all fields of a level at once, one barrier per level), then each warp
 * finishes fields of its own with shuffles for s = 16..1.  The additions,
 * and so the bits, are those of hicp__partial_tree's lane tree on the CPU. */
__device__ void block_tree(const hicp__partial &acc, tree_sh &sh, hicp__partial *out)
{
  const unsigned t = threadIdx.x, lane = t & 31u, warp = t >> 5;
  HICP_UNROLL
  for (int h = 0; h < HICP_PF_COUNT; h += TREE_FIELDS) {
    HICP_UNROLL
    for (int f = 0; f < TREE_FIELDS; f++)
      sh[f][t] = acc.v[h + f];
    __syncthreads();
    for (unsigned s = 128; s >= 32; s >>= 1) {
      for (unsigned w = t; w < s * TREE_FIELDS; w += THREADS) {
        const unsigned f = w / s, i = w % s;
        sh[f][i] = sh[f][i] + sh[f][i + s];
      }
      __syncthreads();
    }
    for (unsigned f = warp; f < TREE_FIELDS; f += THREADS / 32) {
      double v = sh[f][lane];
      for (unsigned s = 16; s >= 1; s >>= 1) {
        double o = __shfl_down_sync(0xffffffffu, v, s);
        v = v + o; /* lane i: a[i] + a[i + s], as on the CPU */
      }
      if (lane == 0)
        out->v[h + f] = v;
    }
    __syncthreads();
  }
}

/* A block's walk statistics: integers, so any order of the atomic adds
 * gives the same totals. */
struct block_walk {
  unsigned long long queries, steps;
  unsigned max_steps;
  unsigned long long hist[HICP_WALK_BINS];
};

__device__ void block_walk_zero(block_walk *bw)
{
  if (threadIdx.x == 0) {
    bw->queries = bw->steps = 0;
    bw->max_steps = 0;
    for (int b = 0; b < HICP_WALK_BINS; b++)
      bw->hist[b] = 0;
  }
  __syncthreads();
}

__device__ __forceinline__ void block_walk_add(block_walk *bw, const hicp__nn_res &r)
{
  if (r.walked) {
    atomicAdd(&bw->queries, 1ull);
    atomicAdd(&bw->steps, (unsigned long long)r.steps);
    atomicMax(&bw->max_steps, r.steps);
    atomicAdd(&bw->hist[hicp__walk_bin(r.steps)], 1ull);
  }
}

/* One scan point of pass A: apply T, the nearest neighbour, the pair's
 * squared distance.  The match and distance go to memory for the chunk
 * sums (chunk_sums), which add them in the fixed lane order. */
__device__ __forceinline__ hicp__nn_res point_pass_a(const kparams &P, uint32_t i,
                                                     const hicp__xf &T)
{
  float p[3] = {P.p0[3 * (size_t)i], P.p0[3 * (size_t)i + 1], P.p0[3 * (size_t)i + 2]};
  double qd[3];
  float q[3];
  hicp__pass_query(&T, p, qd, q);
  hicp__nn_res r = hicp__nn_track4(&P.m, q, P.method, P.match[i], &P.track[i]);
  hicp__pass_answer(P.match, P.e2, i, qd, P.m.vtx, r.v);
  return r;
}

/* The sums of chunk c under selection sel from the stored matches and
 * distances: lane l adds points l, l + 256, ... of the chunk in order, then
 * the lanes meet in block_tree (pass A's sums, and pass B's). */
__device__ void chunk_sums(const kparams &P, uint32_t c, const hicp__select &sel, tree_sh &sh)
{
  hicp__partial acc;
  hicp__partial_zero(&acc);
  const uint32_t base = c * P.chunk;
  const uint32_t end = hicp__chunk_end_of(c, P.chunk, P.n);
  for (uint32_t i = base + threadIdx.x; i < end; i += THREADS) {
    float p[3] = {P.p0[3 * (size_t)i], P.p0[3 * (size_t)i + 1], P.p0[3 * (size_t)i + 2]};
    hicp__partial_add_pair(&acc, p, &P.m.vtx[P.match[i]], P.e2[i], &sel);
  }
  block_tree(acc, sh, &P.part[c]);
}

/* One block: the chunk partials by the halving tree over chunk indices, each
 * level in parallel over (pair, field); same additions as
 * hicp__partial_tree.  In shared memory when they fit (scratch: the
 * block's tree_sh), else in P.tree.  The partials were written by other
 * blocks: read through L2 (__ldcg). */
__device__ void combine(const kparams &P, tree_sh &scratch, hicp__partial *tot)
{
  const uint32_t n = P.nchunks;
  const uint32_t words = n * HICP_PF_COUNT;
  double *t = words <= TREE_FIELDS * THREADS ? &scratch[0][0] : &P.tree[0].v[0];
  const double *src = &P.part[0].v[0];
  __syncthreads(); /* scratch may still be in use by block_tree */
  for (uint32_t w = threadIdx.x; w < words; w += blockDim.x)
    t[w] = __ldcg(&src[w]);
  __syncthreads();
  uint32_t s = 1;
  while (s < n)
    s <<= 1;
  for (s >>= 1; s >= 1; s >>= 1) {
    for (uint32_t w = threadIdx.x; w < s * HICP_PF_COUNT; w += blockDim.x) {
      uint32_t i = w / HICP_PF_COUNT, f = w % HICP_PF_COUNT;
      if (i + s < n)
        t[i * HICP_PF_COUNT + f] = t[i * HICP_PF_COUNT + f] + t[(i + s) * HICP_PF_COUNT + f];
    }
    __syncthreads();
  }
  for (uint32_t f = threadIdx.x; f < HICP_PF_COUNT; f += blockDim.x)
    tot->v[f] = t[f];
  __syncthreads();
}

/* Trimmed ICP's threshold: the exact k-th smallest squared distance among
 * the candidates, by an 8-pass radix select on the (monotone) bit patterns
 * of the non-negative doubles.  Counts are integers: the same value as the
 * CPU's quickselect. */
__device__ void trim_threshold(const kparams &P, cg::grid_group &g, const hicp__select &sel,
                               unsigned *shist)
{
  dev_state *st = P.st;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const double keep = hicp__trim_keep(P.trim, st->tot.v[HICP_PF_N_C]);
    st->radix_prefix = 0;
    st->radix_rank = (unsigned long long)keep - 1ull;
  }
  for (int pass = 7; pass >= 0; pass--) {
    if (blockIdx.x == 0)
      for (int b = threadIdx.x; b < 256; b += blockDim.x)
        P.hist[b] = 0;
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
      shist[b] = 0;
    g.sync();
    const unsigned long long prefix = st->radix_prefix;
    const unsigned long long mask = pass == 7 ? 0ull : ~0ull << (8 * (pass + 1));
    for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < P.n; i += gridDim.x * blockDim.x) {
      double e2 = P.e2[i];
      if (!hicp__is_candidate(e2, &sel))
        continue;
      unsigned long long key = (unsigned long long)__double_as_longlong(e2);
      if ((key & mask) == prefix)
        atomicAdd(&shist[(key >> (8 * pass)) & 255u], 1u);
    }
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
      if (shist[b] != 0)
        atomicAdd(&P.hist[b], (unsigned long long)shist[b]);
    g.sync();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      unsigned long long rank = st->radix_rank, below = 0;
      int digit = 0;
      for (; digit < 255; digit++) {
        if (below + P.hist[digit] > rank)
          break;
        below += P.hist[digit];
      }
      st->radix_rank = rank - below;
      st->radix_prefix = prefix | ((unsigned long long)digit << (8 * pass));
    }
    g.sync();
  }
}

/* One thread, the end of iteration k: the stop tests on the sums, else
 * Horn's solve for the next transform; the step times. */
__device__ void finish_iteration(const kparams &P, unsigned long long t1,
                                 unsigned long long t2)
{
  dev_state *st = P.st;
  const hicp__partial *tot = &st->tot;
  double mse;
  int stop = hicp__iter_sums(&st->it, &P.conv, tot, &mse);
  if (stop == HICP__GO) {
    const int halt = P.halt != NULL ? *P.halt : 0;
    const int out_of_time =
        halt == HALT_TIME || (P.budget_ns != 0 && global_ns() - st->t_start >= P.budget_ns);
    stop = hicp__iter_halt(halt == HALT_CANCEL, out_of_time);
  }
  if (stop == HICP__GO)
    hicp__iter_next(&st->it, tot, P.s_noise, mse);
  else
    st->stop = stop;
  const unsigned long long t3 = global_ns();
  st->ns_correspond += t1 - st->t_iter;
  st->ns_reduce += t2 - t1;
  st->ns_solve += t3 - t2;
  st->t_iter = t3;
}

/* The whole registration.  Per iteration, with a grid-wide barrier after
 * each step:
 *   1. pass A, one scan point per thread over the grid: apply, nearest
 *      neighbour, squared distance (matches and distances to memory);
 *   2. the chunk sums, one chunk per block, in the fixed lane order; the
 *      last block to finish combines the chunk partials, sets the sigma
 *      filter's bounds when it is on and, when no filter needs a second
 *      pass, tests for the stop and solves;
 *   3. only with the sigma filter or trimming: the trim's threshold (eight
 *      rounds of radix select, three barriers each), pass B's sums under
 *      the bounds, the combine and the solve (two barriers).
 * Without filters that is two barriers per iteration. */
__global__ void __launch_bounds__(THREADS) icp_kernel(kparams P)
{
  cg::grid_group g = cg::this_grid();
  __shared__ tree_sh sh;
  __shared__ block_walk bw;
  __shared__ unsigned shist[256];
  __shared__ int last;
  dev_state *st = P.st;
  const uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x, nthreads = gridDim.x * blockDim.x;
  block_walk_zero(&bw);
  for (uint32_t i = tid; i < P.n; i += nthreads) {
    hicp__track z = {{0.0f, 0.0f, 0.0f}, 0.0f};
    P.track[i] = z;
  }
  if (tid == 0) {
    memset(st, 0, sizeof *st);
    hicp__iter_init(&st->it, &P.T0);
    st->stop = HICP__GO;
    st->t_start = st->t_iter = global_ns();
  }
  g.sync();
  for (;;) {
    const hicp__xf T = st->it.T;
    hicp__select sel = hicp__iter_begin(&st->it, P.max_d2, P.filter_start);

    for (uint32_t i = tid; i < P.n; i += nthreads)
      block_walk_add(&bw, point_pass_a(P, i, T));
    g.sync();
    const unsigned long long t1 = global_ns();
    for (uint32_t c = blockIdx.x; c < P.nchunks; c += gridDim.x)
      chunk_sums(P, c, sel, sh);
    /* the last block to arrive sees every chunk's partial */
    if (threadIdx.x == 0) {
      __threadfence();
      last = atomicAdd(&st->arrived, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last) {
      __threadfence();
      combine(P, sh, &st->tot);
      if (threadIdx.x == 0) {
        st->arrived = 0;
        st->filtering = hicp__iter_after_a(&st->it, &st->tot, P.sigma, P.trim, &sel);
        st->sel = sel;
        if (!st->filtering)
          finish_iteration(P, t1, global_ns());
      }
    }
    g.sync();
    if (*(volatile int *)&st->filtering) {
      sel = st->sel;
      if (P.trim < 1.0 && st->tot.v[HICP_PF_N_C] > 0.0) {
        trim_threshold(P, g, sel, shist);
        hicp__iter_trim(&sel, __longlong_as_double((long long)st->radix_prefix));
      }
      for (uint32_t c = blockIdx.x; c < P.nchunks; c += gridDim.x)
        chunk_sums(P, c, sel, sh);
      g.sync();
      if (blockIdx.x == 0) {
        combine(P, sh, &st->tot);
        if (threadIdx.x == 0)
          finish_iteration(P, t1, global_ns());
      }
      g.sync();
    }
    if (*(volatile int *)&st->stop != HICP__GO)
      break;
  }
  /* the walk statistics of all iterations, then the state to the host */
  if (threadIdx.x == 0 && bw.queries != 0) {
    atomicAdd(&st->walk.queries, bw.queries);
    atomicAdd(&st->walk.steps, bw.steps);
    atomicMax(&st->walk.max_steps, (unsigned long long)bw.max_steps);
    for (int b = 0; b < HICP_WALK_BINS; b++)
      if (bw.hist[b] != 0)
        atomicAdd(&st->walk.hist[b], bw.hist[b]);
  }
  g.sync();
  if (tid == 0) {
    *P.fin = *st;
    __threadfence_system();
  }
}

/* Nearest neighbours of a batch of queries, and their walks' statistics. */
enum { NN_STATS = 3 + HICP_WALK_BINS };
__global__ void nn_kernel(hicp__mview m, const float *q, uint32_t n, int method, uint32_t *vertex,
                          float *d2, unsigned long long *stats /* NN_STATS: queries, steps, max, hist */)
{
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float p[3] = {q[3 * (size_t)i], q[3 * (size_t)i + 1], q[3 * (size_t)i + 2]};
  hicp__nn_res r = hicp__nn_query4(&m, p, method, vertex[i]);
  vertex[i] = r.v;
  d2[i] = r.d2;
  if (r.walked) {
    atomicAdd(&stats[0], 1ull);
    atomicAdd(&stats[1], (unsigned long long)r.steps);
    atomicMax(&stats[2], (unsigned long long)r.steps);
    atomicAdd(&stats[3 + hicp__walk_bin(r.steps)], 1ull);
  }
}

/* ------------------------------------------------------------------------ */
/* Host side */

/* Device buffers of one registration, freed together. */
struct frame_buffers {
  void *blocks[10];
  int n;
};

static int dalloc(hicp_context *ctx, frame_buffers *b, size_t bytes, void **out)
{
  int rc = HICP_OK;
  *out = NULL;
  if (fault("alloc"))
    return cuda_fail(ctx, fault("lost") ? cudaErrorDevicesUnavailable : cudaErrorMemoryAllocation,
                     "cudaMalloc");
  TRY(cudaMalloc(out, bytes ? bytes : 16));
  if (rc == HICP_OK)
    b->blocks[b->n++] = *out;
  return rc;
}

static void dfree(frame_buffers *b)
{
  for (int i = 0; i < b->n; i++)
    cudaFree(b->blocks[i]);
  b->n = 0;
}

/* The buffers of the context's registrations, kept from one to the next
 * (allocating and freeing device memory costs more than a small
 * registration, and cudaFree waits for the device), grown when a scan has
 * more points or chunks than any before. */
struct reg_buffers {
  frame_buffers b;
  size_t cap_n, cap_chunks;
  float *p0;
  uint32_t *match;
  hicp__track *track;
  double *e2;
  hicp__partial *part, *tree;
  unsigned long long *hist;
  dev_state *st;
  dev_state *fin_host, *fin_dev; /* mapped host memory */
  int *halt_host, *halt_dev; /* mapped host memory */
  cudaEvent_t done;
  int grid_max; /* icp_kernel's blocks resident at once; 0: not yet known */
};

static void reg_buffers_free(reg_buffers *r)
{
  dfree(&r->b);
  if (r->fin_host != NULL)
    cudaFreeHost(r->fin_host);
  if (r->halt_host != NULL)
    cudaFreeHost(r->halt_host);
  if (r->done != NULL)
    cudaEventDestroy(r->done);
  memset(r, 0, sizeof *r);
}

static void reg_buffers_release(reg_buffers *r)
{
  if (r == NULL)
    return;
  reg_buffers_free(r);
  free(r);
}

static int reg_buffers_get(hicp_context *ctx, struct hicp__gpu *g, size_t n, size_t nchunks,
                           reg_buffers **out)
{
  reg_buffers *r = g->reg;
  int rc = HICP_OK;
  if (fault("alloc"))
    return cuda_fail(ctx, fault("lost") ? cudaErrorDevicesUnavailable : cudaErrorMemoryAllocation,
                     "cudaMalloc");
  if (r == NULL) {
    r = (reg_buffers *)calloc(1, sizeof *r);
    if (r == NULL)
      return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the registration's device buffers");
    g->reg = r;
    TRY(cudaHostAlloc((void **)&r->fin_host, sizeof(dev_state), cudaHostAllocMapped));
    TRY(cudaHostGetDevicePointer((void **)&r->fin_dev, r->fin_host, 0));
    TRY(cudaHostAlloc((void **)&r->halt_host, sizeof(int), cudaHostAllocMapped));
    TRY(cudaHostGetDevicePointer((void **)&r->halt_dev, r->halt_host, 0));
    TRY(cudaEventCreateWithFlags(&r->done, cudaEventDisableTiming));
    int per_sm = 0, sms = 0, coop = 0;
    TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, icp_kernel, THREADS, 0));
    TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->device));
    TRY(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, g->device));
    if (rc == HICP_OK && (!coop || per_sm < 1))
      rc = hicp__fail(ctx, HICP_EDEVICE, "CUDA device %d cannot run the registration kernel "
                      "(cooperative launch %s, %d blocks per SM)", g->device,
                      coop ? "supported" : "unsupported", per_sm);
    if (rc != HICP_OK) {
      reg_buffers_release(r);
      g->reg = NULL;
      return rc;
    }
    r->grid_max = per_sm * sms;
  }
  if (n > r->cap_n || nchunks > r->cap_chunks) {
    dfree(&r->b);
    r->cap_n = r->cap_chunks = 0;
    /* room to grow: a stream of scans of varying size reallocates rarely */
    size_t cn = n + n / 4, cc = nchunks + nchunks / 4 + 1;
    void *v[8];
    const size_t bytes[8] = {sizeof(float) * 3 * cn,      sizeof(uint32_t) * cn,
                             sizeof(hicp__track) * cn,    sizeof(double) * cn,
                             sizeof(hicp__partial) * cc,  sizeof(hicp__partial) * cc,
                             sizeof(unsigned long long) * 256, sizeof(dev_state)};
    for (int i = 0; i < 8 && rc == HICP_OK; i++)
      rc = dalloc(ctx, &r->b, bytes[i], &v[i]);
    if (rc != HICP_OK) {
      dfree(&r->b);
      return rc;
    }
    r->p0 = (float *)v[0];
    r->match = (uint32_t *)v[1];
    r->track = (hicp__track *)v[2];
    r->e2 = (double *)v[3];
    r->part = (hicp__partial *)v[4];
    r->tree = (hicp__partial *)v[5];
    r->hist = (unsigned long long *)v[6];
    r->st = (dev_state *)v[7];
    r->cap_n = cn;
    r->cap_chunks = cc;
  }
  *out = r;
  return HICP_OK;
}

extern "C" int hicp__gpu_register(hicp_context *ctx, const hicp_model *m,
                                  const struct hicp__frame *f, const struct hicp__plan *p,
                                  const struct hicp__xf *T0, double t_start,
                                  struct hicp__icp_out *out)
{
  caller_cuda_state keep;
  struct hicp__gpu *g;
  int rc = gpu_state(ctx, &g);
  if (rc != HICP_OK)
    return rc;
  hicp__mview view;
  rc = device_model(ctx, g, m, &view);
  if (rc != HICP_OK)
    return rc;
  reg_buffers *r = NULL;
  rc = reg_buffers_get(ctx, g, f->n, f->nchunks, &r);
  if (rc != HICP_OK)
    return rc;

  kparams P;
  memset(&P, 0, sizeof P);
  P.m = view;
  P.n = f->n;
  P.nchunks = f->nchunks;
  P.chunk = f->chunk;
  P.method = p->method;
  P.conv = p->conv;
  P.s_noise = f->s_noise;
  P.max_d2 = p->max_d2;
  P.trim = p->trim;
  P.sigma = p->sigma_k;
  P.filter_start = p->filter_start;
  P.T0 = *T0;
  P.p0 = r->p0;
  P.match = r->match;
  P.track = r->track;
  P.e2 = r->e2;
  P.part = r->part;
  P.tree = r->tree;
  P.hist = r->hist;
  P.st = r->st;
  P.fin = r->fin_dev;
  /* The mapped host flag carries hicp_context_cancel() and the end of the
   * time budget into the kernel. */
  *(volatile int *)r->halt_host = 0;
  P.halt = r->halt_dev;
  TRY(cudaMemcpyAsync((void *)P.p0, f->p0, sizeof(float) * 3 * (size_t)f->n,
                      cudaMemcpyHostToDevice, g->stream));
  /* warm starts (tracking) or HICP_NONE */
  TRY(cudaMemcpyAsync(P.match, f->match, sizeof(uint32_t) * f->n, cudaMemcpyHostToDevice,
                      g->stream));

  /* All blocks must be resident for the grid-wide barriers.  A user's
   * registration has the device to itself: one thread per scan point if
   * the device holds that many (the shortest wait on the walks).  A batch
   * worker's frame shares it with the frames of the other workers (streams,
   * lib/crew.c): one block per chunk, so that several frames fit at once. */
  const int worker = hicp__context_is_worker(ctx);
  size_t want = worker ? 0 : ((size_t)f->n + THREADS - 1) / THREADS;
  if (want < f->nchunks)
    want = f->nchunks;
  unsigned grid = (unsigned)(want < (size_t)r->grid_max ? want : (size_t)r->grid_max);
  if (grid == 0)
    grid = 1;

  if (p->time_budget_ms > 0.0) {
    double left = p->time_budget_ms - (hicp__now_ms() - t_start);
    P.budget_ns = left > 1e-6 ? (unsigned long long)(left * 1e6) : 1ull;
  }
  void *args[] = {&P};
  if (rc == HICP_OK && fault("kernel"))
    rc = cuda_fail(ctx, fault("lost") ? cudaErrorDevicesUnavailable : cudaErrorLaunchFailure,
                   "the registration kernel");
  TRY(cudaLaunchCooperativeKernel((const void *)icp_kernel, dim3(grid), dim3(THREADS), args, 0,
                                  g->stream));
  TRY(cudaEventRecord(r->done, g->stream));
  /* Wait without blocking the thread in the driver, so a cancel request
   * from another thread reaches the kernel: poll, at first without pause
   * (most registrations take a few milliseconds; a sleep would add tens
   * of microseconds of timer slack to each), then sleeping an eighth of
   * the time waited so far, from 20 us to 100 us: an answer is found at
   * most about 12% or 100 us late, with fewer wake-ups than fixed 20 us
   * sleeps.  A batch worker sleeps from the start: its frames overlap with
   * the other workers', and the cores are better left to the CPU workers. */
  const double t_launch = hicp__now_ms();
  const double spin_ms = worker ? 0.0 : 2.0;
  while (rc == HICP_OK) {
    cudaError_t q = cudaEventQuery(r->done);
    if (q == cudaSuccess)
      break;
    if (q != cudaErrorNotReady) {
      rc = cuda_fail(ctx, q, "the registration kernel");
      break;
    }
    if (hicp__canceled(ctx))
      *(volatile int *)r->halt_host = HALT_CANCEL;
    else if (p->time_budget_ms > 0.0 && hicp__now_ms() - t_start >= p->time_budget_ms)
      *(volatile int *)r->halt_host = HALT_TIME;
    const double waited = hicp__now_ms() - t_launch;
    if (waited >= spin_ms) {
      const double us = waited * 1e3 / 8.0;
      struct timespec ts = {0, (long)(us < 20.0 ? 20000.0 : us > 100.0 ? 100000.0 : us * 1e3)};
      nanosleep(&ts, NULL);
    }
  }
  if (rc == HICP_OK) {
    const dev_state *fin = r->fin_host;
    memset(out, 0, sizeof *out);
    out->T = fin->it.T;
    out->tot = fin->tot;
    out->iterations = fin->it.k;
    out->stop = fin->stop;
    out->degenerate = fin->it.degenerate;
    out->walk.queries = fin->walk.queries;
    out->walk.steps = fin->walk.steps;
    out->walk.max_steps = (uint32_t)fin->walk.max_steps;
    for (int b = 0; b < HICP_WALK_BINS; b++)
      out->walk.hist[b] = fin->walk.hist[b];
    out->correspond_ms = (double)fin->ns_correspond * 1e-6;
    out->reduce_ms = (double)fin->ns_reduce * 1e-6;
    out->solve_ms = (double)fin->ns_solve * 1e-6;
  }
  return rc;
}

extern "C" int hicp__gpu_nn(hicp_context *ctx, const hicp_model *m, const float *q, size_t n,
                            int method, uint32_t *vertex, float *d2, hicp_walk_stats *stats)
{
  caller_cuda_state keep;
  struct hicp__gpu *g;
  int rc = gpu_state(ctx, &g);
  if (rc != HICP_OK)
    return rc;
  hicp__mview view;
  rc = device_model(ctx, g, m, &view);
  if (rc != HICP_OK || n == 0)
    return rc;
  frame_buffers b;
  memset(&b, 0, sizeof b);
  void *dq = NULL, *dv = NULL, *dd = NULL, *ds = NULL;
  rc = dalloc(ctx, &b, sizeof(float) * 3 * n, &dq);
  if (rc == HICP_OK)
    rc = dalloc(ctx, &b, sizeof(uint32_t) * n, &dv);
  if (rc == HICP_OK)
    rc = dalloc(ctx, &b, sizeof(float) * n, &dd);
  if (rc == HICP_OK)
    rc = dalloc(ctx, &b, sizeof(unsigned long long) * NN_STATS, &ds);
  TRY(cudaMemcpyAsync(dq, q, sizeof(float) * 3 * n, cudaMemcpyHostToDevice, g->stream));
  TRY(cudaMemcpyAsync(dv, vertex, sizeof(uint32_t) * n, cudaMemcpyHostToDevice, g->stream));
  TRY(cudaMemsetAsync(ds, 0, sizeof(unsigned long long) * NN_STATS, g->stream));
  if (rc == HICP_OK) {
    unsigned blocks = (unsigned)((n + 255) / 256);
    uint32_t nq = (uint32_t)n;
    void *args[] = {&view, &dq, &nq, &method, &dv, &dd, &ds};
    TRY(cudaLaunchKernel((const void *)nn_kernel, dim3(blocks), dim3(256), args, 0, g->stream));
  }
  unsigned long long st[NN_STATS];
  TRY(cudaMemcpyAsync(vertex, dv, sizeof(uint32_t) * n, cudaMemcpyDeviceToHost, g->stream));
  TRY(cudaMemcpyAsync(d2, dd, sizeof(float) * n, cudaMemcpyDeviceToHost, g->stream));
  TRY(cudaMemcpyAsync(st, ds, sizeof st, cudaMemcpyDeviceToHost, g->stream));
  TRY(cudaStreamSynchronize(g->stream));
  if (rc == HICP_OK && stats != NULL) {
    memset(stats, 0, sizeof *stats);
    stats->queries = st[0];
    stats->steps = st[1];
    stats->max_steps = (uint32_t)st[2];
    for (int i = 0; i < HICP_WALK_BINS; i++)
      stats->hist[i] = st[3 + i];
  }
  dfree(&b);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* The GPU as a scheduler worker (lib/scheduler.h): chunk ranges of the
 * passes of a frame whose iterations are split between workers.  The host
 * arrays are the frame's state of record: before a pass the worker uploads
 * the matches and certificates of its range (another worker may have had
 * those chunks last time), after it downloads what it computed. */

__global__ void __launch_bounds__(THREADS) range_pass_a(kparams P, hicp__xf T, hicp__select sel,
                                                        uint32_t c0)
{
  __shared__ tree_sh sh;
  __shared__ block_walk bw;
  const uint32_t c = c0 + blockIdx.x;
  block_walk_zero(&bw);
  const uint32_t base = c * P.chunk;
  const uint32_t end = hicp__chunk_end_of(c, P.chunk, P.n);
  for (uint32_t i = base + threadIdx.x; i < end; i += THREADS)
    block_walk_add(&bw, point_pass_a(P, i, T));
  __syncthreads(); /* the block's matches and distances, for its sums */
  chunk_sums(P, c, sel, sh);
  if (threadIdx.x == 0) {
    hicp__walkpart w;
    w.queries = bw.queries;
    w.steps = bw.steps;
    w.max_steps = bw.max_steps;
    for (int b = 0; b < HICP_WALK_BINS; b++)
      w.hist[b] = (uint32_t)bw.hist[b];
    P.walk[c] = w;
  }
}

__global__ void __launch_bounds__(THREADS) range_pass_b(kparams P, hicp__select sel, uint32_t c0)
{
  __shared__ tree_sh sh;
  chunk_sums(P, c0 + blockIdx.x, sel, sh);
}

struct gpu_worker {
  struct hicp__gpu *g;
  frame_buffers b;
  kparams P;
};

static int gw_begin(hicp__worker *w, const hicp_model *m, hicp__frame *f)
{
  caller_cuda_state keep;
  gpu_worker *s = (gpu_worker *)w->state;
  hicp_context *ctx = w->ctx;
  int rc = HICP_OK;
  TRY(cudaSetDevice(s->g->device));
  hicp__mview view = {}; /* copied into P below even when the device failed */
  if (rc == HICP_OK)
    rc = device_model(ctx, s->g, m, &view);
  memset(&s->b, 0, sizeof s->b);
  kparams &P = s->P;
  memset(&P, 0, sizeof P);
  P.m = view;
  P.n = f->n;
  P.nchunks = f->nchunks;
  P.chunk = f->chunk;
  void *v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &s->b, sizeof(float) * 3 * (size_t)f->n, &v)) == HICP_OK)
    P.p0 = (const float *)v;
  TRY(cudaMemcpyAsync((void *)P.p0, f->p0, sizeof(float) * 3 * (size_t)f->n,
                      cudaMemcpyHostToDevice, s->g->stream));
  if (rc == HICP_OK && (rc = dalloc(ctx, &s->b, sizeof(uint32_t) * f->n, &v)) == HICP_OK)
    P.match = (uint32_t *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &s->b, sizeof(hicp__track) * f->n, &v)) == HICP_OK)
    P.track = (hicp__track *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &s->b, sizeof(double) * f->n, &v)) == HICP_OK)
    P.e2 = (double *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &s->b, sizeof(hicp__partial) * f->nchunks, &v)) == HICP_OK)
    P.part = (hicp__partial *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &s->b, sizeof(hicp__walkpart) * f->nchunks, &v)) == HICP_OK)
    P.walk = (hicp__walkpart *)v;
  TRY(cudaStreamSynchronize(s->g->stream));
  if (rc != HICP_OK)
    dfree(&s->b);
  return rc;
}

static void point_range(const hicp__frame *f, uint32_t c0, uint32_t c1, size_t *i0, size_t *n)
{
  size_t a = (size_t)c0 * f->chunk, b = (size_t)c1 * f->chunk;
  if (b > f->n)
    b = f->n;
  *i0 = a;
  *n = b > a ? b - a : 0;
}

static int gw_pass_a(hicp__worker *w, const hicp_model *m, hicp__frame *f, const hicp__xf *T,
                     int method, const hicp__select *sel, uint32_t c0, uint32_t c1)
{
  (void)m;
  caller_cuda_state keep;
  gpu_worker *s = (gpu_worker *)w->state;
  hicp_context *ctx = w->ctx;
  cudaStream_t st = s->g->stream;
  kparams P = s->P;
  P.method = method;
  size_t i0, np;
  point_range(f, c0, c1, &i0, &np);
  int rc = HICP_OK;
  TRY(cudaSetDevice(s->g->device));
  TRY(cudaMemcpyAsync(P.match + i0, f->match + i0, sizeof(uint32_t) * np, cudaMemcpyHostToDevice, st));
  TRY(cudaMemcpyAsync(P.track + i0, f->track + i0, sizeof(hicp__track) * np, cudaMemcpyHostToDevice, st));
  if (rc == HICP_OK && fault("kernel"))
    rc = cuda_fail(ctx, cudaErrorLaunchFailure, "range_pass_a");
  if (rc == HICP_OK) {
    hicp__xf Tv = *T;
    hicp__select sv = *sel;
    void *args[] = {&P, &Tv, &sv, &c0};
    TRY(cudaLaunchKernel((const void *)range_pass_a, dim3(c1 - c0), dim3(THREADS), args, 0, st));
  }
  TRY(cudaMemcpyAsync(f->match + i0, P.match + i0, sizeof(uint32_t) * np, cudaMemcpyDeviceToHost, st));
  TRY(cudaMemcpyAsync(f->track + i0, P.track + i0, sizeof(hicp__track) * np, cudaMemcpyDeviceToHost, st));
  TRY(cudaMemcpyAsync(f->e2 + i0, P.e2 + i0, sizeof(double) * np, cudaMemcpyDeviceToHost, st));
  TRY(cudaMemcpyAsync(f->part + c0, P.part + c0, sizeof(hicp__partial) * (c1 - c0),
                      cudaMemcpyDeviceToHost, st));
  TRY(cudaMemcpyAsync(f->walk + c0, P.walk + c0, sizeof(hicp__walkpart) * (c1 - c0),
                      cudaMemcpyDeviceToHost, st));
  TRY(cudaStreamSynchronize(st));
  return rc;
}

static int gw_pass_b(hicp__worker *w, const hicp_model *m, hicp__frame *f,
                     const hicp__select *sel, uint32_t c0, uint32_t c1)
{
  (void)m;
  caller_cuda_state keep;
  gpu_worker *s = (gpu_worker *)w->state;
  hicp_context *ctx = w->ctx;
  cudaStream_t st = s->g->stream;
  int rc = HICP_OK;
  TRY(cudaSetDevice(s->g->device));
  if (rc == HICP_OK) {
    hicp__select sv = *sel;
    void *args[] = {&s->P, &sv, &c0};
    TRY(cudaLaunchKernel((const void *)range_pass_b, dim3(c1 - c0), dim3(THREADS), args, 0, st));
  }
  TRY(cudaMemcpyAsync(f->part + c0, s->P.part + c0, sizeof(hicp__partial) * (c1 - c0),
                      cudaMemcpyDeviceToHost, st));
  TRY(cudaStreamSynchronize(st));
  return rc;
}

static void gw_end(hicp__worker *w)
{
  caller_cuda_state keep;
  gpu_worker *s = (gpu_worker *)w->state;
  cudaSetDevice(s->g->device);
  dfree(&s->b);
}

static void gw_destroy(hicp__worker *w)
{
  caller_cuda_state keep;
  gpu_worker *s = (gpu_worker *)w->state;
  if (s == NULL)
    return;
  gpu_destroy(s->g);
  free(s);
  w->state = NULL;
}

static const hicp__worker_ops gpu_worker_ops = {gw_begin, gw_pass_a, gw_pass_b, gw_end, gw_destroy};

extern "C" int hicp__gpu_worker_init(hicp__worker *w, hicp_context *ctx, int logical)
{
  caller_cuda_state keep;
  memset(w, 0, sizeof *w);
  int device = hicp__context_device(ctx, logical);
  gpu_worker *s = (gpu_worker *)calloc(1, sizeof *s);
  if (s == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for a GPU worker");
  int rc = gpu_create(ctx, device, &s->g);
  if (rc != HICP_OK) {
    free(s);
    return rc;
  }
  w->ops = &gpu_worker_ops;
  w->ctx = ctx;
  w->threads = 1;
  w->is_gpu = 1;
  w->state = s;
  return HICP_OK;
}
