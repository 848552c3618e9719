/* nn.c: hicp_nn_query, nearest neighbours of a batch of query points on the
 * CPU (OpenMP over queries; each query is independent, so the answers do not
 * depend on the thread count). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cloud.h"
#include "context.h"
#include "envnames.h"
#include "fpenv.h"
#include "model.h"
#include "order.h"
#include "chunk.h"
#include "segments.h"
#include "pp/nn.h"

void hicp_nn_options_init_sized(hicp_nn_options *opts, size_t size)
{
  hicp_nn_options d;
  memset(&d, 0, sizeof d);
  d.method = HICP_NN_PNN_OPT;
  hicp__init_sized(opts, size, &d, sizeof d);
}

_Static_assert(sizeof(((hicp_walk_stats *)0)->hist) / sizeof(uint64_t) == HICP_WALK_BINS,
               "hicp_walk_stats' bins are the walk parts' bins");

static void walk_stats_add(hicp_walk_stats *s, uint32_t steps)
{
  s->queries++;
  s->steps += steps;
  s->max_steps = steps > s->max_steps ? steps : s->max_steps;
  s->hist[hicp__walk_bin(steps)]++;
}

static void atomic_min_ll(long long *a, long long v)
{
  long long cur = __atomic_load_n(a, __ATOMIC_RELAXED);
  while (v < cur && !__atomic_compare_exchange_n(a, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

static void walk_stats_merge(hicp_walk_stats *a, const hicp_walk_stats *b)
{
  a->queries += b->queries;
  a->steps += b->steps;
  a->max_steps = b->max_steps > a->max_steps ? b->max_steps : a->max_steps;
  for (int i = 0; i < 16; i++)
    a->hist[i] += b->hist[i];
}

/* The order to answer queries in: along the model's Morton curve, where
 * the model's vertices are stored (order.h), so that consecutive searches
 * share cache lines.  Worth it only when the model is much larger than the
 * cache (hicp__order_pays): the sort and the scattered reads of the queries
 * cost more than the misses they save on smaller models. */
typedef struct qorder {
  uint32_t *order; /* position -> query */
  uint32_t *inv;   /* query -> position */
  uint32_t *idx;   /* answers by position, copied out through inv */
  float *d2;
} qorder;

static void qorder_free(qorder *o)
{
  free(o->order);
  free(o->inv);
  free(o->idx);
  free(o->d2);
  memset(o, 0, sizeof *o);
}

/* Fills *o, or leaves it empty for index order (also when memory is short:
 * the answers are the same either way). */
static void qorder_make(hicp_context *ctx, const hicp_model *m, const unsigned char *base, size_t n,
                        size_t stride, const double shift[3], int threads, qorder *o)
{
  memset(o, 0, sizeof *o);
  const char *q = getenv("HICP_QORDER");
  const int force = q != NULL ? hicp__env_index(hicp__qorder_names, q) : -1;
  if (force >= 0 ? force == 0 : !hicp__order_pays(m, n))
    return;
  if (n > UINT32_MAX || hicp__check_budget(ctx, (uint64_t)n * 20u, "the query order") != HICP_OK) {
    hicp__clear_error(ctx);
    return;
  }
  uint32_t *key = malloc(sizeof *key * n);
  o->order = malloc(sizeof *o->order * n);
  o->inv = malloc(sizeof *o->inv * n);
  o->idx = malloc(sizeof *o->idx * n);
  o->d2 = malloc(sizeof *o->d2 * n);
  if (key == NULL || o->order == NULL || o->inv == NULL || o->idx == NULL || o->d2 == NULL) {
    free(key);
    qorder_free(o);
    return;
  }
  hicp__zgrid g;
  hicp__zgrid_init(&g, m->bbox_min, m->bbox_max);
  const long long nq = (long long)n;
#pragma omp parallel num_threads(threads)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
#pragma omp for schedule(static)
    for (long long i = 0; i < nq; i++) {
      float p[3];
      memcpy(p, base + (size_t)i * stride, sizeof p);
      key[i] = hicp__zkey21(&g, (double)p[0] + shift[0], (double)p[1] + shift[1],
                            (double)p[2] + shift[2]);
    }
    hicp__fpenv_leave(&fe);
  }
  if (hicp__zsort(key, (uint32_t)n, o->order, o->inv, NULL) != HICP_OK)
    qorder_free(o);
  free(key);
}

static int nn_query_body(hicp_context *ctx, const char *fn, const hicp_model *model,
                         const float *queries, size_t n, const double qorigin[3],
                         const hicp_nn_options *user, uint32_t *index, float *d2,
                         hicp_walk_stats *stats)
{
  hicp_nn_options o;
  hicp_nn_options_init(&o);
  hicp__clear_error(ctx);
  if (user != NULL && hicp__copy_sized(&o, sizeof o, user, offsetof(hicp_nn_options, flags) + sizeof(unsigned), "hicp_nn_options", ctx) != 0)
    return HICP_EINVAL;
  if (model == NULL || (queries == NULL && n > 0) || (index == NULL && n > 0))
    return hicp__fail(ctx, HICP_EINVAL, "%s: NULL argument", fn);
  if ((unsigned)o.method > HICP_NN_PNN || o.flags != 0 || (o.warm_start != 0 && o.warm_start != 1))
    return hicp__fail(ctx, HICP_EINVAL, "%s: invalid options", fn);
  size_t stride;
  int rc = hicp__point_stride(ctx, "query", o.query_stride, 3 * sizeof(float), &stride);
  if (rc != HICP_OK)
    return rc;
  if (n > (size_t)INT64_MAX / 2)
    return hicp__fail(ctx, HICP_ELIMIT, "too many queries");
  rc = hicp__check_span(ctx, "query", n, stride, 3 * sizeof(float));
  if (rc != HICP_OK)
    return rc;
  rc = hicp__team_ready(ctx);
  if (rc != HICP_OK)
    return rc;
  const unsigned char *base = (const unsigned char *)queries;
  const int threads = hicp__team_use(hicp__team_threads(ctx));
  /* The first bad query and the first bad previous match (n: none),
   * checked in parallel: on small models this pass is a tenth of the time. */
  long long bad_q = (long long)n, bad_w = (long long)n;
  const long long nq = (long long)n;
  const int warm = o.warm_start;
  /* Each thread's first, then the least of them by atomic minimum: a
   * reduction of two variables is, in GCC's code, libgomp's one lock of
   * the process, which a fork can leave held (hicp__spin_lock). */
#pragma omp parallel num_threads(threads)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
    long long my_q = nq, my_w = nq;
#pragma omp for schedule(static)
    for (long long i = 0; i < nq; i++) {
      float p[3];
      memcpy(p, base + (size_t)i * stride, sizeof p);
      /* finite, and within HICP_COORD_MAX as every point hicp takes (the
       * squared distances of farther ones overflow to inf) */
      if (!(fabsf(p[0]) <= HICP_COORD_MAX && fabsf(p[1]) <= HICP_COORD_MAX &&
            fabsf(p[2]) <= HICP_COORD_MAX) &&
          i < my_q)
        my_q = i;
      if (warm && index[i] != UINT32_MAX && index[i] >= model->npoints && i < my_w)
        my_w = i;
    }
    atomic_min_ll(&bad_q, my_q);
    atomic_min_ll(&bad_w, my_w);
    hicp__fpenv_leave(&fe);
  }
  if (bad_q < nq) {
    float p[3];
    memcpy(p, base + (size_t)bad_q * stride, sizeof p);
    if (!(isfinite(p[0]) && isfinite(p[1]) && isfinite(p[2])))
      return hicp__fail(ctx, HICP_ENONFINITE, "query %lld has a non-finite coordinate", bad_q);
    return hicp__check_point(ctx, "query", (size_t)bad_q, p[0], p[1], p[2]);
  }
  if (bad_w < nq)
    return hicp__fail(ctx, HICP_EINVAL, "query %lld: previous match %u is not a model index",
                      bad_w, (unsigned)index[bad_w]);

  hicp__mview view = hicp__model_view(model);
  const hicp__query_fn query = hicp__cpu_simd_query(&view);
  const int method = (int)o.method;
  /* Queries relative to the model origin: exact when both origins agree. */
  double shift[3];
  for (int k = 0; k < 3; k++)
    shift[k] = qorigin[k] - model->origin[k];
  const int origin_zero = shift[0] == 0 && shift[1] == 0 && shift[2] == 0;
  hicp_walk_stats total;
  int total_lock = 0;
  memset(&total, 0, sizeof total);
  qorder ord;
  qorder_make(ctx, model, base, n, stride, shift, threads, &ord);
  /* answers go to position j: in query order, or in sorted order, copied
   * out below (writing sorted answers straight to their queries would have
   * the threads share cache lines) */
  uint32_t *out_idx = ord.order != NULL ? ord.idx : index;
  float *out_d2 = ord.order != NULL ? ord.d2 : d2;

  /* Blocks of queries: the walks of a block run as one wave (cpu/chunk.h);
   * one contiguous segment of queries per thread (cpu/segments.h), helpers
   * taking a quarter block at a time. */
  enum { BLOCK = HICP_CPU_WAVE };
  hicp__segments segs;
  hicp__segments_init(&segs, (uint64_t)nq, threads, BLOCK, BLOCK / 4, UINT64_MAX);
#pragma omp parallel num_threads(threads)
  {
    hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
    hicp__fpenv_enter(&fe);
    hicp_walk_stats mine;
    memset(&mine, 0, sizeof mine);
    float q[3 * BLOCK];
    uint32_t prev[BLOCK];
    hicp__nn_res res[BLOCK];
    uint32_t at = 0;
    for (uint64_t b0, b1; hicp__segments_take(&segs, hicp__segments_me(), &at, &b0, &b1);) {
      const long long j0 = (long long)b0, j1 = (long long)b1;
      for (long long j = j0; j < j1; j++) {
        const long long i = ord.order != NULL ? (long long)ord.order[j] : j;
        float p[3];
        memcpy(p, base + (size_t)i * stride, sizeof p);
        for (int k = 0; k < 3; k++)
          q[3 * (j - j0) + k] = origin_zero ? p[k] : (float)((double)p[k] + shift[k]);
        prev[j - j0] = o.warm_start && index[i] != UINT32_MAX ? model->vertex_of[index[i]]
                                                              : HICP_NONE;
      }
      query(&view, method, (uint32_t)(j1 - j0), q, prev, res);
      for (long long j = j0; j < j1; j++) {
        const hicp__nn_res *r = &res[j - j0];
        out_idx[j] = view.vtx[r->v].id;
        if (out_d2 != NULL)
          out_d2[j] = r->d2;
        if (r->walked)
          walk_stats_add(&mine, r->steps);
      }
    }
    hicp__spin_lock(&total_lock); /* not an OpenMP critical: see hicp__spin_lock */
    walk_stats_merge(&total, &mine);
    hicp__spin_unlock(&total_lock);
    hicp__fpenv_leave(&fe);
  }
  if (ord.order != NULL) {
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long long i = 0; i < nq; i++) {
      index[i] = ord.idx[ord.inv[i]];
      if (d2 != NULL)
        d2[i] = ord.d2[ord.inv[i]];
    }
  }
  qorder_free(&ord);
  hicp__team_ended(threads); /* its idle threads spin a while (contention.c) */
  if (stats != NULL)
    *stats = total;
  return HICP_OK;
}

static int nn_query(hicp_context *ctx, const char *fn, const hicp_model *model,
                    const float *queries, size_t n, const double qorigin[3],
                    const hicp_nn_options *user, uint32_t *index, float *d2,
                    hicp_walk_stats *stats)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = nn_query_body(ctx, fn, model, queries, n, qorigin, user, index, d2, stats);
  hicp__fpenv_leave(&fe);
  return rc;
}

int hicp_nn_query(hicp_context *ctx, const hicp_model *model, const float *queries, size_t n,
                  const hicp_nn_options *opts, uint32_t *index, float *d2,
                  hicp_walk_stats *stats)
{
  static const double zero[3] = {0.0, 0.0, 0.0};
  return nn_query(ctx, "hicp_nn_query", model, queries, n, zero, opts, index, d2, stats);
}

int hicp_nn_query_cloud(hicp_context *ctx, const hicp_model *model, const hicp_cloud *queries,
                        const hicp_nn_options *opts, uint32_t *index, float *d2,
                        hicp_walk_stats *stats)
{
  if (queries == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_nn_query_cloud: NULL cloud");
  if (opts != NULL && opts->struct_size >= offsetof(hicp_nn_options, warm_start) &&
      opts->query_stride != 0 && opts->query_stride != 3 * sizeof(float))
    return hicp__fail(ctx, HICP_EINVAL, "query_stride does not apply to a cloud");
  return nn_query(ctx, "hicp_nn_query_cloud", model, queries->xyz, queries->n, queries->origin,
                  opts, index, d2, stats);
}
