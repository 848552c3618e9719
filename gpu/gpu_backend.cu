/* gpu_backend.cu: the CUDA backend.
 *
 * One registration is one persistent, cooperative kernel: every iteration
 * (apply + walk + chunk sums, the combine, the filters, the stop test and
 * Horn's solve) runs on the device, separated by grid-wide barriers, so the
 * host launches once and waits once.  The per-point and per-iteration
 * arithmetic is the shared code of lib/pp/ (the same functions the CPU runs),
 * and the summation shape is the documented one: a block of 256 threads is a
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
  cudaGetLastError(); /* clear a non-sticky error */
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

/* ------------------------------------------------------------------------ */
/* Per-context device state: the device, a stream, uploaded models. */

struct dev_model {
  uint64_t uid;
  hicp__mview view; /* device pointers */
  void *blocks[8];  /* one per array of the view (device_model) */
  int nblocks;
};

#define MODEL_CACHE 4

struct hicp__gpu {
  int device;
  cudaStream_t stream;
  dev_model models[MODEL_CACHE];
  int nmodels;
  int next_evict;
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
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why != NULL && why_len > 0)
      snprintf(why, why_len, "no usable CUDA device (%s)", cudaGetErrorString(e));
    cudaGetLastError();
    return 0;
  }
  if (n == 0 && why != NULL && why_len > 0)
    snprintf(why, why_len, "no CUDA device found");
  return n;
}

extern "C" int hicp__gpu_describe(int ordinal, hicp__gpu_info *info)
{
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return HICP_ENODEVICE;
  }
  memset(info, 0, sizeof *info);
  info->ordinal = ordinal;
  snprintf(info->name, sizeof info->name, "%s", p.name);
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
  if (g->stream != NULL)
    cudaStreamDestroy(g->stream);
  cudaGetLastError();
  free(g);
}

extern "C" void hicp__gpu_release(hicp_context *ctx)
{
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
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory");
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
   * each; arrays a model lacks (no Delaunay graph) stay NULL. */
  const void *src[8] = {host.vtx, host.row, host.nbr, host.safe_r2,
                        host.ecode, host.eunit, host.kd, host.kd_pts};
  const size_t bytes[8] = {sizeof(hicp__vtx) * m->nv,  sizeof(uint32_t) * ((size_t)m->nv + 1),
                           sizeof(uint32_t) * m->nedges, sizeof(float) * m->nv,
                           (size_t)m->nedges,            sizeof(float) * m->nv,
                           sizeof(hicp__kdnode) * m->nkd, sizeof(hicp__vtx) * m->nv};
  void *dev[8] = {NULL};
  for (int i = 0; i < 8 && rc == HICP_OK; i++)
    rc = upload(ctx, g, d, src[i], bytes[i], &dev[i]);
  v.vtx = (const hicp__vtx *)dev[0];
  v.row = (const uint32_t *)dev[1];
  v.nbr = (const uint32_t *)dev[2];
  v.safe_r2 = (const float *)dev[3];
  v.ecode = (const uint8_t *)dev[4];
  v.eunit = (const float *)dev[5];
  v.kd = (const hicp__kdnode *)dev[6];
  v.kd_pts = (const hicp__vtx *)dev[7];
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
struct dev_state {
  hicp__xf T, T_prev;
  double mse_prev;
  double win_lo, win_hi;   /* sigma filter window */
  int k;
  int stop;                /* HICP__GO while running */
  int degenerate;
  int filtering;           /* pass B needed this iteration */
  hicp__partial tot;
  hicp__select sel;        /* selection of the current iteration */
  hicp_walk_stats walk;
  unsigned long long radix_prefix, radix_rank;
  unsigned long long ns_correspond, ns_reduce, ns_solve;
  unsigned long long t_start;
};

struct kparams {
  hicp__mview m;
  const float *p0;
  uint32_t n, nchunks, chunk;
  uint32_t *match;
  hicp__track *track;
  double *e2;
  hicp__partial *part;
  hicp__partial *tree;     /* scratch copy for the combine */
  hicp__walkpart *walk;
  unsigned long long *hist; /* 256 counters for the trim's radix select */
  int method;
  hicp__conv conv;
  double max_d2, trim, sigma;
  int filter_start;
  unsigned long long budget_ns;   /* time budget left at launch, 0: none */
  volatile int *cancel;           /* mapped host flag */
  dev_state *st;
};

__device__ __forceinline__ unsigned long long global_ns()
{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* The 256 lanes of a block into one partial, by the halving tree. */
__device__ void block_tree(const hicp__partial &acc, double *sh, hicp__partial *out)
{
  const unsigned t = threadIdx.x;
#pragma unroll
  for (int f = 0; f < HICP_PF_COUNT; f++) {
    sh[t] = acc.v[f];
    __syncthreads();
    for (unsigned s = 128; s >= 32; s >>= 1) {
      if (t < s)
        sh[t] = sh[t] + sh[t + s];
      __syncthreads();
    }
    if (t < 32) {
      double v = sh[t];
      for (unsigned s = 16; s >= 1; s >>= 1) {
        double o = __shfl_down_sync(0xffffffffu, v, s);
        v = v + o; /* lane i: a[i] + a[i + s], as on the CPU */
      }
      if (t == 0)
        out->v[f] = v;
    }
    __syncthreads();
  }
}

struct block_walk {
  unsigned long long queries, steps;
  unsigned max_steps;
  unsigned hist[HICP_WALK_BINS];
};

/* Pass A for chunk c: apply, nearest neighbour, pair sums. */
__device__ void chunk_pass_a(const kparams &P, uint32_t c, const hicp__xf &T,
                             const hicp__select &sel, double *sh, block_walk *bw)
{
  if (threadIdx.x == 0) {
    bw->queries = bw->steps = 0;
    bw->max_steps = 0;
    for (int b = 0; b < HICP_WALK_BINS; b++)
      bw->hist[b] = 0;
  }
  __syncthreads();
  hicp__partial acc;
  hicp__partial_zero(&acc);
  const uint32_t base = c * P.chunk;
  const uint32_t end = base + P.chunk < P.n ? base + P.chunk : P.n;
  for (uint32_t i = base + threadIdx.x; i < end; i += THREADS) {
    float p[3] = {P.p0[3 * (size_t)i], P.p0[3 * (size_t)i + 1], P.p0[3 * (size_t)i + 2]};
    double qd[3];
    hicp__apply(&T, p, qd);
    float q[3] = {__double2float_rn(qd[0]), __double2float_rn(qd[1]), __double2float_rn(qd[2])};
    hicp__nn_res r = hicp__nn_track(&P.m, q, P.method, P.match[i], &P.track[i]);
    P.match[i] = r.v;
    double e2 = hicp__pair_e2(qd, &P.m.vtx[r.v]);
    P.e2[i] = e2;
    hicp__partial_add_pair(&acc, p, &P.m.vtx[r.v], e2, &sel);
    if (r.walked) {
      atomicAdd(&bw->queries, 1ull);
      atomicAdd(&bw->steps, (unsigned long long)r.steps);
      atomicMax(&bw->max_steps, r.steps);
      atomicAdd(&bw->hist[r.steps < HICP_WALK_BINS - 1 ? r.steps : HICP_WALK_BINS - 1], 1u);
    }
  }
  block_tree(acc, sh, &P.part[c]);
  if (threadIdx.x == 0) {
    hicp__walkpart w;
    w.queries = bw->queries;
    w.steps = bw->steps;
    w.max_steps = bw->max_steps;
    for (int b = 0; b < HICP_WALK_BINS; b++)
      w.hist[b] = bw->hist[b];
    P.walk[c] = w;
  }
}

/* Pass B for chunk c: the sums again under the final selection. */
__device__ void chunk_pass_b(const kparams &P, uint32_t c, const hicp__select &sel, double *sh)
{
  hicp__partial acc;
  hicp__partial_zero(&acc);
  const uint32_t base = c * P.chunk;
  const uint32_t end = base + P.chunk < P.n ? base + P.chunk : P.n;
  for (uint32_t i = base + threadIdx.x; i < end; i += THREADS) {
    float p[3] = {P.p0[3 * (size_t)i], P.p0[3 * (size_t)i + 1], P.p0[3 * (size_t)i + 2]};
    hicp__partial_add_pair(&acc, p, &P.m.vtx[P.match[i]], P.e2[i], &sel);
  }
  block_tree(acc, sh, &P.part[c]);
}

/* Block 0: the chunk partials by the halving tree over chunk indices, each
 * level in parallel over (pair, field); same additions as
 * hicp__partial_tree. */
__device__ void combine(const kparams &P, hicp__partial *tot)
{
  const uint32_t n = P.nchunks;
  double *t = &P.tree[0].v[0];
  const double *src = &P.part[0].v[0];
  for (uint32_t w = threadIdx.x; w < n * HICP_PF_COUNT; w += blockDim.x)
    t[w] = src[w];
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
  if (threadIdx.x == 0)
    *tot = P.tree[0];
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
    double nc = st->tot.v[HICP_PF_N_C];
    double keep = ceil(P.trim * nc);
    keep = keep < 1.0 ? 1.0 : keep > nc ? nc : keep;
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
      if (!(e2 <= sel.max_d2))
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

__global__ void __launch_bounds__(THREADS) icp_kernel(kparams P)
{
  cg::grid_group g = cg::this_grid();
  __shared__ double sh[THREADS];
  __shared__ block_walk bw;
  __shared__ unsigned shist[256];
  dev_state *st = P.st;
  if (blockIdx.x == 0 && threadIdx.x == 0)
    st->t_start = global_ns();
  g.sync();
  for (;;) {
    const int k = *(volatile int *)&st->k;
    const hicp__xf T = st->T;
    const int sigma_now = P.filter_start >= 0 && k >= P.filter_start;
    hicp__select sel;
    memset(&sel, 0, sizeof sel);
    sel.max_d2 = P.max_d2;
    sel.want_e = sigma_now;
    sel.w_lo = st->win_lo;
    sel.w_hi = st->win_hi;
    const unsigned long long t0 = global_ns();

    for (uint32_t c = blockIdx.x; c < P.nchunks; c += gridDim.x)
      chunk_pass_a(P, c, T, sel, sh, &bw);
    g.sync();
    const unsigned long long t1 = global_ns();
    if (blockIdx.x == 0) {
      combine(P, &st->tot);
      if (threadIdx.x == 0) {
        for (uint32_t c = 0; c < P.nchunks; c++) {
          const hicp__walkpart *w = &P.walk[c];
          st->walk.queries += w->queries;
          st->walk.steps += w->steps;
          st->walk.max_steps = w->max_steps > st->walk.max_steps ? w->max_steps : st->walk.max_steps;
          for (int b = 0; b < HICP_WALK_BINS; b++)
            st->walk.hist[b] += w->hist[b];
        }
        st->filtering = sigma_now || P.trim < 1.0;
        if (sigma_now) {
          hicp__sigma_bounds(&st->tot, P.sigma, &sel);
          st->win_lo = sel.e_lo;
          st->win_hi = sel.e_hi;
        }
        st->sel = sel;
      }
    }
    g.sync();
    if (st->filtering) {
      sel = st->sel;
      if (P.trim < 1.0 && st->tot.v[HICP_PF_N_C] > 0.0) {
        trim_threshold(P, g, sel, shist);
        sel.trim_e2 = __longlong_as_double((long long)st->radix_prefix);
        sel.trim_on = 1;
      }
      for (uint32_t c = blockIdx.x; c < P.nchunks; c += gridDim.x)
        chunk_pass_b(P, c, sel, sh);
      g.sync();
      if (blockIdx.x == 0)
        combine(P, &st->tot);
      g.sync();
    }
    const unsigned long long t2 = global_ns();
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      const hicp__partial *tot = &st->tot;
      int stop;
      double mse = tot->v[HICP_PF_N_IN] > 0.0 ? tot->v[HICP_PF_E2_IN] / tot->v[HICP_PF_N_IN] : 0.0;
      if (!(tot->v[HICP_PF_N_IN] > 0.0))
        stop = 4; /* HICP_STOP_NO_PAIRS */
      else
        stop = hicp__check_stop(&P.conv, k, mse, st->mse_prev, &st->T, &st->T_prev);
      if (stop == HICP__GO && P.cancel != NULL && *P.cancel)
        stop = 5; /* HICP_STOP_CANCELED */
      if (stop == HICP__GO && P.budget_ns != 0 && global_ns() - st->t_start >= P.budget_ns)
        stop = 6; /* HICP_STOP_TIMEOUT */
      if (stop == HICP__GO) {
        hicp__xf next;
        int degenerate;
        hicp__solve_horn(tot, &next, &degenerate);
        st->degenerate = degenerate;
        st->T_prev = st->T;
        st->T = next;
        st->mse_prev = mse;
        st->k = k + 1;
      } else {
        st->stop = stop;
      }
      const unsigned long long t3 = global_ns();
      st->ns_correspond += t1 - t0;
      st->ns_reduce += t2 - t1;
      st->ns_solve += t3 - t2;
    }
    g.sync();
    if (*(volatile int *)&st->stop != HICP__GO)
      break;
  }
}

/* Nearest neighbours of a batch of queries. */
__global__ void nn_kernel(hicp__mview m, const float *q, uint32_t n, int method, uint32_t *vertex,
                          float *d2, unsigned long long *stats /* queries, steps, max, hist[16] */)
{
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  float p[3] = {q[3 * (size_t)i], q[3 * (size_t)i + 1], q[3 * (size_t)i + 2]};
  hicp__nn_res r = hicp__nn_query(&m, p, method, vertex[i]);
  vertex[i] = r.v;
  d2[i] = r.d2;
  if (r.walked) {
    atomicAdd(&stats[0], 1ull);
    atomicAdd(&stats[1], (unsigned long long)r.steps);
    atomicMax(&stats[2], (unsigned long long)r.steps);
    atomicAdd(&stats[3 + (r.steps < 15 ? r.steps : 15)], 1ull);
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

extern "C" int hicp__gpu_register(hicp_context *ctx, const hicp_model *m,
                                  const struct hicp__frame *f, const struct hicp__plan *p,
                                  const struct hicp__xf *T0, double t_start,
                                  struct hicp__icp_out *out)
{
  struct hicp__gpu *g;
  int rc = gpu_state(ctx, &g);
  if (rc != HICP_OK)
    return rc;
  hicp__mview view;
  rc = device_model(ctx, g, m, &view);
  if (rc != HICP_OK)
    return rc;

  frame_buffers b;
  memset(&b, 0, sizeof b);
  kparams P;
  memset(&P, 0, sizeof P);
  P.m = view;
  P.n = f->n;
  P.nchunks = f->nchunks;
  P.chunk = f->chunk;
  P.method = p->method;
  P.conv = p->conv;
  P.max_d2 = p->max_d2;
  P.trim = p->trim;
  P.sigma = p->filter_sigma;
  P.filter_start = p->filter_start;
  void *v;
  if ((rc = dalloc(ctx, &b, sizeof(float) * 3 * (size_t)f->n, &v)) == HICP_OK)
    P.p0 = (const float *)v;
  TRY(cudaMemcpyAsync((void *)P.p0, f->p0, sizeof(float) * 3 * (size_t)f->n,
                      cudaMemcpyHostToDevice, g->stream));
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(uint32_t) * f->n, &v)) == HICP_OK)
    P.match = (uint32_t *)v;
  /* warm starts (tracking) or HICP_NONE */
  TRY(cudaMemcpyAsync(P.match, f->match, sizeof(uint32_t) * f->n, cudaMemcpyHostToDevice,
                      g->stream));
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(hicp__track) * f->n, &v)) == HICP_OK)
    P.track = (hicp__track *)v;
  TRY(cudaMemsetAsync(P.track, 0, sizeof(hicp__track) * f->n, g->stream));
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(double) * f->n, &v)) == HICP_OK)
    P.e2 = (double *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(hicp__partial) * f->nchunks, &v)) == HICP_OK)
    P.part = (hicp__partial *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(hicp__partial) * f->nchunks, &v)) == HICP_OK)
    P.tree = (hicp__partial *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(hicp__walkpart) * f->nchunks, &v)) == HICP_OK)
    P.walk = (hicp__walkpart *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(unsigned long long) * 256, &v)) == HICP_OK)
    P.hist = (unsigned long long *)v;
  if (rc == HICP_OK && (rc = dalloc(ctx, &b, sizeof(dev_state), &v)) == HICP_OK)
    P.st = (dev_state *)v;

  dev_state init;
  memset(&init, 0, sizeof init);
  init.T = *T0;
  init.T_prev = *T0;
  init.win_lo = -HUGE_VAL;
  init.win_hi = HUGE_VAL;
  init.stop = HICP__GO;
  TRY(cudaMemcpyAsync(P.st, &init, sizeof init, cudaMemcpyHostToDevice, g->stream));

  /* A mapped host flag carries hicp_context_cancel() into the kernel. */
  int *cancel_host = NULL;
  TRY(cudaHostAlloc((void **)&cancel_host, sizeof(int), cudaHostAllocMapped));
  if (rc == HICP_OK) {
    *cancel_host = 0;
    int *dp;
    TRY(cudaHostGetDevicePointer((void **)&dp, cancel_host, 0));
    P.cancel = dp;
  }

  /* All blocks must be resident for the grid-wide barriers. */
  int per_sm = 0, sms = 0;
  TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, icp_kernel, THREADS, 0));
  TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->device));
  int coop = 0;
  TRY(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, g->device));
  if (rc == HICP_OK && (!coop || per_sm < 1))
    rc = hicp__fail(ctx, HICP_EDEVICE, "CUDA device %d cannot run the registration kernel "
                    "(cooperative launch %s, %d blocks per SM)", g->device,
                    coop ? "supported" : "unsupported", per_sm);
  unsigned grid = (unsigned)(per_sm * sms);
  if (grid > f->nchunks)
    grid = f->nchunks;
  if (grid == 0)
    grid = 1;

  if (p->time_budget_ms > 0.0) {
    double left = p->time_budget_ms - (hicp__now_ms() - t_start);
    P.budget_ns = left > 1e-6 ? (unsigned long long)(left * 1e6) : 1ull;
  }
  cudaEvent_t e0 = NULL, e1 = NULL;
  TRY(cudaEventCreate(&e0));
  TRY(cudaEventCreate(&e1));
  TRY(cudaEventRecord(e0, g->stream));
  void *args[] = {&P};
  if (rc == HICP_OK && fault("kernel"))
    rc = cuda_fail(ctx, fault("lost") ? cudaErrorDevicesUnavailable : cudaErrorLaunchFailure,
                   "the registration kernel");
  TRY(cudaLaunchCooperativeKernel((const void *)icp_kernel, dim3(grid), dim3(THREADS), args, 0,
                                  g->stream));
  TRY(cudaEventRecord(e1, g->stream));
  /* Wait without blocking the thread in the driver, so a cancel request
   * from another thread reaches the kernel. */
  while (rc == HICP_OK) {
    cudaError_t q = cudaEventQuery(e1);
    if (q == cudaSuccess)
      break;
    if (q != cudaErrorNotReady) {
      rc = cuda_fail(ctx, q, "the registration kernel");
      break;
    }
    if (hicp__canceled(ctx))
      *(volatile int *)cancel_host = 1;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  dev_state fin;
  TRY(cudaMemcpy(&fin, P.st, sizeof fin, cudaMemcpyDeviceToHost));
  if (rc == HICP_OK) {
    memset(out, 0, sizeof *out);
    out->T = fin.T;
    out->tot = fin.tot;
    out->iterations = fin.k;
    out->stop = fin.stop;
    out->degenerate = fin.degenerate;
    out->walk = fin.walk;
    out->correspond_ms = (double)fin.ns_correspond * 1e-6;
    out->reduce_ms = (double)fin.ns_reduce * 1e-6;
    out->solve_ms = (double)fin.ns_solve * 1e-6;
  }
  if (e0 != NULL)
    cudaEventDestroy(e0);
  if (e1 != NULL)
    cudaEventDestroy(e1);
  if (cancel_host != NULL)
    cudaFreeHost(cancel_host);
  dfree(&b);
  cudaGetLastError();
  return rc;
}

extern "C" int hicp__gpu_nn(hicp_context *ctx, const hicp_model *m, const float *q, size_t n,
                            int method, uint32_t *vertex, float *d2, hicp_walk_stats *stats)
{
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
    rc = dalloc(ctx, &b, sizeof(unsigned long long) * 19, &ds);
  TRY(cudaMemcpyAsync(dq, q, sizeof(float) * 3 * n, cudaMemcpyHostToDevice, g->stream));
  TRY(cudaMemcpyAsync(dv, vertex, sizeof(uint32_t) * n, cudaMemcpyHostToDevice, g->stream));
  TRY(cudaMemsetAsync(ds, 0, sizeof(unsigned long long) * 19, g->stream));
  if (rc == HICP_OK) {
    unsigned blocks = (unsigned)((n + 255) / 256);
    nn_kernel<<<blocks, 256, 0, g->stream>>>(view, (const float *)dq, (uint32_t)n, method,
                                             (uint32_t *)dv, (float *)dd, (unsigned long long *)ds);
    TRY(cudaGetLastError());
  }
  unsigned long long st[19];
  TRY(cudaMemcpyAsync(vertex, dv, sizeof(uint32_t) * n, cudaMemcpyDeviceToHost, g->stream));
  TRY(cudaMemcpyAsync(d2, dd, sizeof(float) * n, cudaMemcpyDeviceToHost, g->stream));
  TRY(cudaMemcpyAsync(st, ds, sizeof st, cudaMemcpyDeviceToHost, g->stream));
  TRY(cudaStreamSynchronize(g->stream));
  if (rc == HICP_OK && stats != NULL) {
    memset(stats, 0, sizeof *stats);
    stats->queries = st[0];
    stats->steps = st[1];
    stats->max_steps = (uint32_t)st[2];
    for (int i = 0; i < 16; i++)
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
  __shared__ double sh[THREADS];
  __shared__ block_walk bw;
  chunk_pass_a(P, c0 + blockIdx.x, T, sel, sh, &bw);
}

__global__ void __launch_bounds__(THREADS) range_pass_b(kparams P, hicp__select sel, uint32_t c0)
{
  __shared__ double sh[THREADS];
  chunk_pass_b(P, c0 + blockIdx.x, sel, sh);
}

struct gpu_worker {
  struct hicp__gpu *g;
  frame_buffers b;
  kparams P;
};

static int gw_begin(hicp__worker *w, const hicp_model *m, hicp__frame *f)
{
  gpu_worker *s = (gpu_worker *)w->state;
  hicp_context *ctx = w->ctx;
  int rc = HICP_OK;
  TRY(cudaSetDevice(s->g->device));
  hicp__mview view;
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
    range_pass_a<<<c1 - c0, THREADS, 0, st>>>(P, *T, *sel, c0);
    TRY(cudaGetLastError());
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
  gpu_worker *s = (gpu_worker *)w->state;
  hicp_context *ctx = w->ctx;
  cudaStream_t st = s->g->stream;
  int rc = HICP_OK;
  TRY(cudaSetDevice(s->g->device));
  if (rc == HICP_OK) {
    range_pass_b<<<c1 - c0, THREADS, 0, st>>>(s->P, *sel, c0);
    TRY(cudaGetLastError());
  }
  TRY(cudaMemcpyAsync(f->part + c0, s->P.part + c0, sizeof(hicp__partial) * (c1 - c0),
                      cudaMemcpyDeviceToHost, st));
  TRY(cudaStreamSynchronize(st));
  return rc;
}

static void gw_end(hicp__worker *w)
{
  gpu_worker *s = (gpu_worker *)w->state;
  cudaSetDevice(s->g->device);
  dfree(&s->b);
  cudaGetLastError();
}

static void gw_destroy(hicp__worker *w)
{
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
  memset(w, 0, sizeof *w);
  int device = hicp__context_device(ctx, logical);
  gpu_worker *s = (gpu_worker *)calloc(1, sizeof *s);
  if (s == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory");
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
