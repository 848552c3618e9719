/* test_gpu.c: the CUDA backend against the CPU, its oracle.  Every test
 * skips when no CUDA device is usable (a build without CUDA, a host without
 * a GPU or driver): none passes without having run.
 *
 * Bitwise: matches of every nearest-neighbour method, and registrations on
 * real models, degenerate sets, random inputs (a new seed each run, printed),
 * several chunk sizes, thread counts, filters; the hybrid split (GPU and CPU
 * workers in one iteration), a hybrid team stopped part way through a pass,
 * and batches over a device listed twice.  Faults:
 * out of memory, kernel failure, device lost (HICP_GPU_FAULT), each a clean
 * error with "cuda" and a CPU fallback with "auto". */
#include "config.h"

#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(HICP_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "backend.h"
#include "context.h"
#include "model.h"
#include "scheduler.h"
#include "testhelp.h"

static void need_gpu(void)
{
  char why[256];
  if (hicp__gpu_count(why, sizeof why) == 0)
    cr_skip_test("no CUDA device: %s", why);
}

static hicp_model *model_of(const float *p, size_t n)
{
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, n, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  hicp_context_destroy(ctx);
  return m;
}

/* Real model number mi (libcgal-demo) and a scan of it: every other point,
 * turned (8, -5, 10) degrees and moved 0.01 a coordinate, with noise of
 * 1e-3 (seed mi).  Returns 0, and nothing made, when the data is missing. */
static int real_case(size_t mi, const char *rel, hicp_model **m, float **scan, size_t *ns)
{
  const char *path = th_data(rel);
  if (path == NULL)
    return 0;
  hicp_cloud *c = th_load_cloud(path);
  *m = model_of(hicp_cloud_xyz(c), hicp_cloud_size(c));
  th_rng r;
  th_rng_seed(&r, mi);
  double R[9];
  th_rotation(8, -5, 10, R);
  *ns = hicp_cloud_size(c) / 2;
  float *s = malloc(sizeof(float) * 3 * *ns);
  cr_assert_not_null(s);
  for (size_t i = 0; i < *ns; i++) {
    const float *p = hicp_cloud_xyz(c) + 6 * i;
    for (int d = 0; d < 3; d++)
      s[3 * i + d] = (float)(R[3 * d] * p[0] + R[3 * d + 1] * p[1] + R[3 * d + 2] * p[2] +
                             0.01 * d + 1e-3 * th_normal(&r));
  }
  hicp_cloud_destroy(c);
  *scan = s;
  return 1;
}

/* real_case's boeing, for tests that need a device and that model:
 * skips without either. */
static void boeing_case(hicp_model **m, float **scan, size_t *ns)
{
  need_gpu();
  if (!real_case(1, "meshes/boeing.off", m, scan, ns))
    cr_skip_test("libcgal-demo data not found");
}

/* A tracker's options: 10 iterations, no early stop; frames tracked or
 * not. */
static void ten_iterations(hicp_reg_options *o, hicp_batch_options *bo, int track)
{
  hicp_reg_options_init(o);
  o->max_iter = 10;
  o->tol = 0;
  hicp_batch_options_init(bo);
  bo->track = track;
}

/* GPU answers equal the CPU's for every method, warm or cold. */
static void compare_nn(const hicp_model *m, const float *q, size_t nq, const char *what)
{
  hicp_context *ctx = th_context(2, HICP_BACKEND_CUDA);
  hicp__mview view = hicp__model_view(m);
  uint32_t *gv = malloc(sizeof *gv * nq);
  float *gd = malloc(sizeof *gd * nq);
  for (int method = 0; method <= 5; method++) {
    for (int warm = 0; warm <= 1; warm++) {
      for (size_t i = 0; i < nq; i++)
        gv[i] = warm ? (uint32_t)((i * 131u) % view.nv) : HICP_NONE;
      cr_assert_eq(hicp__gpu_nn(ctx, m, q, nq, method, gv, gd, NULL), 0, "%s",
                   hicp_context_error(ctx));
      for (size_t i = 0; i < nq; i++) {
        uint32_t prev = warm ? (uint32_t)((i * 131u) % view.nv) : HICP_NONE;
        hicp__nn_res r = hicp__nn_query(&view, &q[3 * i], method, prev);
        cr_assert(gv[i] == r.v && memcmp(&gd[i], &r.d2, 4) == 0,
                  "%s: method %d warm %d query %zu: GPU %u, CPU %u", what, method, warm, i, gv[i],
                  r.v);
      }
    }
  }
  free(gv);
  free(gd);
  hicp_context_destroy(ctx);
}

Test(gpu, nn_matches_cpu)
{
  need_gpu();
  uint64_t seed = th_run_seed();
  th_rng r;
  th_rng_seed(&r, seed);
  fprintf(stderr, "gpu nn seed %llu\n", (unsigned long long)seed);
  size_t n = 20000, nq = 20000;
  float *p = malloc(sizeof(float) * 3 * n), *q = malloc(sizeof(float) * 3 * nq);
  for (size_t i = 0; i < 3 * n; i++)
    p[i] = (float)th_normal(&r);
  for (size_t i = 0; i < 3 * nq; i++)
    q[i] = (float)(3.0 * th_normal(&r));
  hicp_model *m = model_of(p, n);
  compare_nn(m, q, nq, "random");
  hicp_model_destroy(m);
  /* a grid: exact ties everywhere */
  size_t k = 0;
  for (int x = 0; x < 12; x++)
    for (int y = 0; y < 12; y++)
      for (int z = 0; z < 12; z++, k++) {
        p[3 * k] = (float)x;
        p[3 * k + 1] = (float)y;
        p[3 * k + 2] = (float)z;
      }
  for (size_t i = 0; i < nq; i++)
    for (int d = 0; d < 3; d++)
      q[3 * i + d] = 0.5f * (float)(th_rng_next(&r) % 26) - 1.0f;
  m = model_of(p, k);
  compare_nn(m, q, nq, "grid");
  hicp_model_destroy(m);
  free(p);
  free(q);
}

/* The walks themselves are the CPU's: the same start (the model's start
 * table in the first pass, the previous match after it) and the same
 * per-point steps give the same walk statistics, bucket by bucket.  A GPU
 * that started its first pass elsewhere (a kd descent) would walk other
 * paths of other lengths to the same answers. */
Test(gpu, walks_match_cpu)
{
  need_gpu();
  static const char *models[] = {"meshes/bunny00.off", "meshes/boeing.off"};
  int found = 0;
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    hicp_model *m;
    float *s;
    size_t ns;
    if (!real_case(mi, models[mi], &m, &s, &ns))
      continue;
    found++;
    cr_assert_not_null(m->start, "%s: no start table", models[mi]);
    for (int iters = 1; iters <= 30; iters += 29) {
      hicp_reg_options o;
      hicp_reg_options_init(&o);
      o.max_iter = iters;
      o.tol = 0;
      hicp_result cpu, gpu;
      hicp_result_init(&cpu);
      hicp_result_init(&gpu);
      hicp_context *cc = th_context(2, HICP_BACKEND_CPU);
      hicp_context *gc = th_context(1, HICP_BACKEND_CUDA);
      cr_assert_eq(hicp_register(cc, m, s, ns, &o, NULL, &cpu), 0);
      cr_assert_eq(hicp_register(gc, m, s, ns, &o, NULL, &gpu), 0, "%s", hicp_context_error(gc));
      cr_assert_eq(gpu.backend, HICP_BACKEND_CUDA);
      cr_assert_gt(cpu.walk.steps, 0);
      cr_assert(cpu.walk.queries == gpu.walk.queries && cpu.walk.steps == gpu.walk.steps &&
                    cpu.walk.max_steps == gpu.walk.max_steps &&
                    memcmp(cpu.walk.hist, gpu.walk.hist, sizeof cpu.walk.hist) == 0,
                "%s, %d iterations: the GPU walked %llu steps for %llu queries, the CPU %llu "
                "for %llu",
                models[mi], iters, (unsigned long long)gpu.walk.steps,
                (unsigned long long)gpu.walk.queries, (unsigned long long)cpu.walk.steps,
                (unsigned long long)cpu.walk.queries);
      cr_assert(memcmp(&cpu.transform, &gpu.transform, sizeof cpu.transform) == 0);
      hicp_context_destroy(cc);
      hicp_context_destroy(gc);
    }
    free(s);
    hicp_model_destroy(m);
  }
  if (!found)
    cr_skip_test("libcgal-demo data not found");
}

/* A tracked batch on the device: frames of equal size would start from
 * the matches of the frame before, but the device loop keeps its matches
 * on the device, so each frame starts from the start table, as the CPU
 * does with reuse_matches 0: the same walks, step for step, and the same
 * poses.  (Until stop 42 such frames started from indices the host never
 * wrote.) */
Test(gpu, tracked_frames_on_the_device)
{
  hicp_model *m;
  float *s;
  size_t ns;
  boeing_case(&m, &s, &ns);
  enum { NF = 4 };
  float *fr[NF];
  const float *frames[NF];
  size_t counts[NF];
  for (int k = 0; k < NF; k++) {
    double R[9];
    th_rotation(0.5 * k, -0.4 * k, 0.6 * k, R);
    fr[k] = malloc(sizeof(float) * 3 * ns);
    cr_assert_not_null(fr[k]);
    for (size_t i = 0; i < ns; i++) {
      const float *p = s + 3 * i;
      for (int d = 0; d < 3; d++)
        fr[k][3 * i + d] = (float)(R[3 * d] * p[0] + R[3 * d + 1] * p[1] + R[3 * d + 2] * p[2]);
    }
    frames[k] = fr[k];
    counts[k] = ns;
  }
  hicp_reg_options o;
  hicp_batch_options bo;
  ten_iterations(&o, &bo, 1);
  hicp_result cpu[NF], gpu[NF];
  for (int k = 0; k < NF; k++) {
    hicp_result_init(&cpu[k]);
    hicp_result_init(&gpu[k]);
  }
  hicp_context *gc = th_context(1, HICP_BACKEND_CUDA);
  cr_assert_eq(hicp_register_batch(gc, m, frames, counts, NF, &o, &bo, NULL, gpu), 0, "%s",
               hicp_context_error(gc));
  bo.reuse_matches = 0;
  hicp_context *cc = th_context(2, HICP_BACKEND_CPU);
  cr_assert_eq(hicp_register_batch(cc, m, frames, counts, NF, &o, &bo, NULL, cpu), 0);
  for (int k = 0; k < NF; k++) {
    cr_assert_eq(gpu[k].backend, HICP_BACKEND_CUDA);
    cr_assert(gpu[k].walk.queries == cpu[k].walk.queries &&
                  gpu[k].walk.steps == cpu[k].walk.steps &&
                  memcmp(gpu[k].walk.hist, cpu[k].walk.hist, sizeof cpu[k].walk.hist) == 0,
              "frame %d: the GPU walked %llu steps, the CPU without reuse %llu", k,
              (unsigned long long)gpu[k].walk.steps, (unsigned long long)cpu[k].walk.steps);
    cr_assert(memcmp(&gpu[k].transform, &cpu[k].transform, sizeof cpu[k].transform) == 0,
              "frame %d", k);
  }
  hicp_context_destroy(gc);

  /* A tracked stream on "hybrid" spreads each frame over the device and
   * the CPU, as a tracked batch does (until stop 42 it ran on one device
   * alone): the CPU's poses, and, its matches kept on the host, the walks
   * of the CPU with reuse_matches 1. */
  bo.reuse_matches = 1;
  cr_assert_eq(hicp_register_batch(cc, m, frames, counts, NF, &o, &bo, NULL, cpu), 0);
  hicp_context *hc = th_context(2, HICP_BACKEND_HYBRID);
  hicp_stream *st;
  cr_assert_eq(hicp_stream_create(hc, m, &o, &bo, &st), 0, "%s", hicp_context_error(hc));
  for (int k = 0; k < NF; k++)
    cr_assert_eq(hicp_stream_submit(st, frames[k], counts[k], NULL, NULL), 0);
  for (int k = 0; k < NF; k++) {
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_receive(st, &r, 1), 0);
    cr_assert_eq(r.error, 0, "frame %d: %s", k, r.note);
    cr_assert_eq(r.backend, HICP_BACKEND_HYBRID, "frame %d ran on %s", k,
                 hicp_backend_name(r.backend));
    cr_assert(memcmp(&r.transform, &cpu[k].transform, sizeof r.transform) == 0, "frame %d", k);
    cr_assert(r.walk.steps == cpu[k].walk.steps && r.walk.queries == cpu[k].walk.queries,
              "frame %d: hybrid walked %llu steps, the CPU %llu", k,
              (unsigned long long)r.walk.steps, (unsigned long long)cpu[k].walk.steps);
  }
  hicp_stream_destroy(st);
  hicp_context_destroy(hc);
  hicp_context_destroy(cc);
  for (int k = 0; k < NF; k++)
    free(fr[k]);
  free(s);
  hicp_model_destroy(m);
}

/* Streams on the device backends, tracked and not: what a stream holds
 * (frames not yet run, results not yet received) counts against the
 * memory limit as on the CPU, and the device workers give it back, so
 * every frame queued before the refusal answers with the CPU's pose and
 * the stream then takes frames again; destroying a stream while the
 * device runs a frame of a million iterations and another thread waits in
 * hicp_stream_receive stops the frame and wakes that thread (batch:: has
 * the same checks on the CPU). */
Test(gpu, streams_on_the_device)
{
  hicp_model *m;
  float *s;
  size_t ns;
  boeing_case(&m, &s, &ns);
  static const hicp_backend backends[] = {HICP_BACKEND_CUDA, HICP_BACKEND_HYBRID};
  hicp_context *cc = th_context(2, HICP_BACKEND_CPU);
  for (size_t bi = 0; bi < sizeof backends / sizeof *backends; bi++) {
    for (int track = 0; track <= 1; track++) {
      char what[64];
      snprintf(what, sizeof what, "%s, track %d", hicp_backend_name(backends[bi]), track);
      hicp_reg_options o;
      hicp_batch_options bo;
      ten_iterations(&o, &bo, track);
      hicp_context_options co;
      hicp_context_options_init(&co);
      co.threads = 2;
      co.backend = backends[bi];
      co.memory_limit = UINT64_C(4) << 20;
      hicp_context *ctx;
      cr_assert_eq(hicp_context_create(&co, &ctx), 0, "%s", what);
      hicp_stream *st;
      cr_assert_eq(hicp_stream_create(ctx, m, &o, &bo, &st), 0, "%s: %s", what,
                   hicp_context_error(ctx));
      const size_t k = th_stream_fill_to_limit(st, ctx, s, ns, 4, what);

      /* the CPU's answers for the same frames */
      const float **frames = malloc(sizeof *frames * k);
      size_t *counts = malloc(sizeof *counts * k);
      hicp_result *cpu = malloc(sizeof *cpu * k);
      cr_assert(frames != NULL && counts != NULL && cpu != NULL);
      for (size_t i = 0; i < k; i++) {
        frames[i] = s;
        counts[i] = ns;
        hicp_result_init(&cpu[i]);
      }
      cr_assert_eq(hicp_register_batch(cc, m, frames, counts, k, &o, &bo, NULL, cpu), 0);
      for (size_t i = 0; i < k; i++) {
        hicp_result r;
        hicp_result_init(&r);
        cr_assert_eq(hicp_stream_receive(st, &r, 1), HICP_OK, "%s", what);
        cr_assert_eq(r.frame, (uint64_t)i);
        cr_assert_eq(r.error, 0, "%s: frame %zu: %s", what, i, r.note);
        if (backends[bi] == HICP_BACKEND_CUDA)
          cr_assert_eq(r.backend, HICP_BACKEND_CUDA, "%s: frame %zu ran on %s", what, i,
                       hicp_backend_name(r.backend));
        cr_assert(memcmp(&r.transform, &cpu[i].transform, sizeof r.transform) == 0,
                  "%s: frame %zu of %zu is not the CPU's", what, i, k);
      }
      for (int again = 0; again < 3; again++)
        cr_assert_eq(hicp_stream_submit(st, s, ns, NULL, NULL), HICP_OK, "%s: %s", what,
                     hicp_context_error(ctx));
      hicp_stream_destroy(st);
      free(frames);
      free(counts);
      free(cpu);

      o.max_iter = 1000000;
      cr_assert_eq(hicp_stream_create(ctx, m, &o, &bo, &st), 0, "%s", what);
      th_stream_destroy_under_a_receiver(st, s, ns, what);
      o.max_iter = 10;
      hicp_result r;
      hicp_result_init(&r);
      cr_assert_eq(hicp_register(ctx, m, s, ns, &o, NULL, &r), 0, "%s: %s", what,
                   hicp_context_error(ctx));
      cr_assert_eq(r.iterations, 10, "%s: the context stayed cancelled (%s)", what,
                   hicp_stop_name(r.stop));
      hicp_context_destroy(ctx);
    }
  }
  hicp_context_destroy(cc);
  free(s);
  hicp_model_destroy(m);
}

/* Registrations: the CPU's bits for every method, chunk size, filter and
 * thread count, on the real models. */
Test(gpu, registration_bitwise_real_models, .timeout = 600)
{
  need_gpu();
  static const char *models[] = {"meshes/bunny00.off", "meshes/ChineseDragon-10kv.off",
                                 "meshes/boeing.off", "meshes/fandisk_large.off"};
  int found = 0;
  for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
    hicp_model *m;
    float *s;
    size_t ns;
    if (!real_case(mi, models[mi], &m, &s, &ns))
      continue;
    found++;
    for (int method = 0; method <= 5; method++) {
      for (int variant = 0; variant < 3; variant++) {
        if (method == HICP_NN_BRUTE && variant > 0)
          continue;
        hicp_reg_options o;
        hicp_reg_options_init(&o);
        o.nn = (hicp_nn_method)method;
        o.max_iter = 30;
        o.tol = 0;
        o.chunk_points = variant == 0 ? 2048 : variant == 1 ? 256 : 65536;
        if (variant == 2) {
          o.filter_start = 5;
          o.trim = 0.9;
        }
        hicp_result cpu, gpu;
        hicp_result_init(&cpu);
        hicp_result_init(&gpu);
        hicp_context *cc = th_context(1 + variant, HICP_BACKEND_CPU);
        hicp_context *gc = th_context(1, HICP_BACKEND_CUDA);
        cr_assert_eq(hicp_register(cc, m, s, ns, &o, NULL, &cpu), 0);
        cr_assert_eq(hicp_register(gc, m, s, ns, &o, NULL, &gpu), 0, "%s", hicp_context_error(gc));
        cr_assert_eq(gpu.backend, HICP_BACKEND_CUDA);
        cr_assert(memcmp(&cpu.transform, &gpu.transform, sizeof cpu.transform) == 0,
                  "%s method %d variant %d: GPU transform differs", models[mi], method, variant);
        cr_assert_eq(cpu.rmse, gpu.rmse);
        cr_assert_eq(cpu.inliers, gpu.inliers);
        cr_assert_eq(cpu.iterations, gpu.iterations);
        hicp_context_destroy(cc);
        hicp_context_destroy(gc);
      }
    }
    free(s);
    hicp_model_destroy(m);
  }
  if (!found)
    cr_skip_test("libcgal-demo data not found");
}

/* Degenerate scans and models: identical points, a line, a plane model. */
Test(gpu, degenerate_sets_bitwise)
{
  need_gpu();
  float plane[3 * 900], line[3 * 50], same[3 * 30];
  for (int i = 0; i < 900; i++) {
    plane[3 * i] = (float)(i % 30) * 0.1f;
    plane[3 * i + 1] = (float)(i / 30) * 0.1f;
    plane[3 * i + 2] = 0.0f;
  }
  for (int i = 0; i < 50; i++) {
    line[3 * i] = 0.05f * (float)i;
    line[3 * i + 1] = 0.3f;
    line[3 * i + 2] = 0.01f;
  }
  for (int i = 0; i < 30; i++) {
    same[3 * i] = 1.0f;
    same[3 * i + 1] = 1.0f;
    same[3 * i + 2] = 0.2f;
  }
  hicp_model *m = model_of(plane, 900); /* no Delaunay graph: the kd-tree path */
  const float *scans[3] = {plane, line, same};
  size_t counts[3] = {900, 50, 30};
  for (int k = 0; k < 3; k++) {
    hicp_result a, b;
    hicp_result_init(&a);
    hicp_result_init(&b);
    hicp_context *cc = th_context(2, HICP_BACKEND_CPU), *gc = th_context(1, HICP_BACKEND_CUDA);
    hicp_transform init;
    hicp_transform_identity(&init);
    init.m[3] = 0.05;
    cr_assert_eq(hicp_register(cc, m, scans[k], counts[k], NULL, &init, &a), 0);
    cr_assert_eq(hicp_register(gc, m, scans[k], counts[k], NULL, &init, &b), 0);
    cr_assert(memcmp(&a.transform, &b.transform, sizeof a.transform) == 0, "scan %d", k);
    cr_assert_eq(a.degenerate, b.degenerate);
    hicp_context_destroy(cc);
    hicp_context_destroy(gc);
  }
  hicp_model_destroy(m);
}

/* A random point of the ellipsoid with half-axes 2, 1 and 0.5. */
static void ellipsoid_point(th_rng *r, float *p)
{
  double u = th_uniform(r) * 6.283, v = th_uniform(r) * 3.1416;
  p[0] = (float)(2 * sin(v) * cos(u));
  p[1] = (float)(sin(v) * sin(u));
  p[2] = (float)(0.5 * cos(v));
}

/* n points of the ellipsoid (seed) and a scan of them, moved (0.02, -0.01)
 * with noise of 1e-3 in z */
static void ellipsoid_case(uint64_t seed, size_t n, float **model, float **scan)
{
  th_rng r;
  th_rng_seed(&r, seed);
  float *p = malloc(sizeof(float) * 3 * n), *s = malloc(sizeof(float) * 3 * n);
  cr_assert(p != NULL && s != NULL);
  for (size_t i = 0; i < n; i++) {
    ellipsoid_point(&r, &p[3 * i]);
    s[3 * i] = p[3 * i] + 0.02f;
    s[3 * i + 1] = p[3 * i + 1] - 0.01f;
    s[3 * i + 2] = p[3 * i + 2] + (float)(1e-3 * th_normal(&r));
  }
  *model = p;
  *scan = s;
}

/* One iteration split between a GPU worker and CPU workers: same bits. */
Test(gpu, hybrid_split_bitwise)
{
  need_gpu();
  const size_t n = 30000;
  float *p, *s;
  ellipsoid_case(5, n, &p, &s);
  hicp_model *m = model_of(p, n);
  hicp_context *ctx = th_context(2, HICP_BACKEND_HYBRID);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.chunk_points = 512;
  o.filter_start = 3;
  hicp__plan plan;
  cr_assert_eq(hicp__make_plan(ctx, m, &o, &plan, NULL), 0);
  static const double zero[3] = {0, 0, 0};
  hicp_result ref;
  hicp_result_init(&ref);
  hicp__worker cpu_only;
  hicp__team solo = {{&cpu_only}, 1, -1.0};
  hicp__cpu_worker_init(&cpu_only, ctx, 2);
  cr_assert_eq(hicp__register_frame(ctx, m, s, n, zero, &plan, NULL, &solo, NULL, NULL, &ref,
                                    hicp__now_ms()),
               0);
  static const double shares[] = {0.0, 0.3, 0.9, 1.0, -1.0};
  for (size_t k = 0; k < sizeof shares / sizeof *shares; k++) {
    hicp__worker g0, g1, c;
    cr_assert_eq(hicp__gpu_worker_init(&g0, ctx, 0), 0, "%s", hicp_context_error(ctx));
    cr_assert_eq(hicp__gpu_worker_init(&g1, ctx, 0), 0); /* the same device twice */
    hicp__cpu_worker_init(&c, ctx, 2);
    /* the CPU worker first, as hicp__track_team makes a team (on the calling
     * thread), or last (on a thread of its own): the same bits */
    hicp__team team = k % 2 ? (hicp__team){{&c, &g0, &g1}, 3, shares[k]}
                            : (hicp__team){{&g0, &g1, &c}, 3, shares[k]};
    hicp_result rr;
    hicp_result_init(&rr);
    cr_assert_eq(hicp__register_frame(ctx, m, s, n, zero, &plan, NULL, &team, NULL, NULL, &rr,
                                      hicp__now_ms()),
                 0,
                 "%s", hicp_context_error(ctx));
    cr_assert(memcmp(&rr.transform, &ref.transform, sizeof rr.transform) == 0, "share %g differs",
              shares[k]);
    g0.ops->destroy(&g0);
    g1.ops->destroy(&g1);
  }
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
  free(p);
  free(s);
}

/* The caller's own CUDA state survives every call (stop 55's review): its
 * thread's current device (here the last device, the context on device 0:
 * a host of one GPU sees the same device either way, so only the error
 * half can fail there), and its pending last error, which hicp neither
 * clears nor takes for a failure of its own (a hybrid worker's launch check
 * read it, and the frame fell back to the CPU with "GPU failed").  And
 * where the caller has no error pending, hicp leaves none. */
Test(gpu, callers_cuda_state_kept)
{
  need_gpu();
#if defined(HICP_HAVE_CUDA)
  int ndev = 0;
  cr_assert_eq(cudaGetDeviceCount(&ndev), cudaSuccess);
  const size_t n = 6000;
  float *p, *s;
  ellipsoid_case(9, n, &p, &s);
  hicp_model *m = model_of(p, n);
  hicp_reg_options o;
  hicp_batch_options bo;
  ten_iterations(&o, &bo, 1);
  hicp_context *cc = th_context(2, HICP_BACKEND_CPU);
  hicp_result ref;
  hicp_result_init(&ref);
  cr_assert_eq(hicp_register(cc, m, s, n, &o, NULL, &ref), 0);
  const float *frames[2] = {s, s};
  const size_t counts[2] = {n, n};
  static const hicp_backend backends[] = {HICP_BACKEND_CUDA, HICP_BACKEND_HYBRID};
  for (int pending = 0; pending <= 1; pending++)
    for (int b = 0; b < 2; b++)
      for (int batch = 0; batch <= 1; batch++) {
        hicp_context *gc = th_context(2, backends[b]);
        cr_assert_eq(cudaSetDevice(ndev - 1), cudaSuccess);
        (void)cudaGetLastError();
        cudaError_t want = cudaSuccess;
        if (pending) { /* a non-sticky error of the caller's own */
          (void)cudaSetDevice(ndev);
          void *none = NULL;
          if (cudaPeekAtLastError() == cudaSuccess)
            (void)cudaMalloc(&none, SIZE_MAX / 2);
          want = cudaPeekAtLastError();
          cr_assert_neq(want, cudaSuccess, "an invalid device left no error to keep");
        }
        hicp_result res[2];
        hicp_result_init(&res[0]);
        hicp_result_init(&res[1]);
        const int rc = batch ? hicp_register_batch(gc, m, frames, counts, 2, &o, &bo, NULL, res)
                             : hicp_register(gc, m, s, n, &o, NULL, &res[0]);
        int now = -1;
        cr_assert_eq(cudaGetDevice(&now), cudaSuccess);
        const cudaError_t left = cudaPeekAtLastError();
        (void)cudaGetLastError();
        const char *what = batch ? "a tracked batch" : "hicp_register";
        cr_assert_eq(rc, 0, "%s, backend %d: %s", what, (int)backends[b], hicp_context_error(gc));
        cr_assert_eq(now, ndev - 1, "%s, backend %d: the caller's device %d became %d", what,
                     (int)backends[b], ndev - 1, now);
        cr_assert_eq(left, want, "%s, backend %d, error pending %d: the caller's last error %d, now %d",
                     what, (int)backends[b], pending, (int)want, (int)left);
        cr_assert(strstr(res[0].note, "GPU failed") == NULL, "%s, backend %d: %s", what,
                  (int)backends[b], res[0].note);
        cr_assert(memcmp(&res[0].transform, &ref.transform, sizeof ref.transform) == 0,
                  "%s, backend %d: not the CPU's transform", what, (int)backends[b]);
        hicp_context_destroy(gc);
      }
  cr_assert_eq(cudaSetDevice(0), cudaSuccess);
  hicp_context_destroy(cc);
  hicp_model_destroy(m);
  free(p);
  free(s);
#else
  cr_skip_test("a build without CUDA");
#endif
}

struct halt_case {
  hicp_context *ctx;
  unsigned delay_us;
};

static void *cancel_after(void *arg)
{
  const struct halt_case *h = arg;
  usleep(h->delay_us);
  hicp_context_cancel(h->ctx);
  return NULL;
}

/* A hybrid team stopped by its time budget or a cancel, which the CPU
 * worker hears before each piece of pass A while the device finishes its
 * share (stop 48): the pass is dropped, and the result is the CPU's after
 * as many whole iterations, with the right stop.  Budgets from 0.25 to 20
 * ms land in every part of a pass of 200,000 points (about 8 ms on two
 * threads); the team then registers again, unstopped, to the CPU's bits. */
Test(gpu, hybrid_team_stops_part_way, .timeout = 300)
{
  need_gpu();
  th_rng r;
  th_rng_seed(&r, 61);
  enum { NM = 30000, NS = 200000, MAX_IT = 40 };
  float *p = malloc(sizeof(float) * 3 * NM), *s = malloc(sizeof(float) * 3 * NS);
  cr_assert(p != NULL && s != NULL);
  for (size_t i = 0; i < NM; i++)
    ellipsoid_point(&r, &p[3 * i]);
  double R[9];
  th_rotation(3, -2, 4, R);
  for (size_t i = 0; i < NS; i++) {
    float q[3];
    ellipsoid_point(&r, q);
    for (int d = 0; d < 3; d++)
      s[3 * i + d] = (float)(R[3 * d] * q[0] + R[3 * d + 1] * q[1] + R[3 * d + 2] * q[2] +
                             0.03 + 1e-3 * th_normal(&r));
  }
  hicp_model *m = model_of(p, NM);
  hicp_context *ctx = th_context(2, HICP_BACKEND_HYBRID);
  static const double zero[3] = {0, 0, 0};

  /* the CPU alone, capped at k iterations, for every k a stop gives */
  hicp_result ref[MAX_IT + 1];
  int have[MAX_IT + 1] = {0};
  hicp__worker cpu_only;
  hicp__team solo = {{&cpu_only}, 1, -1.0};
  hicp__cpu_worker_init(&cpu_only, ctx, 2);

  hicp__worker g, c;
  cr_assert_eq(hicp__gpu_worker_init(&g, ctx, 0), 0, "%s", hicp_context_error(ctx));
  hicp__cpu_worker_init(&c, ctx, 2);
  hicp__team team = {{&g, &c}, 2, 0.5};

  int stopped = 0, part_way = 0;
  for (int trial = 0; trial < 2 * 40 + 1; trial++) {
    const int cancel = trial % 2, last = trial == 2 * 40;
    hicp_reg_options o;
    hicp_reg_options_init(&o);
    o.max_iter = last ? 12 : MAX_IT;
    o.tol = 0;
    if (!cancel && !last)
      o.time_budget_ms = 0.25 + 0.5 * (trial / 2);
    hicp__plan plan;
    cr_assert_eq(hicp__make_plan(ctx, m, &o, &plan, NULL), 0);
    struct halt_case h = {ctx, 250u + 500u * (unsigned)(trial / 2)};
    pthread_t t;
    hicp__cancel_begin(ctx);
    if (cancel && !last)
      cr_assert_eq(pthread_create(&t, NULL, cancel_after, &h), 0);
    hicp_result rr;
    hicp_result_init(&rr);
    double t0 = hicp__now_ms();
    cr_assert_eq(hicp__register_frame(ctx, m, s, NS, zero, &plan, NULL, &team, NULL, NULL, &rr,
                                      t0),
                 0, "%s", hicp_context_error(ctx));
    double took = hicp__now_ms() - t0;
    if (cancel && !last)
      pthread_join(t, NULL);
    const int k = rr.iterations;
    cr_assert(k >= 0 && k <= o.max_iter, "trial %d: %d iterations", trial, k);
    if (k < o.max_iter) {
      cr_assert(!last, "the unstopped run ended after %d iterations", k);
      cr_assert_eq(rr.stop, cancel ? HICP_STOP_CANCELED : HICP_STOP_TIMEOUT,
                   "trial %d: stopped by %s", trial, hicp_stop_name(rr.stop));
      stopped++;
      /* a stop at an iteration's end leaves no pass behind it; one part
       * way through a pass returns before the next iteration could end */
      if (took < (o.time_budget_ms > 0 ? o.time_budget_ms : h.delay_us / 1e3) + 1.0)
        part_way++;
    }
    if (!have[k]) {
      hicp_reg_options oc = o;
      oc.max_iter = k;
      oc.time_budget_ms = 0;
      hicp__plan pc;
      cr_assert_eq(hicp__make_plan(ctx, m, &oc, &pc, NULL), 0);
      hicp_result_init(&ref[k]);
      hicp__cancel_begin(ctx);
      cr_assert_eq(hicp__register_frame(ctx, m, s, NS, zero, &pc, NULL, &solo, NULL, NULL,
                                        &ref[k], hicp__now_ms()),
                   0);
      cr_assert_eq(ref[k].iterations, k);
      have[k] = 1;
    }
    cr_assert(memcmp(&rr.transform, &ref[k].transform, sizeof rr.transform) == 0,
              "trial %d (%s): after %d iterations, not the CPU's transform", trial,
              cancel ? "cancel" : "budget", k);
    /* NaN: stopped in the first pass, before any sums */
    if (!isnan(rr.rmse)) {
      cr_assert(memcmp(&rr.rmse, &ref[k].rmse, sizeof rr.rmse) == 0, "trial %d: rmse %.17g, "
                "the CPU's %.17g", trial, rr.rmse, ref[k].rmse);
      cr_assert_eq(rr.inliers, ref[k].inliers, "trial %d", trial);
    } else {
      cr_assert_eq(k, 0, "trial %d: rmse NaN after %d iterations", trial, k);
    }
  }
  cr_log_info("%d of 80 stopped runs, %d of them within 1 ms of the stop's time", stopped,
              part_way);
  cr_assert_gt(stopped, 40, "only %d of 80 runs stopped early: the test shows little", stopped);
  g.ops->destroy(&g);
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
  free(p);
  free(s);
}

/* A batch's case: a model of 8,000 normal points (seed), nf frames of
 * 1,000 to 2,500 of its points moved and noisy, and the CPU's results for
 * them as a batch.  Free with batch_case_free. */
static hicp_model *batch_case(unsigned seed, int nf, const float **frames, size_t *counts,
                              hicp_result *cpu)
{
  th_rng r;
  th_rng_seed(&r, seed);
  size_t n = 8000;
  float *p = malloc(sizeof(float) * 3 * n);
  cr_assert_not_null(p);
  for (size_t i = 0; i < 3 * n; i++)
    p[i] = (float)th_normal(&r);
  hicp_model *m = model_of(p, n);
  for (int k = 0; k < nf; k++) {
    counts[k] = 1000 + 250 * (size_t)(k % 7);
    float *f = malloc(sizeof(float) * 3 * counts[k]);
    cr_assert_not_null(f);
    for (size_t i = 0; i < counts[k]; i++)
      for (int d = 0; d < 3; d++)
        f[3 * i + d] = p[3 * i + d] + 0.01f * (float)(k % 5) + (float)(1e-3 * th_normal(&r));
    frames[k] = f;
  }
  free(p);
  hicp_context *cc = th_context(2, HICP_BACKEND_CPU);
  for (int k = 0; k < nf; k++)
    hicp_result_init(&cpu[k]);
  cr_assert_eq(hicp_register_batch(cc, m, frames, counts, (size_t)nf, NULL, NULL, NULL, cpu), 0);
  hicp_context_destroy(cc);
  return m;
}

static void batch_case_free(hicp_model *m, int nf, const float **frames)
{
  for (int k = 0; k < nf; k++)
    free((void *)frames[k]);
  hicp_model_destroy(m);
}

/* A batch over a device listed twice, and hybrid batches: the CPU's bits
 * frame by frame, every frame once; again on the same context, whose
 * workers (their streams and model copies) it kept; then a batch of
 * another model, for which it makes them anew (each device worker is
 * sized for one copy of a model). */
Test(gpu, batch_two_logical_devices)
{
  need_gpu();
  enum { NF = 24 };
  const float *frames[2][NF];
  size_t counts[2][NF];
  hicp_result cpu[2][NF], res[NF];
  hicp_model *m[2] = {batch_case(9, NF, frames[0], counts[0], cpu[0]),
                      batch_case(10, NF, frames[1], counts[1], cpu[1])};
  for (int b = 0; b < 2; b++) {
    int devs[2] = {0, 0};
    hicp_context_options o;
    hicp_context_options_init(&o);
    o.backend = b ? HICP_BACKEND_HYBRID : HICP_BACKEND_CUDA;
    o.devices = devs;
    o.ndevices = 2;
    hicp_context *ctx;
    cr_assert_eq(hicp_context_create(&o, &ctx), 0);
    const unsigned made = atomic_load(&hicp__batch_crews_made);
    static const int model_of_call[3] = {0, 0, 1};
    static const unsigned crews_after[3] = {1, 1, 2};
    for (int call = 0; call < 3; call++) {
      const int c = model_of_call[call];
      for (int k = 0; k < NF; k++)
        hicp_result_init(&res[k]);
      cr_assert_eq(hicp_register_batch(ctx, m[c], frames[c], counts[c], NF, NULL, NULL, NULL, res),
                   0, "%s", hicp_context_error(ctx));
      for (int k = 0; k < NF; k++) {
        cr_assert_eq(res[k].frame, (uint64_t)k);
        cr_assert(memcmp(&res[k].transform, &cpu[c][k].transform, sizeof res[k].transform) == 0,
                  "backend %d, call %d (model %d), frame %d", b, call, c, k);
      }
      cr_assert_eq(atomic_load(&hicp__batch_crews_made), made + crews_after[call],
                   "backend %d, after call %d: %u crews", b, call,
                   atomic_load(&hicp__batch_crews_made) - made);
    }
    hicp_context_destroy(ctx);
  }
  for (int c = 0; c < 2; c++)
    batch_case_free(m[c], NF, frames[c]);
}

/* A device list naming a device the host lacks (one gone from the bus):
 * "cuda" refuses the batch; "hybrid" and "auto" run it without that
 * device, as hicp_register() does, and say so in every result (until stop
 * 50 their batches failed with HICP_ENODEVICE while a registration ran). */
Test(gpu, batch_without_a_listed_device)
{
  need_gpu();
  char why[256];
  const int ngpu = hicp__gpu_count(why, sizeof why);
  enum { NF = 5 };
  const float *frames[NF];
  size_t counts[NF];
  hicp_result cpu[NF], res[NF];
  hicp_model *m = batch_case(12, NF, frames, counts, cpu);
  static const hicp_backend backends[] = {HICP_BACKEND_CUDA, HICP_BACKEND_HYBRID,
                                          HICP_BACKEND_AUTO};
  for (int b = 0; b < 3; b++) {
    for (int first = 0; first <= 1; first++) {
      /* {missing} alone, and {0, missing} */
      int devs[2] = {0, ngpu};
      hicp_context_options o;
      hicp_context_options_init(&o);
      o.backend = backends[b];
      o.threads = 2;
      o.devices = first ? devs : devs + 1;
      o.ndevices = first ? 2 : 1;
      hicp_context *ctx;
      cr_assert_eq(hicp_context_create(&o, &ctx), 0);
      for (int k = 0; k < NF; k++)
        hicp_result_init(&res[k]);
      int rc = hicp_register_batch(ctx, m, frames, counts, NF, NULL, NULL, NULL, res);
      if (backends[b] == HICP_BACKEND_CUDA) {
        cr_assert_eq(rc, HICP_ENODEVICE, "cuda: %d", rc);
        cr_assert(strstr(hicp_context_error(ctx), "no CUDA device") != NULL, "%s",
                  hicp_context_error(ctx));
      } else {
        cr_assert_eq(rc, 0, "%s: %s", hicp_backend_name(backends[b]), hicp_context_error(ctx));
        for (int k = 0; k < NF; k++) {
          cr_assert(memcmp(&res[k].transform, &cpu[k].transform, sizeof cpu[k].transform) == 0,
                    "%s frame %d", hicp_backend_name(backends[b]), k);
          cr_assert(strstr(res[k].note, "no CUDA device") != NULL, "%s frame %d: note '%s'",
                    hicp_backend_name(backends[b]), k, res[k].note);
          if (first && backends[b] == HICP_BACKEND_AUTO)
            cr_assert_eq(res[k].backend, HICP_BACKEND_CUDA, "frame %d on %s", k,
                         hicp_backend_name(res[k].backend));
        }
      }
      hicp_context_destroy(ctx);
    }
  }
  batch_case_free(m, NF, frames);
}

static void *cancel_after_100ms(void *ctx)
{
  usleep(100000);
  hicp_context_cancel((hicp_context *)ctx);
  return NULL;
}

/* A cloud of LONG_N normal points (seed 41), its model m, and a scan s of
 * it turned (4, -3, 5) degrees, moved 0.05 and noisy: seconds of work at
 * 200,000 iterations, which o asks for (no early stop).  gc is a CUDA
 * context that has registered the scan for one iteration, so that the
 * device, the kernel and the model are ready: a cancel during that set-up
 * stops before the first iteration (seen on an H200: 0 iterations), which
 * would not show that the kernel itself hears it.  gpu: for the test's
 * result. */
enum { LONG_N = 3000 };
struct long_case {
  hicp_model *m;
  float *s;
  hicp_reg_options o;
  hicp_context *gc;
  hicp_result gpu;
};

static void long_case_make(struct long_case *c)
{
  th_rng r;
  th_rng_seed(&r, 41);
  float *p = malloc(sizeof(float) * 3 * LONG_N), *s = malloc(sizeof(float) * 3 * LONG_N);
  cr_assert(p != NULL && s != NULL);
  for (int i = 0; i < 3 * LONG_N; i++)
    p[i] = (float)th_normal(&r);
  double R[9];
  th_rotation(4, -3, 5, R);
  for (int i = 0; i < LONG_N; i++)
    for (int d = 0; d < 3; d++)
      s[3 * i + d] = (float)(R[3 * d] * p[3 * i] + R[3 * d + 1] * p[3 * i + 1] +
                             R[3 * d + 2] * p[3 * i + 2] + 0.05 + 0.01 * th_normal(&r));
  c->m = model_of(p, LONG_N);
  free(p);
  c->s = s;
  hicp_reg_options_init(&c->o);
  c->o.max_iter = 1;
  c->o.tol = 0;
  c->gc = th_context(1, HICP_BACKEND_CUDA);
  hicp_result_init(&c->gpu);
  cr_assert_eq(hicp_register(c->gc, c->m, s, LONG_N, &c->o, NULL, &c->gpu), 0, "%s",
               hicp_context_error(c->gc));
  cr_assert_eq(c->gpu.backend, HICP_BACKEND_CUDA);
  c->o.max_iter = 200000;
}

static void long_case_free(struct long_case *c)
{
  hicp_context_destroy(c->gc);
  hicp_model_destroy(c->m);
  free(c->s);
}

/* c->gpu is the CPU's transform after as many iterations as it ran, with
 * c->o but no time budget. */
static void cpu_agrees(const struct long_case *c, const char *what)
{
  hicp_context *cc = th_context(2, HICP_BACKEND_CPU);
  hicp_result cpu;
  hicp_result_init(&cpu);
  hicp_reg_options o = c->o;
  o.max_iter = c->gpu.iterations;
  o.time_budget_ms = 0;
  cr_assert_eq(hicp_register(cc, c->m, c->s, LONG_N, &o, NULL, &cpu), 0, "%s",
               hicp_context_error(cc));
  cr_assert_eq(cpu.iterations, c->gpu.iterations);
  cr_assert(memcmp(&cpu.transform, &c->gpu.transform, sizeof cpu.transform) == 0,
            "%s after %d iterations: not the CPU's transform", what, c->gpu.iterations);
  hicp_context_destroy(cc);
}

/* hicp_context_cancel() from another thread reaches the running kernel
 * (through the mapped host flag it reads once an iteration): a
 * registration set for 200,000 iterations, seconds of work, stops with
 * HICP_STOP_CANCELED after whole iterations, at the CPU's transform for
 * that many. */
Test(gpu, cancel_reaches_the_kernel, .timeout = 120)
{
  need_gpu();
  struct long_case c;
  long_case_make(&c);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, cancel_after_100ms, c.gc), 0);
  cr_assert_eq(hicp_register(c.gc, c.m, c.s, LONG_N, &c.o, NULL, &c.gpu), 0, "%s",
               hicp_context_error(c.gc));
  pthread_join(t, NULL);
  cr_assert_eq(c.gpu.backend, HICP_BACKEND_CUDA);
  cr_assert_eq(c.gpu.stop, HICP_STOP_CANCELED, "stopped by %s after %d iterations",
               hicp_stop_name(c.gpu.stop), c.gpu.iterations);
  cr_assert(c.gpu.iterations > 0 && c.gpu.iterations < c.o.max_iter, "%d iterations",
            c.gpu.iterations);
  cpu_agrees(&c, "cancelled");
  long_case_free(&c);
}

struct long_run {
  hicp_context *ctx;
  const hicp_model *m;
  const float *s;
  size_t n;
  hicp_reg_options o;
  hicp_result res;
  int rc;
};

static void *long_run_main(void *arg)
{
  struct long_run *a = arg;
  a->rc = hicp_register(a->ctx, a->m, a->s, a->n, &a->o, NULL, &a->res);
  return NULL;
}

static void *cancel_after_600ms(void *ctx)
{
  usleep(600000);
  hicp_context_cancel((hicp_context *)ctx);
  return NULL;
}

/* A time budget stops the kernel with HICP_STOP_TIMEOUT, at the CPU's
 * transform for as many iterations.  The budget counts from the call, not
 * from the kernel's start: a registration whose kernel waits behind
 * another context's (a scan of 2^20 points, whose grid fills the device)
 * stops after its first iteration once it runs, where it took a whole
 * budget of its own after the wait (stop 46). */
Test(gpu, time_budget_counts_from_the_call, .timeout = 120)
{
  need_gpu();
  enum { N = LONG_N, BIG = 1 << 20 };
  struct long_case c;
  long_case_make(&c);

  /* Alone on the device: stopped by the kernel's own count. */
  c.o.time_budget_ms = 30;
  double t0 = hicp__now_ms();
  cr_assert_eq(hicp_register(c.gc, c.m, c.s, N, &c.o, NULL, &c.gpu), 0, "%s",
               hicp_context_error(c.gc));
  double took = hicp__now_ms() - t0;
  cr_assert_eq(c.gpu.stop, HICP_STOP_TIMEOUT, "stopped by %s after %d iterations",
               hicp_stop_name(c.gpu.stop), c.gpu.iterations);
  cr_assert(c.gpu.iterations > 1 && c.gpu.iterations < c.o.max_iter, "%d iterations",
            c.gpu.iterations);
  cr_assert_lt(took, 1000.0, "a 30 ms budget took %.1f ms", took);
  cpu_agrees(&c, "out of time");

  /* Queued behind a kernel that fills the device until it is cancelled. */
  float *big = malloc(sizeof(float) * 3 * (size_t)BIG);
  cr_assert_not_null(big);
  for (size_t i = 0; i < BIG; i++)
    memcpy(&big[3 * i], &c.s[3 * (i % N)], sizeof(float) * 3);
  struct long_run a = {.ctx = th_context(1, HICP_BACKEND_CUDA), .m = c.m, .s = big, .n = BIG};
  hicp_reg_options_init(&a.o);
  a.o.max_iter = 1;
  hicp_result_init(&a.res);
  cr_assert_eq(hicp_register(a.ctx, c.m, big, BIG, &a.o, NULL, &a.res), 0, "%s",
               hicp_context_error(a.ctx));
  a.o.max_iter = 200000;
  a.o.tol = 0;
  pthread_t ta, tc;
  cr_assert_eq(pthread_create(&ta, NULL, long_run_main, &a), 0);
  usleep(200000);
  cr_assert_eq(pthread_create(&tc, NULL, cancel_after_600ms, a.ctx), 0);
  c.o.time_budget_ms = 50;
  t0 = hicp__now_ms();
  cr_assert_eq(hicp_register(c.gc, c.m, c.s, N, &c.o, NULL, &c.gpu), 0, "%s",
               hicp_context_error(c.gc));
  took = hicp__now_ms() - t0;
  pthread_join(tc, NULL);
  pthread_join(ta, NULL);
  cr_assert_eq(a.rc, 0, "%s", hicp_context_error(a.ctx));
  cr_assert_eq(a.res.stop, HICP_STOP_CANCELED, "the long run stopped by %s",
               hicp_stop_name(a.res.stop));
  cr_assert_gt(took, 300.0, "the registration took %.1f ms: it did not wait for the long run's "
               "kernel, so the test shows nothing", took);
  cr_assert_eq(c.gpu.stop, HICP_STOP_TIMEOUT, "stopped by %s after %d iterations",
               hicp_stop_name(c.gpu.stop), c.gpu.iterations);
  cr_assert_leq(c.gpu.iterations, 1, "%d iterations after a %.1f ms wait, for a budget of 50 ms",
                c.gpu.iterations, took);
  cpu_agrees(&c, "out of time after a wait");
  hicp_context_destroy(a.ctx);
  free(big);
  long_case_free(&c);
}

/* Faults: "cuda" fails cleanly with the right code; "auto" and "hybrid"
 * finish on the CPU and say so; a batch loses no frame. */
Test(gpu, faults)
{
  need_gpu();
  th_rng r;
  th_rng_seed(&r, 3);
  size_t n = 5000;
  float *p = malloc(sizeof(float) * 3 * n);
  for (size_t i = 0; i < 3 * n; i++)
    p[i] = (float)th_normal(&r);
  hicp_model *m = model_of(p, n);
  static const struct {
    const char *fault;
    int code;
  } cases[] = {{"alloc", HICP_ENOMEM}, {"kernel", HICP_EDEVICE}, {"lost", HICP_EDEVICE}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    setenv("HICP_GPU_FAULT", cases[k].fault, 1);
    hicp_context *gc = th_context(1, HICP_BACKEND_CUDA);
    hicp_result res;
    hicp_result_init(&res);
    int rc = hicp_register(gc, m, p, n, NULL, NULL, &res);
    cr_assert_eq(rc, cases[k].code, "%s: %d (%s)", cases[k].fault, rc, hicp_context_error(gc));
    cr_assert(strstr(hicp_context_error(gc), "CUDA") != NULL, "%s", hicp_context_error(gc));
    hicp_context_destroy(gc);
    hicp_context *ac = th_context(1, HICP_BACKEND_AUTO);
    hicp_result_init(&res);
    cr_assert_eq(hicp_register(ac, m, p, n, NULL, NULL, &res), 0);
    cr_assert_eq(res.backend, HICP_BACKEND_CPU);
    cr_assert(strstr(res.note, "GPU failed") != NULL, "%s", res.note);
    const float *frames[4] = {p, p, p, p};
    size_t counts[4] = {n, n / 2, n, n / 3};
    hicp_result br[4];
    for (int i = 0; i < 4; i++)
      hicp_result_init(&br[i]);
    cr_assert_eq(hicp_register_batch(ac, m, frames, counts, 4, NULL, NULL, NULL, br), 0);
    for (int i = 0; i < 4; i++) {
      cr_assert_eq(br[i].frame, (uint64_t)i);
      cr_assert_eq(br[i].error, 0);
    }
    hicp_context_destroy(ac);
    /* "hybrid" tracking carries on on the CPU too, every frame, with the
     * CPU's poses (until stop 42 the first device failure failed the
     * frame and every later one) */
    hicp_batch_options bo;
    hicp_batch_options_init(&bo);
    bo.track = 1;
    hicp_result tr[4], cr[4];
    for (int i = 0; i < 4; i++) {
      hicp_result_init(&tr[i]);
      hicp_result_init(&cr[i]);
    }
    hicp_context *hc = th_context(2, HICP_BACKEND_HYBRID), *cc = th_context(2, HICP_BACKEND_CPU);
    cr_assert_eq(hicp_register_batch(hc, m, frames, counts, 4, NULL, &bo, NULL, tr), 0,
                 "%s: %s", cases[k].fault, hicp_context_error(hc));
    cr_assert_eq(hicp_register_batch(cc, m, frames, counts, 4, NULL, &bo, NULL, cr), 0);
    for (int i = 0; i < 4; i++) {
      cr_assert_eq(tr[i].error, 0, "%s frame %d: %s", cases[k].fault, i, tr[i].note);
      cr_assert_eq(tr[i].backend, HICP_BACKEND_CPU, "%s frame %d", cases[k].fault, i);
      cr_assert(strstr(tr[i].note, "GPU failed") != NULL, "%s frame %d: %s", cases[k].fault, i,
                tr[i].note);
      cr_assert(memcmp(&tr[i].transform, &cr[i].transform, sizeof cr[i].transform) == 0,
                "%s frame %d", cases[k].fault, i);
    }
    hicp_context_destroy(hc);
    hicp_context_destroy(cc);
  }
  unsetenv("HICP_GPU_FAULT");
  free(p);
  hicp_model_destroy(m);
}
